import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  attachToVpc,
  detachFromVpc,
  renameService,
  resizeService,
  setHA,
  setPooler,
  setServiceEnvironment,
  updatePassword,
} from '../../commands/service-config.js';
import type { Service as ServiceRecord } from '../../domain/types.js';
import { presentService } from '../presenters.js';
import { MessageResponse, SetEnvironmentInput } from '../schemas/common.js';
import { ServiceParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import {
  ResizeInput,
  Service,
  ServiceRenameInput,
  ServiceVpcInput,
  SetHAInput,
  UpdatePasswordInput,
} from '../schemas/service.js';
import { presentOptions, principal, responses, type RouteDeps } from './deps.js';

export const serviceConfigRoutes: FastifyPluginAsync<RouteDeps> = async (app, deps) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { ctx } = deps;
  const tags = ['services'];
  const one = '/projects/:project_id/services/:service_id';
  const message = ref(MessageResponse);
  const present = async (svc: ServiceRecord) =>
    presentService(
      svc,
      await ctx.store.replicaSets.listByService(svc.id),
      presentOptions(deps, { kind: 'service', id: svc.id }),
    );

  r.post(
    `${one}/attachToVPC`,
    {
      schema: {
        tags,
        summary: 'Attach a service to a VPC',
        params: ServiceParams,
        body: ref(ServiceVpcInput),
        response: responses(202, message),
      },
    },
    async (req, reply) => {
      const svc = await attachToVpc(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body.vpc_id,
      );
      return reply
        .status(202)
        .send({ message: `Service ${svc.id} is being attached to VPC ${req.body.vpc_id}.` });
    },
  );

  r.post(
    `${one}/detachFromVPC`,
    {
      schema: {
        tags,
        summary: 'Detach a service from its VPC',
        params: ServiceParams,
        body: ref(ServiceVpcInput),
        response: responses(202, message),
      },
    },
    async (req, reply) => {
      const svc = await detachFromVpc(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body.vpc_id,
      );
      return reply
        .status(202)
        .send({ message: `Service ${svc.id} is being detached from VPC ${req.body.vpc_id}.` });
    },
  );

  r.post(
    `${one}/resize`,
    {
      schema: {
        tags,
        summary: 'Change CPU and memory (asynchronous)',
        params: ServiceParams,
        body: ref(ResizeInput),
        response: responses(202, ref(Service)),
      },
    },
    async (req, reply) => {
      const svc = await resizeService(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body,
      );
      return reply.status(202).send(await present(svc));
    },
  );

  r.post(
    `${one}/setHA`,
    {
      schema: {
        tags,
        summary: 'Change the HA replicas (asynchronous)',
        params: ServiceParams,
        body: ref(SetHAInput),
        response: responses(202, ref(Service)),
      },
    },
    async (req, reply) => {
      const svc = await setHA(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body,
      );
      return reply.status(202).send(await present(svc));
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
          params: ServiceParams,
          response: responses(200, message),
        },
      },
      async (req) => {
        await setPooler(ctx, principal(req), req.params.project_id, req.params.service_id, enabled);
        return { message: `Connection pooler ${enabled ? 'enabled' : 'disabled'}.` };
      },
    );
  }

  r.post(
    `${one}/updatePassword`,
    {
      schema: {
        tags,
        summary: 'Set the tsdbadmin password',
        params: ServiceParams,
        body: ref(UpdatePasswordInput),
        response: responses(204, null),
      },
    },
    async (req, reply) => {
      await updatePassword(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body.password,
      );
      return reply.status(204).send();
    },
  );

  r.post(
    `${one}/rename`,
    {
      schema: {
        tags,
        summary: 'Rename a service',
        params: ServiceParams,
        body: ref(ServiceRenameInput),
        response: responses(200, ref(Service)),
      },
    },
    async (req) =>
      present(
        await renameService(
          ctx,
          principal(req),
          req.params.project_id,
          req.params.service_id,
          req.body.name,
        ),
      ),
  );

  r.post(
    `${one}/setEnvironment`,
    {
      schema: {
        tags,
        summary: 'Set the environment tag',
        params: ServiceParams,
        body: ref(SetEnvironmentInput),
        response: responses(200, message),
      },
    },
    async (req) => {
      await setServiceEnvironment(
        ctx,
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body.environment,
      );
      return { message: `Environment set to ${req.body.environment}.` };
    },
  );
};
