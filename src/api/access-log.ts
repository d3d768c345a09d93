// The access log: one line per request, written when the response is done,
// through Basin's logger (lib/logger.ts), at `info`:
//
//   {"level":30,…,"reqId":"req-1","method":"GET","route":"/v1/projects/:project_id/services/:service_id",
//    "status":200,"ms":0.31,"ip":"127.0.0.1","credential":"…","msg":"request"}
//
// `route` is the route's pattern, never the URL: ids stay out of it, and so
// does the query string (nothing a client puts in a URL is logged). A request
// that matched no route has `route: null` and its path (without the query)
// in `path`. `credential` is the id of the credential that authenticated the
// request (an identifier, not a secret); headers are never logged.
//
// It replaces Fastify's request logging (two lines per request, each built
// with the request's child logger and serializers) through Fastify's
// LogController, whose `requestCompleted` runs once per response anyway. Fastify
// also makes a child logger per request, only to bind the request id: here
// every request shares Basin's logger, and the lines that concern a request
// (this one, the error handler's) carry `reqId` themselves.

import {
  type FastifyBaseLogger,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import type { Principal } from '../commands/context.js';

export class AccessLog extends LogController {
  constructor(private readonly log: PinoLogger) {
    super({ disableRequestLogging: false });
  }

  /** Nothing at the start of a request: its line is written when it completes. */
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const log = this.log;
    if (!log.isLevelEnabled('info')) return;
    const route = request.routeOptions.url ?? null;
    const principal = (request as FastifyRequest & { principal: Principal | null }).principal;
    const line: AccessLine = {
      reqId: request.id,
      method: request.method,
      route,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      ip: request.ip,
      credential: principal ? principal.credentialId : undefined,
      path: route === null ? pathOf(request.url) : undefined,
      err: error ?? undefined,
    };
    log.info(line, 'request');
  }
}

interface AccessLine {
  reqId: string;
  method: string;
  route: string | null;
  status: number;
  ms: number;
  ip: string;
  credential: string | undefined;
  path: string | undefined;
  err: Error | undefined;
}

/** The path of a URL, without its query string, and not longer than a log line should be. */
function pathOf(url: string): string {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  return path.length > 256 ? path.slice(0, 256) + '…' : path;
}

/**
 * Fastify's childLoggerFactory: every request logs through Basin's logger
 * itself, with no child per request (see the top of this file).
 */
export function sharedRequestLogger(logger: FastifyBaseLogger): FastifyBaseLogger {
  return logger;
}
