// Per-credential rate limits, with @fastify/rate-limit and its in-memory
// store: fixed one-minute windows, a budget for reads (GET, HEAD) and another
// for writes (every other method), per credential. Requests that carry no
// valid credential (a failed authentication, the OpenAPI document) are counted
// by client address instead, in the same two budgets. Over budget, the answer
// is `429 {"code":"RATE_LIMITED",…}` with `Retry-After` (seconds until the
// window ends), through the one error handler.
//
// Order: the plugin's hook is a route-level `onRequest` hook, so it runs after
// the auth hook (an instance-level one) and sees the caller. A request whose
// authentication fails stops in the auth hook; that hook asks the same
// limiter (`limitUnauthenticated`) before answering 401, so guessing keys is
// limited by address too.
//
// Counting is per Basin process (the store is memory): a restart starts every
// window afresh. Loopback clients are exempt only when configured
// (`--rate-limit-loopback off`, for development).

import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
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
/** Credentials and client addresses counted at once (an LRU). */
const KEYS = 10_000;

/** The first character of a key: which budget it counts in. */
const READ = 'r';
const WRITE = 'w';

/** Registers the limits on `app`; returns the check for requests that failed authentication. */
export async function registerRateLimits(
  app: FastifyInstance,
  limits: RateLimits,
): Promise<UnauthenticatedLimit> {
  const reads = limits.readsPerMinute || Number.MAX_SAFE_INTEGER;
  const writes = limits.writesPerMinute || Number.MAX_SAFE_INTEGER;
  await app.register(rateLimit, {
    timeWindow: WINDOW_MS,
    cache: KEYS,
    max: (_req, key) => (key.charCodeAt(0) === 114 /* READ */ ? reads : writes),
    keyGenerator: keyOf,
    ...(limits.loopback ? {} : { allowList: (req: FastifyRequest) => isLoopback(req.ip) }),
    errorResponseBuilder: (req, context) => rateLimited(req, context.max, context.ttl),
  });
  const check = app.createRateLimit();
  return async (req) => {
    const r = await check(req);
    return r.isAllowed || !r.isExceeded ? null : rateLimited(req, r.max, r.ttl);
  };
}

/** For a request that failed authentication: the 429 to answer instead of 401, or null. */
export type UnauthenticatedLimit = (req: FastifyRequest) => Promise<AppError | null>;

function keyOf(req: FastifyRequest): string {
  const kind = req.method === 'GET' || req.method === 'HEAD' ? READ : WRITE;
  const principal = (req as FastifyRequest & { principal?: Principal | null }).principal;
  return principal ? kind + principal.credentialId : `${kind}ip:${req.ip}`;
}

/** A RATE_LIMITED error; `Retry-After` is set by the plugin, or by the auth hook for 401s. */
export class RateLimitedError extends AppError {
  constructor(
    message: string,
    /** Seconds until the window ends: the Retry-After header. */
    readonly retryAfterSeconds: number,
  ) {
    super('RATE_LIMITED', message);
  }
}

function rateLimited(req: FastifyRequest, max: number, ttlMs: number): RateLimitedError {
  const seconds = Math.max(1, Math.ceil(ttlMs / 1000));
  const kind = keyOf(req).charCodeAt(0) === 114 /* READ */ ? 'reads (GET)' : 'writes';
  const who = (req as FastifyRequest & { principal?: Principal | null }).principal
    ? 'this credential'
    : `requests without valid credentials from ${req.ip}`;
  return new RateLimitedError(
    `Rate limit: ${who} may make ${max} ${kind} a minute; retry in ${seconds} s (Retry-After).`,
    seconds,
  );
}

function isLoopback(ip: string): boolean {
  return ip.startsWith('127.') || ip === '::1' || ip.startsWith('::ffff:127.');
}
