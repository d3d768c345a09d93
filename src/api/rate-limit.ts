// Per-credential rate limits, with @fastify/rate-limit and its in-memory
// store: fixed one-minute windows, a budget for reads (GET, HEAD) and another
// for writes (every other method), per credential. Requests that carry no
// valid credential (a failed authentication, the OpenAPI document) are counted
// by client address instead, in the same two budgets. Over budget, the answer
// is `429 {"code":"RATE_LIMITED",…}` with `Retry-After` (seconds until the
// window ends), through the one error handler.
//
// Order: the limiter is a route-level `onRequest` hook, so it runs after the
// auth hook (an instance-level one) and sees the caller. A request whose
// authentication fails stops in the auth hook; that hook runs the same
// limiter (`limitUnauthenticated`) before answering 401, so guessing keys is
// limited by address too.
//
// Counting is per Basin process (the store is memory): a restart starts every
// window afresh. Loopback clients are exempt only when configured
// (`--rate-limit-loopback off`, for development).

import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Principal } from '../commands/context.js';
import { AppError } from '../domain/errors.js';

export interface RateLimits {
  /** Reads (GET, HEAD) a credential may make per minute; 0: no limit. */
  readsPerMinute: number;
  /** Writes (every other method) a credential may make per minute; 0: no limit. */
  writesPerMinute: number;
  /** Whether requests from loopback addresses are counted. */
  loopback: boolean;
}

const WINDOW_MS = 60_000;
/** Credentials and client addresses counted at once, per budget (an LRU). */
const KEYS = 10_000;
/**
 * No x-ratelimit-* headers on answers within budget: three more headers on
 * every response (the hot path the benchmark measures) for a budget no
 * polling client comes near; a 429 carries them, with Retry-After.
 */
const NO_HEADERS_WITHIN_BUDGET = {
  'x-ratelimit-limit': false,
  'x-ratelimit-remaining': false,
  'x-ratelimit-reset': false,
} as const;

type Limiter = (req: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * Registers the limits on `app` (before its routes); returns the check that
 * the auth hook runs for a request whose authentication failed: it rejects
 * with RATE_LIMITED once the client's address is over budget.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  limits: RateLimits,
): Promise<Limiter> {
  // No plugin-wide hook: each route gets the limiter of its kind below, so
  // that reads and writes count in budgets (stores) of their own.
  await app.register(rateLimit, { global: false, addHeadersOnExceeding: NO_HEADERS_WITHIN_BUDGET });
  const limiter = (perMinute: number, kind: string): Limiter =>
    app.rateLimit({
      max: perMinute || Number.MAX_SAFE_INTEGER,
      timeWindow: WINDOW_MS,
      cache: KEYS,
      keyGenerator: keyOf,
      ...(limits.loopback ? {} : { allowList: (req: FastifyRequest) => isLoopback(req.ip) }),
      errorResponseBuilder: (req, context) => rateLimited(req, kind, context.max, context.ttl),
    }) as Limiter;
  const reads = limiter(limits.readsPerMinute, 'reads (GET)');
  const writes = limiter(limits.writesPerMinute, 'writes');
  const limitOf = (method: string) => (method === 'GET' || method === 'HEAD' ? reads : writes);

  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = [route.method].flat();
    const limit =
      methods.length === 1
        ? limitOf(methods[0] as string)
        : (req: FastifyRequest, reply: FastifyReply) => limitOf(req.method)(req, reply);
    const hooks = route.onRequest;
    route.onRequest = !hooks ? [limit] : Array.isArray(hooks) ? [...hooks, limit] : [hooks, limit];
  });
  return (req, reply) => limitOf(req.method)(req, reply);
}

function keyOf(req: FastifyRequest): string {
  const principal = (req as FastifyRequest & { principal?: Principal | null }).principal;
  return principal ? principal.credentialId : `ip:${req.ip}`;
}

/** A RATE_LIMITED error; the error handler sets Retry-After from it. */
export class RateLimitedError extends AppError {
  constructor(
    message: string,
    /** Seconds until the window ends: the Retry-After header. */
    readonly retryAfterSeconds: number,
  ) {
    super('RATE_LIMITED', message);
  }
}

function rateLimited(
  req: FastifyRequest,
  kind: string,
  max: number,
  ttlMs: number,
): RateLimitedError {
  const seconds = Math.max(1, Math.ceil(ttlMs / 1000));
  const who = (req as FastifyRequest & { principal?: Principal | null }).principal
    ? 'this credential'
    : `requests without valid credentials from ${req.ip}`;
  return new RateLimitedError(
    `Rate limit: ${who} may make ${max} ${kind} a minute; retry in ${seconds} s (Retry-After).`,
    seconds,
  );
}

/** `ip` is undefined once the client's socket is gone. */
function isLoopback(ip: string | undefined): boolean {
  return (
    ip !== undefined && (ip.startsWith('127.') || ip === '::1' || ip.startsWith('::ffff:127.'))
  );
}
