import { type TSchema, Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Ctx, Principal } from '../../commands/context.js';
import type { Target } from '../../drivers/driver.js';
import type { PresentOptions } from '../presenters.js';

/** What routes are handed by buildApp: the command context and presentation settings. */
export interface RouteDeps {
  ctx: Ctx;
  present: Omit<PresentOptions, 'metrics'>;
}

/** The caller, resolved by the auth hook before any handler runs. */
export function principal(req: FastifyRequest): Principal {
  return (req as FastifyRequest & { principal: Principal }).principal;
}

export function presentOptions(deps: RouteDeps, target?: Target): PresentOptions {
  return { ...deps.present, metrics: target ? deps.ctx.driver.metrics(target) : undefined };
}

const ErrorRef = Type.Ref('ErrorBody');

/** Response schemas: the success shape plus the error body for every error status. */
export function responses(status: number, body: TSchema | null) {
  return {
    [status]: body ?? Type.Null({ description: 'no body' }),
    400: ErrorRef,
    401: ErrorRef,
    404: ErrorRef,
    409: ErrorRef,
    413: ErrorRef,
    415: ErrorRef,
    500: ErrorRef,
  };
}
