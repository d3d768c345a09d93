import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  createService,
  deleteService,
  forkService,
  setRunning,
} from '../../commands/service-lifecycle.js';
import { listServices, loadServiceOrReplica } from '../../commands/service-lookup.js';
import { currentUsage } from '../../commands/usage.js';
import type { Service as ServiceRecord } from '../../domain/types.js';
import type { ReadView } from '../../store/store.js';
import { presentReplicaSetAsService, presentService } from '../presenters.js';
import { ProjectParams, ServiceParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import { Service, ServiceCreateInput, ServiceForkInput } from '../schemas/service.js';
import { presentOptions, principal, reads, responses, type RouteDeps } from './deps.js';

export const serviceRoutes: FastifyPluginAsync<RouteDeps> = async (app, deps) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { ctx } = deps;
  const tags = ['services'];
  const one = '/projects/:project_id/services/:service_id';

  const metrics = (svc: ServiceRecord) => currentUsage(ctx, { kind: 'service', id: svc.id });
  /** A service read from a GET's read view: its frozen documents let the body be reused. */
  const presentRead = (svc: ServiceRecord, view: ReadView) => deps.presented.read(svc, view);
  /** A service just written, with its replica sets read afresh. */
  const presentWritten = async (svc: ServiceRecord, initialPassword?: string) =>
    presentService(
      svc,
      await ctx.store.replicaSets.listByService(svc.id),
      { ...deps.present, metrics: metrics(svc) },
      initialPassword,
    );

  r.get(
    '/projects/:project_id/services',
    {
      schema: {
        tags,
        summary: 'List services',
        params: ProjectParams,
        response: responses(200, Type.Array(ref(Service))),
      },
    },
    (req) => {
      const view = reads(req);
      return listServices(view, principal(req), req.params.project_id).map((s) =>
        presentRead(s, view),
      );
    },
  );

  r.post(
    '/projects/:project_id/services',
    {
      schema: {
        tags,
        summary: 'Create a service (asynchronous: answers QUEUED with its initial_password)',
        params: ProjectParams,
        body: ref(ServiceCreateInput),
        response: responses(202, ref(Service)),
      },
    },
    async (req, reply) => {
      const { service, initialPassword } = await createService(
        ctx,
        principal(req),
        req.params.project_id,
        req.body,
      );
      return reply.status(202).send(await presentWritten(service, initialPassword));
    },
  );

  r.get(
    one,
    {
      schema: {
        tags,
        summary: 'Get a service, or a read replica set seen as a service',
        params: ServiceParams,
        response: responses(200, ref(Service)),
      },
    },
    // Synchronous: a poll of an unchanged service is answered without a promise.
    (req) => {
      const view = reads(req);
      const found = loadServiceOrReplica(
        view,
        principal(req),
        req.params.project_id,
        req.params.service_id,
      );
      if ('service' in found) return presentRead(found.service, view);
      const { replicaSet, primary } = found;
      return presentReplicaSetAsService(
        replicaSet,
        primary,
        presentOptions(deps, { kind: 'replicaSet', id: replicaSet.id }),
      );
    },
  );

  r.delete(
    one,
    {
      schema: {
        tags,
        summary: 'Delete a service (asynchronous)',
        params: ServiceParams,
        response: responses(202, null),
      },
    },
    async (req, reply) => {
      await deleteService(ctx, principal(req), req.params.project_id, req.params.service_id);
      return reply.status(202).send();
    },
  );

  for (const action of ['start', 'stop'] as const) {
    r.post(
      `${one}/${action}`,
      {
        schema: {
          tags,
          summary:
            action === 'start'
              ? 'Start a stopped service (asynchronous)'
              : 'Stop a running service (asynchronous)',
          params: ServiceParams,
          response: responses(202, ref(Service)),
        },
      },
      async (req, reply) => {
        const svc = await setRunning(
          ctx,
          principal(req),
          req.params.project_id,
          req.params.service_id,
          action,
        );
        return reply.status(202).send(await presentWritten(svc));
      },
    );
  }

  r.post(
    `${one}/forkService`,
    {
      schema: {
        tags,
        summary: 'Fork a service into a new, independent one (asynchronous)',
        params: ServiceParams,
        body: ref(ServiceForkInput),
        response: responses(202, ref(Service)),
      },
    },
    async (req, reply) => {
      const { service, initialPassword } = await forkService(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body,
      );
      return reply.status(202).send(await presentWritten(service, initialPassword));
    },
  );
};
