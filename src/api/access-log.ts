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

import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { LogController } from 'fastify';
import { type Logger as PinoLogger, symbols } from 'pino';
import type { Principal } from '../commands/context.js';

/** pino's number for `info`. */
const INFO_LEVEL = 30;

/** What of pino's own state the line needs (pino.symbols: public, for such uses). */
interface PinoLine {
  /** The base bindings, as JSON: `,"pid":…,"hostname":"…"`. */
  readonly [symbols.chindingsSym]: string;
  readonly [symbols.streamSym]: { write(line: string): unknown };
}

export class AccessLog extends LogController {
  /** JSON of each route pattern seen (a few dozen): encoded once, not per request. */
  private readonly routes = new Map<string, string>();

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
    const pinoLine = log as unknown as PinoLine;
    if (error) {
      // Rare (the response stream failed): pino's own serializer for the error.
      log.info(
        { reqId: request.id, method: request.method, status: reply.statusCode, err: error },
        'request',
      );
      return;
    }
    const url = request.routeOptions.url;
    const principal = (request as FastifyRequest & { principal?: Principal | null }).principal;
    // pino's line format, written to pino's destination: the same as
    // log.info({...}, 'request') would write, for less work (no walk over an
    // object's keys; each route's JSON is kept). Every value is a number or
    // JSON-encoded here; the address is absent once the socket is gone.
    const line =
      `{"level":${INFO_LEVEL},"time":${Date.now()}${pinoLine[symbols.chindingsSym]}` +
      `,"reqId":${JSON.stringify(request.id)},"method":${JSON.stringify(request.method)}` +
      `,"route":${url === undefined ? 'null' : this.routeJson(url)},"status":${reply.statusCode}` +
      `,"ms":${Math.round(reply.elapsedTime * 100) / 100},"ip":${JSON.stringify(request.ip ?? null)}` +
      (principal ? `,"credential":${JSON.stringify(principal.credentialId)}` : '') +
      (url === undefined ? `,"path":${JSON.stringify(pathOf(request.url))}` : '') +
      `,"msg":"request"}\n`;
    pinoLine[symbols.streamSym].write(line);
  }

  private routeJson(url: string): string {
    let json = this.routes.get(url);
    if (json === undefined) {
      json = JSON.stringify(url);
      this.routes.set(url, json);
    }
    return json;
  }
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
