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
//
// The counts are Basin's own (`BudgetCounts`, handed to the plugin as its
// store), because one more path counts reads: the fast lane for polling
// clients (polling-fast-lane.ts), which answers the happy path of
// `GET …/services/{id}` before Fastify sees it. It takes from the same
// credential's read budget, in the same window, through `takeRead`; once a
// read would be over budget it leaves the request to Fastify, whose limiter
// counts it and answers the 429. So a credential gets its 429 after the same
// number of reads, whichever path served them.

import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Principal } from '../commands/context.js';
import { AppError } from '../domain/errors.js';
import { Lru } from '../lib/lru.js';

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

export interface RegisteredLimits {
  /**
   * The check that the auth hook runs for a request whose authentication
   * failed: it rejects with RATE_LIMITED once the client's address is over budget.
   */
  limitUnauthenticated: Limiter;
  /**
   * For the fast lane: counts one read of `credentialId` (from `ip`) and
   * answers true while within budget; answers false, counting nothing, when
   * this read would be over it (Fastify's limiter then counts it and answers
   * 429). A client exempt by address is not counted, as in the limiter.
   */
  takeRead(credentialId: string, ip: string | undefined): boolean;
}

/** Registers the limits on `app`, before its routes. */
export async function registerRateLimits(
  app: FastifyInstance,
  limits: RateLimits,
): Promise<RegisteredLimits> {
  // No plugin-wide hook: each route gets the limiter of its kind below, so
  // that reads and writes count in budgets (stores) of their own.
  await app.register(rateLimit, {
    global: false,
    addHeadersOnExceeding: NO_HEADERS_WITHIN_BUDGET,
    store: BudgetCounts,
  });
  const exempt = limits.loopback ? undefined : (ip: string | undefined) => isLoopback(ip);
  const limiter = (counts: BudgetCounts, max: number, kind: string): Limiter => {
    const options: Parameters<FastifyInstance['rateLimit']>[0] & { counts: BudgetCounts } = {
      max,
      timeWindow: WINDOW_MS,
      keyGenerator: keyOf,
      ...(exempt ? { allowList: (req: FastifyRequest) => exempt(req.ip) } : {}),
      errorResponseBuilder: (req, context) => rateLimited(req, kind, context.max, context.ttl),
      // Not an option of the plugin: it hands its options to the store's
      // child(), which answers with these counts (BudgetCounts.child).
      counts,
    };
    return app.rateLimit(options) as Limiter;
  };
  const readCounts = new BudgetCounts({ cache: KEYS });
  const readMax = limits.readsPerMinute || Number.MAX_SAFE_INTEGER;
  const reads = limiter(readCounts, readMax, 'reads (GET)');
  const writes = limiter(
    new BudgetCounts({ cache: KEYS }),
    limits.writesPerMinute || Number.MAX_SAFE_INTEGER,
    'writes',
  );
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
  return {
    limitUnauthenticated: (req, reply) => limitOf(req.method)(req, reply),
    takeRead: (credentialId, ip) =>
      (exempt !== undefined && exempt(ip)) || readCounts.take(credentialId, WINDOW_MS, readMax),
  };
}

/** A credential's (or an address's) requests in the current window of a budget. */
interface Window {
  current: number;
  /** What the plugin reads: ms until the window ends. */
  ttl: number;
  startMs: number;
}

/**
 * The counts of one budget: @fastify/rate-limit's store interface (`incr`,
 * `child`), with the same fixed windows as the plugin's own LocalStore, plus
 * `take` for the fast lane. Synchronous: the plugin's callback is called at once.
 */
export class BudgetCounts {
  private readonly windows: Lru<string, Window>;

  /** The plugin makes one with its options; `cache`: keys counted at once. */
  constructor(options: { cache?: number }) {
    this.windows = new Lru(options.cache ?? KEYS);
  }

  /** Counts one request of `key`; the plugin compares `current` with its max. */
  incr(key: string, cb: (err: Error | null, window: Window) => void, timeWindow: number): void {
    cb(null, this.count(key, timeWindow, Date.now()));
  }

  /** The plugin asks its store for the store of each limiter: the counts its options carry. */
  child(options: object): BudgetCounts {
    const { counts } = options as { counts?: BudgetCounts };
    if (!counts) throw new Error('every limiter brings its counts (see registerRateLimits)');
    return counts;
  }

  /** Counts one request of `key` and answers true, unless it would be over `max`. */
  take(key: string, timeWindow: number, max: number): boolean {
    const now = Date.now();
    const w = this.windows.get(key);
    if (w === undefined || w.startMs + timeWindow <= now) {
      this.start(key, w, timeWindow, now);
      return true;
    }
    if (w.current >= max) return false;
    w.current++;
    w.ttl = timeWindow - (now - w.startMs);
    return true;
  }

  private count(key: string, timeWindow: number, now: number): Window {
    const w = this.windows.get(key);
    if (w === undefined || w.startMs + timeWindow <= now)
      return this.start(key, w, timeWindow, now);
    w.current++;
    w.ttl = timeWindow - (now - w.startMs);
    return w;
  }

  /** A new window for `key`, its first request counted (the expired one `w` is reused). */
  private start(key: string, w: Window | undefined, timeWindow: number, now: number): Window {
    if (w === undefined) {
      const fresh = { current: 1, ttl: timeWindow, startMs: now };
      this.windows.set(key, fresh);
      return fresh;
    }
    w.current = 1;
    w.ttl = timeWindow;
    w.startMs = now;
    return w;
  }
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
