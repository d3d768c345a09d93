// buildApp: the HTTP face of Basin. It wires routes to commands and never
// listens; main.ts (and the tests) decide where it runs.

import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { AccessLog, requestIds, sharedRequestLogger } from './api/access-log.js';
import { clientErrorHandler, frameworkErrors, registerErrorHandling } from './api/errors.js';
import { authenticate, credentialKey } from './api/auth.js';
import { type ConsoleOptions, consoleRoutes } from './api/console.js';
import { PollingFastLane } from './api/polling-fast-lane.js';
import { PresentedServices } from './api/presented-cache.js';
import { type RateLimits, registerRateLimits } from './api/rate-limit.js';
import { analyticsRoutes } from './api/routes/analytics.js';
import { authRoutes } from './api/routes/auth.js';
import { logRoutes } from './api/routes/logs.js';
import { metricsRoutes } from './api/routes/metrics.js';
import { peeringRoutes } from './api/routes/peerings.js';
import { projectRoutes } from './api/routes/projects.js';
import { replicaSetRoutes } from './api/routes/replica-sets.js';
import { serviceConfigRoutes } from './api/routes/service-config.js';
import { serviceRoutes } from './api/routes/services.js';
import { vpcRoutes } from './api/routes/vpcs.js';
import type { RouteDeps } from './api/routes/deps.js';
import { sharedSchemas } from './api/schemas/index.js';
import { openApiInfo } from './api/openapi.js';
import { cachedSerializers, type RouteSerializers } from './api/serializers.js';
import { LazySchemas, rememberLazySchemas } from './api/lazy-schemas.js';
import type { Principal } from './commands/context.js';
import { DEFAULT_SERVICE_TYPE_NAME } from './domain/service-type-names.js';
import { currentUsage } from './commands/usage.js';
import type { ReadView } from './store/store.js';
import type { HttpLimits } from './config.js';
import type { BasinMetrics } from './metrics/basin-metrics.js';

export interface AppOptions {
  deps: Omit<RouteDeps, 'presented'>;
  bodyLimitBytes: number;
  /** Timeouts and the connection cap (config.ts); Node's and Fastify's defaults otherwise. */
  http?: HttpLimits | undefined;
  /** Basin's logger: the access log and Fastify's own lines; nothing is logged without one. */
  loggerInstance?: PinoLogger | undefined;
  rateLimits: RateLimits;
  https?: { cert: string; key: string } | null;
  /**
   * Whether polls of a service are offered to the fast lane before Fastify
   * (api/polling-fast-lane.ts); on by default. Off, Fastify answers everything:
   * the tests compare the two.
   */
  fastLane?: boolean;
  /** The web console at `/` (api/console.ts); none when absent (`--console off`). */
  webConsole?: ConsoleOptions | null;
  /** Counts every request Fastify answers (metrics/basin-metrics.ts); none when absent. */
  metrics?: BasinMetrics | undefined;
}

export async function buildApp({
  deps,
  bodyLimitBytes,
  loggerInstance,
  rateLimits,
  https = null,
  fastLane = true,
  http,
  webConsole = null,
  metrics,
}: AppOptions): Promise<FastifyInstance> {
  const accessLog = loggerInstance ? new AccessLog(loggerInstance) : undefined;
  const nextRequestId = requestIds();
  const serializers: RouteSerializers = new Map();
  // Each route's validators and serializers compiled at its first request (api/lazy-schemas.ts).
  const lazy = new LazySchemas();
  const app = Fastify({
    ...(loggerInstance
      ? {
          loggerInstance,
          logController: accessLog,
          childLoggerFactory: sharedRequestLogger,
        }
      : { logger: false }),
    genReqId: nextRequestId,
    bodyLimit: bodyLimitBytes,
    frameworkErrors,
    clientErrorHandler,
    schemaController: {
      compilersFactory: {
        buildValidator: lazy.validators(),
        buildSerializer: cachedSerializers(serializers, lazy),
      },
    },
    // Strict types: a number where the spec says string is a 400, not coerced.
    // `x-basin-extension` marks in the OpenAPI document what Basin adds to the spec.
    ajv: {
      customOptions: {
        coerceTypes: false,
        removeAdditional: false,
        allErrors: false,
        keywords: ['x-basin-extension'],
      },
    },
    ...serverTimeouts(http, https),
  } as FastifyServerOptions) as unknown as FastifyInstance;
  // Node closes a connection beyond this at once, before a byte is read.
  if (http) (app.server as Server).maxConnections = http.maxConnections;
  rememberLazySchemas(app, lazy);

  const routeDeps: RouteDeps = {
    ...deps,
    presented: new PresentedServices(deps.present, (svc) =>
      currentUsage(deps.ctx, { kind: 'service', id: svc.id }),
    ),
  };
  registerErrorHandling(app);
  jsonBodies(app);
  if (metrics) {
    app.addHook('onResponse', (req, reply, done) => {
      metrics.observeRequest(req.method, req.routeOptions.url, reply.statusCode, reply.elapsedTime);
      done();
    });
  }
  for (const schema of sharedSchemas(deps.present.serviceTypeName ?? DEFAULT_SERVICE_TYPE_NAME))
    app.addSchema(schema);
  await app.register(swagger, openApiInfo);
  const limits = await registerRateLimits(app, rateLimits);
  if (fastLane) {
    offerToFastLaneFirst(
      app,
      new PollingFastLane({
        readView: () => deps.ctx.store.readView(),
        presented: routeDeps.presented,
        serializers,
        takeRead: limits.takeRead,
        accessLog,
        nextRequestId,
        observe: metrics ? (...a) => metrics.observeRequest(...a) : undefined,
      }),
    );
  }

  if (webConsole) consoleRoutes(app, webConsole);
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
          const header = req.headers.authorization;
          try {
            r.principal = authenticate(r.reads, header);
          } catch (err) {
            // Failed authentications count by client address: 429 once over budget.
            const refuse = (e: unknown) =>
              limits.limitUnauthenticated(req, reply).then(() => done(e as Error), done);
            // A key the view does not know may be one another process just made (auth.ts).
            const key = deps.ctx.store.catchUpCredential && credentialKey(header);
            if (!key) return void refuse(err);
            deps.ctx.store.catchUpCredential!(key)
              .then((newer) => {
                if (!newer) return refuse(err);
                r.reads = deps.ctx.store.readView();
                r.principal = authenticate(r.reads, header);
                done();
              })
              .catch(refuse);
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
          metricsRoutes,
          replicaSetRoutes,
          authRoutes,
          analyticsRoutes,
        ]) {
          await api.register(routes, routeDeps);
        }
      });
    },
    { prefix: '/v1' },
  );
  return app;
}

/**
 * The server's bounds on its clients (docs/decisions.md, Requests): Fastify
 * sets keep-alive and the whole request's timeout on the server it makes;
 * the headers' timeout and how often Node looks for expired connections
 * (every 30 s by default, which would let a 10 s bound run to 40 s) can only
 * be given when the server is made, through the options Fastify hands to
 * http(s).createServer.
 */
function serverTimeouts(
  http: HttpLimits | undefined,
  https: { cert: string; key: string } | null,
): Record<string, unknown> {
  if (!http) return https ? { https } : {};
  const server = {
    headersTimeout: http.headersTimeoutMs,
    requestTimeout: http.requestTimeoutMs,
    connectionsCheckingInterval: Math.max(
      100,
      Math.min(1000, Math.floor(http.headersTimeoutMs / 4)),
    ),
  };
  return {
    keepAliveTimeout: http.keepAliveTimeoutMs,
    requestTimeout: http.requestTimeoutMs,
    ...(https ? { https: { ...https, ...server } } : { http: server }),
  };
}

/**
 * Every request reaches the fast lane first, and Fastify when the lane leaves
 * it. The lane is put in front of the request listener of the server Fastify
 * made, rather than through Fastify's `serverFactory`: with a factory,
 * Fastify no longer binds every address of a host name (`--host localhost`:
 * 127.0.0.1 and ::1), and the server's settings (timeouts, keep-alive, TLS)
 * would have to be copied from Fastify's own code.
 */
function offerToFastLaneFirst(app: FastifyInstance, lane: PollingFastLane): void {
  const server = app.server as Server;
  const listeners = server.listeners('request');
  const fastify = listeners[0] as (req: IncomingMessage, res: ServerResponse) => void;
  if (listeners.length !== 1) {
    throw new Error(`expected Fastify's one request listener, found ${listeners.length}`);
  }
  server.removeListener('request', fastify);
  server.on('request', (req, res) => {
    if (!lane.offer(req, res)) fastify(req, res);
  });
  // Fastify answers 503 from the moment it starts closing: from then on, so
  // does the lane, by leaving every request to it. Its closing flag is set
  // just before the preClose hooks run, in the same turn of the event loop
  // (avvio chains them with process.nextTick), so no request comes between.
  app.addHook('preClose', (done) => {
    lane.close();
    done();
  });
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
