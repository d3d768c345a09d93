import { type TSchema, Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Ctx, Principal } from '../../commands/context.js';
import { currentUsage } from '../../commands/usage.js';
import type { Target } from '../../domain/logs.js';
import type { ReadView } from '../../store/store.js';
import type { PresentedServices } from '../presented-cache.js';
import type { PresentOptions } from '../presenters.js';

/** What routes are handed by buildApp: the command context and presentation settings. */
export interface RouteDeps {
  ctx: Ctx;
  present: Omit<PresentOptions, 'metrics'>;
  /** Services as GETs present them (made by buildApp; the fast lane shares it). */
  presented: PresentedServices;
}

/** The caller, resolved by the auth hook before any handler runs. */
export function principal(req: FastifyRequest): Principal {
  return (req as FastifyRequest & { principal: Principal }).principal;
}

/**
 * The request's read view (Store.readView), made by the auth hook: for
 * handlers that only read (GETs), so that polling clients are answered from
 * memory while nothing changes. A handler that writes reads in its
 * transaction instead, and presents what it wrote from `ctx.store`.
 */
export function reads(req: FastifyRequest): ReadView {
  return (req as FastifyRequest & { reads: ReadView }).reads;
}

export function presentOptions(deps: RouteDeps, target?: Target): PresentOptions {
  return { ...deps.present, metrics: target ? currentUsage(deps.ctx, target) : undefined };
}

const ErrorRef = Type.Ref('ErrorBody');

/** 429, which every route may answer (api/rate-limit.ts), with its Retry-After header. */
const RateLimited = Type.Unsafe({
  $ref: 'ErrorBody',
  description:
    'RATE_LIMITED: the credential (or, without valid credentials, the client address) made more reads or writes this minute than the limit allows.',
  headers: {
    'retry-after': {
      type: 'integer',
      minimum: 1,
      description: 'Seconds until the limit is lifted.',
    },
  },
});

/**
 * Response schemas: the success shape, and the error body for every error
 * status (one `4xx`/`5xx` entry each, and 429 for its header: Fastify
 * compiles a serializer per entry, so listing statuses one by one would
 * multiply start-up time).
 */
export function responses(status: number, body: TSchema | null) {
  return {
    [status]: body ?? Type.Null({ description: 'no body' }),
    '429': RateLimited,
    '4xx': ErrorRef,
    '5xx': ErrorRef,
  };
}
