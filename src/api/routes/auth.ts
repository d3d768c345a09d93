import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { authInfo } from '../../commands/auth-info.js';
import { logout } from '../../commands/logout.js';
import { OPTIONAL_BODY } from '../openapi.js';
import { presentAuthInfo } from '../presenters.js';
import { AuthInfo, LogoutInput } from '../schemas/auth.js';
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
  r.post(
    '/auth/logout',
    {
      schema: {
        tags: ['auth'],
        summary:
          "End the caller's session: a user token is revoked (the next request with it is a 401); a project credential is the project's key and is kept. 204 either way.",
        body: ref(LogoutInput),
        response: responses(204, null),
        [OPTIONAL_BODY]: true,
      },
      // The body is optional upstream: none at all reads as `{}`.
      preValidation: (req, _reply, done) => {
        req.body ??= {};
        done();
      },
    },
    async (req, reply) => {
      await logout(ctx, principal(req));
      return reply.status(204).send();
    },
  );
};
