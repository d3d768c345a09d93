import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { createVpc, deleteVpc, getVpc, listVpcs, renameVpc } from '../../commands/vpcs.js';
import { presentVpc } from '../presenters.js';
import { ProjectParams, VpcParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import { Vpc, VpcCreateInput, VpcRenameInput } from '../schemas/vpc.js';
import { principal, responses, type RouteDeps } from './deps.js';

export const vpcRoutes: FastifyPluginAsync<RouteDeps> = async (app, { ctx }) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['vpcs'];

  r.get(
    '/projects/:project_id/vpcs',
    {
      schema: {
        tags,
        summary: 'List VPCs',
        params: ProjectParams,
        response: responses(200, Type.Array(ref(Vpc))),
      },
    },
    async (req) => (await listVpcs(ctx, principal(req), req.params.project_id)).map(presentVpc),
  );

  r.post(
    '/projects/:project_id/vpcs',
    {
      schema: {
        tags,
        summary: 'Create a VPC',
        params: ProjectParams,
        body: ref(VpcCreateInput),
        response: responses(201, ref(Vpc)),
      },
    },
    async (req, reply) => {
      const vpc = await createVpc(ctx, principal(req), req.params.project_id, req.body);
      return reply.status(201).send(presentVpc(vpc));
    },
  );

  r.get(
    '/projects/:project_id/vpcs/:vpc_id',
    {
      schema: { tags, summary: 'Get a VPC', params: VpcParams, response: responses(200, ref(Vpc)) },
    },
    async (req) =>
      presentVpc(await getVpc(ctx, principal(req), req.params.project_id, req.params.vpc_id)),
  );

  r.delete(
    '/projects/:project_id/vpcs/:vpc_id',
    {
      schema: {
        tags,
        summary: 'Delete a VPC without services or peerings',
        params: VpcParams,
        response: responses(204, null),
      },
    },
    async (req, reply) => {
      await deleteVpc(ctx, principal(req), req.params.project_id, req.params.vpc_id);
      return reply.status(204).send();
    },
  );

  r.post(
    '/projects/:project_id/vpcs/:vpc_id/rename',
    {
      schema: {
        tags,
        summary: 'Rename a VPC',
        params: VpcParams,
        body: ref(VpcRenameInput),
        response: responses(200, ref(Vpc)),
      },
    },
    async (req) =>
      presentVpc(
        await renameVpc(
          ctx,
          principal(req),
          req.params.project_id,
          req.params.vpc_id,
          req.body.name,
        ),
      ),
  );
};
