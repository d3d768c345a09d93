import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  createReplicaSet,
  deleteReplicaSet,
  listReplicaSets,
  resizeReplicaSet,
  setReplicaSetEnvironment,
  setReplicaSetPooler,
} from '../../commands/replica-sets.js';
import { presentReplicaSet } from '../presenters.js';
import { MessageResponse, SetEnvironmentInput } from '../schemas/common.js';
import { ReplicaSetParams, ServiceParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import {
  ReadReplicaSet,
  ReplicaSetCreateInput,
  ReplicaSetResizeInput,
} from '../schemas/service.js';
import { principal, responses, type RouteDeps } from './deps.js';

export const replicaSetRoutes: FastifyPluginAsync<RouteDeps> = async (app, deps) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { ctx, present } = deps;
  const tags = ['read replica sets'];
  const base = '/projects/:project_id/services/:service_id/replicaSets';
  const one = `${base}/:replica_set_id`;
  const message = ref(MessageResponse);
  const ids = (p: { project_id: string; service_id: string; replica_set_id: string }) => ({
    projectId: p.project_id,
    serviceId: p.service_id,
    replicaSetId: p.replica_set_id,
  });

  r.get(
    base,
    {
      schema: {
        tags,
        summary: 'List read replica sets',
        params: ServiceParams,
        response: responses(200, Type.Array(ref(ReadReplicaSet))),
      },
    },
    async (req) =>
      (
        await listReplicaSets(ctx, principal(req), req.params.project_id, req.params.service_id)
      ).map((rs) => presentReplicaSet(rs, present)),
  );

  r.post(
    base,
    {
      schema: {
        tags,
        summary: 'Create a read replica set (asynchronous)',
        params: ServiceParams,
        body: ref(ReplicaSetCreateInput),
        response: responses(202, ref(ReadReplicaSet)),
      },
    },
    async (req, reply) => {
      const rs = await createReplicaSet(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body,
      );
      return reply.status(202).send(presentReplicaSet(rs, present));
    },
  );

  r.delete(
    one,
    {
      schema: {
        tags,
        summary: 'Delete a read replica set (asynchronous)',
        params: ReplicaSetParams,
        response: responses(202, null),
      },
    },
    async (req, reply) => {
      await deleteReplicaSet(ctx, principal(req), ids(req.params));
      return reply.status(202).send();
    },
  );

  r.post(
    `${one}/resize`,
    {
      schema: {
        tags,
        summary: 'Resize a read replica set (asynchronous)',
        params: ReplicaSetParams,
        body: ref(ReplicaSetResizeInput),
        response: responses(202, message),
      },
    },
    async (req, reply) => {
      const rs = await resizeReplicaSet(ctx, principal(req), ids(req.params), req.body);
      return reply.status(202).send({ message: `Read replica set ${rs.id} is being resized.` });
    },
  );

  for (const [path, enabled] of [
    ['enablePooler', true],
    ['disablePooler', false],
  ] as const) {
    r.post(
      `${one}/${path}`,
      {
        schema: {
          tags,
          summary: `${enabled ? 'Enable' : 'Disable'} the connection pooler`,
          params: ReplicaSetParams,
          response: responses(200, message),
        },
      },
      async (req) => {
        await setReplicaSetPooler(ctx, principal(req), ids(req.params), enabled);
        return { message: `Connection pooler ${enabled ? 'enabled' : 'disabled'}.` };
      },
    );
  }

  r.post(
    `${one}/setEnvironment`,
    {
      schema: {
        tags,
        summary: 'Set the environment tag',
        params: ReplicaSetParams,
        body: ref(SetEnvironmentInput),
        response: responses(200, message),
      },
    },
    async (req) => {
      await setReplicaSetEnvironment(ctx, principal(req), ids(req.params), req.body.environment);
      return { message: `Environment set to ${req.body.environment}.` };
    },
  );
};
