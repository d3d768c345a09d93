import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { authInfo } from '../../commands/auth-info.js';
import { presentAuthInfo } from '../presenters.js';
import { AuthInfo } from '../schemas/auth.js';
import { ref } from '../schemas/ref.js';
import { principal, responses, type RouteDeps } from './deps.js';

export const authRoutes: FastifyPluginAsync<RouteDeps> = async (app, { ctx }) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/auth/info',
    {
      schema: {
        tags: ['auth'],
        summary: 'Who the calling credential is: a project credential (apiKey) or a user token',
        response: responses(200, ref(AuthInfo)),
      },
    },
    async (req) => presentAuthInfo(await authInfo(ctx, principal(req))),
  );
};
