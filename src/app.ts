// buildApp: the HTTP face of Basin. It wires routes to commands and never
// listens; main.ts (and the tests) decide where it runs.

import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import { AccessLog, sharedRequestLogger } from './api/access-log.js';
import { clientErrorHandler, frameworkErrors, registerErrorHandling } from './api/errors.js';
import { authenticate } from './api/auth.js';
import { type RateLimits, registerRateLimits } from './api/rate-limit.js';
import { authRoutes } from './api/routes/auth.js';
import { logRoutes } from './api/routes/logs.js';
import { peeringRoutes } from './api/routes/peerings.js';
import { projectRoutes } from './api/routes/projects.js';
import { replicaSetRoutes } from './api/routes/replica-sets.js';
import { serviceConfigRoutes } from './api/routes/service-config.js';
import { serviceRoutes } from './api/routes/services.js';
import { vpcRoutes } from './api/routes/vpcs.js';
import type { RouteDeps } from './api/routes/deps.js';
import { SHARED_SCHEMAS } from './api/schemas/index.js';
import { openApiInfo } from './api/openapi.js';
import { cachedSerializers } from './api/serializers.js';
import type { Principal } from './commands/context.js';
import type { ReadView } from './store/store.js';

export interface AppOptions {
  deps: RouteDeps;
  bodyLimitBytes: number;
  /** Basin's logger: the access log and Fastify's own lines; nothing is logged without one. */
  loggerInstance?: PinoLogger | undefined;
  rateLimits: RateLimits;
  https?: { cert: string; key: string } | null;
}

export async function buildApp({
  deps,
  bodyLimitBytes,
  loggerInstance,
  rateLimits,
  https = null,
}: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(loggerInstance
      ? {
          loggerInstance,
          logController: new AccessLog(loggerInstance),
          childLoggerFactory: sharedRequestLogger,
        }
      : { logger: false }),
    bodyLimit: bodyLimitBytes,
    frameworkErrors,
    clientErrorHandler,
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } },
    // Strict types: a number where the spec says string is a 400, not coerced.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    ...(https ? { https } : {}),
  } as FastifyServerOptions) as unknown as FastifyInstance;

  registerErrorHandling(app);
  jsonBodies(app);
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  await app.register(swagger, openApiInfo);
  const limitUnauthenticated = await registerRateLimits(app, rateLimits);

  await app.register(
    async (v1) => {
      v1.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
      await v1.register(async (api) => {
        api.decorateRequest('principal', null);
        api.decorateRequest('reads', null);
        // Synchronous, like the read view: an authenticated request passes
        // without a promise. The rate limits' hook comes after it (rate-limit.ts).
        api.addHook('onRequest', (req, reply, done) => {
          const r = req as unknown as { principal: Principal; reads: ReadView };
          // One read view per request, made before its first read (routes/deps.ts).
          r.reads = deps.ctx.store.readView();
          try {
            r.principal = authenticate(r.reads, req.headers.authorization);
          } catch (err) {
            // Failed authentications count by client address: 429 once over budget.
            limitUnauthenticated(req, reply).then(() => done(err as Error), done);
            return;
          }
          done();
        });
        for (const routes of [
          projectRoutes,
          vpcRoutes,
          peeringRoutes,
          serviceRoutes,
          serviceConfigRoutes,
          logRoutes,
          replicaSetRoutes,
          authRoutes,
        ]) {
          await api.register(routes, deps);
        }
      });
    },
    { prefix: '/v1' },
  );
  return app;
}

/**
 * Only JSON bodies are accepted (anything else is a 415). An empty body counts
 * as no body, so `curl -X POST -H 'Content-Type: application/json' …/start`
 * works; routes that need a body then say which fields are missing.
 */
function jsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  const parse = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (typeof body === 'string' && body.trim() === '') return done(null, undefined);
    parse(req, body as string, done);
  });
}
