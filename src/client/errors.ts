// Typed errors of the client: every failure has a `code`. Basin's own answers
// carry the codes of its error catalogue (docs/errors.md), typed from the
// OpenAPI document; the client adds its own for what happens on its side.

import type { components } from './generated/openapi.js';

/** The codes of Basin's error catalogue (the ErrorBody of the OpenAPI document). */
export type ApiErrorCode = components['schemas']['ErrorBody']['code'];

/** Codes of failures on the client's side. */
export type ClientErrorCode =
  /** Basin could not be reached (refused, reset, DNS…). */
  | 'NETWORK_ERROR'
  /** An answer that is not Basin's: an error without {code, message}, e.g. from a proxy. */
  | 'BAD_RESPONSE'
  /** waitFor gave up: the service did not reach the status in time. */
  | 'WAIT_TIMEOUT'
  /** waitFor gave up: the service reached a status it was told to fail on (UNSTABLE). */
  | 'WAIT_FAILED';

export type BasinErrorCode = ApiErrorCode | ClientErrorCode;

export class BasinError extends Error {
  override readonly name = 'BasinError';
  /** The HTTP status, when Basin (or something in front of it) answered. */
  readonly status: number | undefined;
  /** Seconds to wait before trying again, from Retry-After (429, 503). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly code: BasinErrorCode,
    message: string,
    details: { status?: number; retryAfterSeconds?: number; cause?: unknown } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.status = details.status;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** Whether waiting and asking again may succeed: rate limits, a Basin restarting, the network. */
export function isTransient(err: unknown): err is BasinError {
  return (
    err instanceof BasinError &&
    (err.code === 'RATE_LIMITED' || err.code === 'UNAVAILABLE' || err.code === 'NETWORK_ERROR')
  );
}

/** The error for a non-2xx answer, from its body (already read) and headers. */
export function errorOfResponse(response: Response, body: unknown): BasinError {
  const retry = Number(response.headers.get('retry-after'));
  const details = {
    status: response.status,
    ...(Number.isFinite(retry) && retry > 0 ? { retryAfterSeconds: retry } : {}),
  };
  const b = body as { code?: unknown; message?: unknown } | null;
  if (b && typeof b === 'object' && typeof b.code === 'string' && typeof b.message === 'string') {
    return new BasinError(b.code as ApiErrorCode, b.message, details);
  }
  const text = typeof body === 'string' ? body.slice(0, 200) : '';
  return new BasinError(
    'BAD_RESPONSE',
    `HTTP ${response.status} from ${response.url || 'Basin'} without Basin's {code, message}${text ? `: ${text}` : ''}`,
    details,
  );
}
