// The one error catalogue. Every error a client can see has a code from this
// table, the HTTP status that goes with it, and a message a person can act on.
// api/errors.ts maps everything else (Fastify's own errors) onto these codes,
// and test/api/errors.test.ts checks that the catalogue, the OpenAPI document
// and docs/errors.md agree.

export const ERROR_CATALOGUE = {
  INVALID_REQUEST: { status: 400, description: 'The request is malformed or a value is invalid.' },
  UNAUTHORIZED: { status: 401, description: 'Credentials are missing or not valid.' },
  FORBIDDEN: { status: 403, description: 'The credentials may not perform this request.' },
  NOT_FOUND: {
    status: 404,
    description: 'No such resource, or it belongs to a project the caller cannot see.',
  },
  CONFLICT: { status: 409, description: "The resource's current state forbids the request." },
  REQUEST_TIMEOUT: {
    status: 408,
    description: 'The request did not arrive in time; the connection is closed.',
  },
  PAYLOAD_TOO_LARGE: { status: 413, description: 'The request body is larger than allowed.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: 'The request body is not JSON.' },
  RATE_LIMITED: { status: 429, description: 'Too many requests; retry later.' },
  INTERNAL: { status: 500, description: 'A bug in Basin; the request may be retried.' },
  UNAVAILABLE: { status: 503, description: 'Basin is starting or shutting down; retry.' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_CATALOGUE[code].status;
  }
}

export const invalid = (message: string) => new AppError('INVALID_REQUEST', message);
export const notFound = (message: string) => new AppError('NOT_FOUND', message);
export const conflict = (message: string) => new AppError('CONFLICT', message);
