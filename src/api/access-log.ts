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
  /** JSON of addresses and credential ids seen lately (see quoted()). */
  private readonly strings = new Map<string, string>();

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
    if (error) {
      // Rare (the response stream failed): pino's own serializer for the error.
      if (!this.log.isLevelEnabled('info')) return;
      this.log.info(
        { reqId: request.id, method: request.method, status: reply.statusCode, err: error },
        'request',
      );
      return;
    }
    const url = request.routeOptions.url;
    const principal = (request as FastifyRequest & { principal?: Principal | null }).principal;
    this.write(
      request.id,
      request.method,
      url,
      reply.statusCode,
      reply.elapsedTime,
      request.ip,
      principal?.credentialId,
      url === undefined ? request.url : undefined,
    );
  }

  /**
   * Writes one access line. Fastify's requests come through requestCompleted;
   * the fast lane (polling-fast-lane.ts) calls this itself, so both write the
   * same line. `route`: the route's pattern, undefined when none matched (then
   * `url` is logged without its query); `ip`: undefined once the socket is gone.
   */
  write(
    reqId: string,
    method: string,
    route: string | undefined,
    status: number,
    ms: number,
    ip: string | undefined,
    credentialId: string | undefined,
    url?: string,
  ): void {
    const log = this.log;
    if (!log.isLevelEnabled('info')) return;
    const pinoLine = log as unknown as PinoLine;
    // pino's line format, written to pino's destination: the same as
    // log.info({...}, 'request') would write, for less work (no walk over an
    // object's keys; each route's JSON is kept; plain strings are quoted
    // without JSON.stringify, and `ms` printed from integers).
    const line =
      `{"level":${INFO_LEVEL},"time":${Date.now()}${pinoLine[symbols.chindingsSym]}` +
      `,"reqId":${json(reqId)},"method":${json(method)}` +
      `,"route":${route === undefined ? 'null' : this.routeJson(route)},"status":${status}` +
      `,"ms":${hundredths(ms)},"ip":${ip === undefined ? 'null' : this.quoted(ip)}` +
      (credentialId !== undefined ? `,"credential":${this.quoted(credentialId)}` : '') +
      (route === undefined ? `,"path":${json(pathOf(url ?? ''))}` : '') +
      `,"msg":"request"}\n`;
    pinoLine[symbols.streamSym].write(line);
  }

  /**
   * JSON of an address or a credential id, kept: each is the same string
   * object request after request (a socket's address, a cached credential's
   * id), so a lookup costs less than checking it again. Bounded: emptied
   * when full.
   */
  private quoted(s: string): string {
    let q = this.strings.get(s);
    if (q === undefined) {
      q = json(s);
      if (this.strings.size >= QUOTED) this.strings.clear();
      this.strings.set(s, q);
    }
    return q;
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

/** Addresses and credential ids whose JSON is kept at most. */
const QUOTED = 2000;

/** Characters that need no escaping in JSON: what ids, methods and addresses are made of. */
const PLAIN = /^[\w.:%-]*$/;

/** `s` as a JSON string: JSON.stringify's result, quicker for plain strings (~15 ns, not ~60). */
function json(s: string): string {
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/**
 * `ms` rounded to hundredths, printed as `String(Math.round(ms * 100) / 100)`
 * prints it (`0.3`, `1.25`, `12`), from integers: printing a fraction costs
 * ~100 ns, printing integers a few.
 */
export function hundredths(ms: number): string {
  const h = Math.round(ms * 100);
  if (!Number.isSafeInteger(h) || h < 0) return String(h / 100);
  const whole = Math.floor(h / 100);
  const frac = h - whole * 100;
  if (frac === 0) return `${whole}`;
  if (frac % 10 === 0) return `${whole}.${frac / 10}`;
  return frac < 10 ? `${whole}.0${frac}` : `${whole}.${frac}`;
}

/** The path of a URL, without its query string, and not longer than a log line should be. */
function pathOf(url: string): string {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  return path.length > 256 ? path.slice(0, 256) + '…' : path;
}

/**
 * Request ids as Fastify makes them by default (`req-1`, `req-2`, … in base
 * 36, wrapping at 2^31), from one counter: given to Fastify as its genReqId
 * and used by the fast lane, so ids stay unique whichever path answers.
 */
export function requestIds(): () => string {
  let next = 0;
  return () => {
    next = (next + 1) & 0x7fffffff;
    return `req-${next.toString(36)}`;
  };
}

/**
 * Fastify's childLoggerFactory: every request logs through Basin's logger
 * itself, with no child per request (see the top of this file).
 */
export function sharedRequestLogger(logger: FastifyBaseLogger): FastifyBaseLogger {
  return logger;
}
