import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { listProjects } from '../../commands/projects.js';
import { presentProject } from '../presenters.js';
import { ref } from '../schemas/ref.js';
import { Project } from '../schemas/common.js';
import { principal, responses, type RouteDeps } from './deps.js';

export const projectRoutes: FastifyPluginAsync<RouteDeps> = async (app, deps) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/projects',
    {
      schema: {
        tags: ['projects'],
        summary: 'List the projects the caller can access',
        response: responses(200, Type.Array(ref(Project))),
      },
    },
    async (req) => (await listProjects(deps.ctx, principal(req))).map(presentProject),
  );
};
