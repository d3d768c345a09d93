import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { createPeering, deletePeering, getPeering, listPeerings } from '../../commands/peerings.js';
import { presentPeering } from '../presenters.js';
import { PeeringParams, VpcParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import { Peering, PeeringCreateInput } from '../schemas/vpc.js';
import { principal, responses, type RouteDeps } from './deps.js';

export const peeringRoutes: FastifyPluginAsync<RouteDeps> = async (app, { ctx }) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['peerings'];
  const base = '/projects/:project_id/vpcs/:vpc_id/peerings';

  r.get(
    base,
    {
      schema: {
        tags,
        summary: 'List peerings of a VPC',
        params: VpcParams,
        response: responses(200, Type.Array(ref(Peering))),
      },
    },
    async (req) =>
      (await listPeerings(ctx, principal(req), req.params.project_id, req.params.vpc_id)).map(
        presentPeering,
      ),
  );

  r.post(
    base,
    {
      schema: {
        tags,
        summary: 'Request a peering to a VPC in another cloud account',
        params: VpcParams,
        body: ref(PeeringCreateInput),
        response: responses(201, ref(Peering)),
      },
    },
    async (req, reply) => {
      const peering = await createPeering(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.vpc_id,
        req.body,
      );
      return reply.status(201).send(presentPeering(peering));
    },
  );

  r.get(
    `${base}/:peering_id`,
    {
      schema: {
        tags,
        summary: 'Get a peering',
        params: PeeringParams,
        response: responses(200, ref(Peering)),
      },
    },
    async (req) => {
      const { project_id, vpc_id, peering_id } = req.params;
      return presentPeering(await getPeering(ctx, principal(req), project_id, vpc_id, peering_id));
    },
  );

  r.delete(
    `${base}/:peering_id`,
    {
      schema: {
        tags,
        summary: 'Delete a peering',
        params: PeeringParams,
        response: responses(204, null),
      },
    },
    async (req, reply) => {
      const { project_id, vpc_id, peering_id } = req.params;
      await deletePeering(ctx, principal(req), project_id, vpc_id, peering_id);
      return reply.status(204).send();
    },
  );
};
