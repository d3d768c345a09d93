import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { visibleProject } from '../../commands/context.js';
import {
  createService,
  deleteService,
  forkService,
  setRunning,
} from '../../commands/service-lifecycle.js';
import { loadServiceOrReplica } from '../../commands/service-lookup.js';
import type { Service as ServiceRecord } from '../../domain/types.js';
import type { ReadView } from '../../store/store.js';
import { PresentedServices } from '../presented-cache.js';
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

  const presented = new PresentedServices(deps.present);
  /**
   * `from` reads the replica sets: a GET's read view (whose frozen documents
   * let the body be reused, see presented-cache.ts), or the store after a write.
   */
  const present = async (
    svc: ServiceRecord,
    from: Pick<ReadView, 'replicaSets'>,
    initialPassword?: string,
  ) => {
    const replicaSets = await from.replicaSets.listByService(svc.id);
    const metrics = ctx.driver.metrics({ kind: 'service', id: svc.id });
    return initialPassword === undefined
      ? presented.present(svc, replicaSets, metrics)
      : presentService(svc, replicaSets, { ...deps.present, metrics }, initialPassword);
  };

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
    async (req) => {
      const projectId = visibleProject(principal(req), req.params.project_id);
      const view = reads(req);
      return Promise.all(
        (await view.services.listByProject(projectId)).map((s) => present(s, view)),
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
      return reply.status(202).send(await present(service, ctx.store, initialPassword));
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
    async (req) => {
      const view = reads(req);
      const found = await loadServiceOrReplica(
        view,
        principal(req),
        req.params.project_id,
        req.params.service_id,
      );
      if ('service' in found) return present(found.service, view);
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
        return reply.status(202).send(await present(svc, ctx.store));
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
      return reply.status(202).send(await present(service, ctx.store, initialPassword));
    },
  );
};
