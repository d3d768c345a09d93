// The one error handler: every error leaves as `{code, message}` with a code
// from the catalogue (domain/errors.ts). Fastify's own errors are mapped by
// their `code` or status, never by parsing their message.

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode, ERROR_CATALOGUE } from '../domain/errors.js';

const FASTIFY_CODES: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: ['INVALID_REQUEST', 'The body is not valid JSON.'],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['INVALID_REQUEST', 'The body is empty; send a JSON object.'],
  FST_ERR_CTP_BODY_TOO_LARGE: ['PAYLOAD_TOO_LARGE', 'The body is too large.'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [
    'UNSUPPORTED_MEDIA_TYPE',
    'Send the body as JSON with Content-Type: application/json.',
  ],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [
    'INVALID_REQUEST',
    'Content-Length does not match the body.',
  ],
  FST_ERR_CTP_INVALID_TYPE: [
    'UNSUPPORTED_MEDIA_TYPE',
    'Send the body as JSON with Content-Type: application/json.',
  ],
};

export function sendError(reply: FastifyReply, code: ErrorCode, message: string) {
  return reply
    .status(ERROR_CATALOGUE[code].status)
    .type('application/json')
    .send({ code, message });
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(
    (err: FastifyError | AppError | Error, req: FastifyRequest, reply: FastifyReply) => {
      if (err instanceof AppError) return sendError(reply, err.code, err.message);
      const fe = err as FastifyError;
      if (fe.validation) {
        return sendError(reply, 'INVALID_REQUEST', `Invalid request: ${fe.message}.`);
      }
      const mapped = fe.code ? FASTIFY_CODES[fe.code] : undefined;
      if (mapped) return sendError(reply, mapped[0], mapped[1]);
      const status = fe.statusCode ?? 500;
      if (status === 413) return sendError(reply, 'PAYLOAD_TOO_LARGE', 'The body is too large.');
      if (status === 415)
        return sendError(reply, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as JSON.');
      if (status >= 400 && status < 500) return sendError(reply, 'INVALID_REQUEST', fe.message);
      req.log.error({ err }, 'unhandled error');
      return sendError(
        reply,
        'INTERNAL',
        'Something went wrong inside Basin; the error was logged.',
      );
    },
  );

  app.setNotFoundHandler((req, reply) =>
    sendError(
      reply,
      'NOT_FOUND',
      `No route ${req.method} ${req.url.split('?')[0]}; see /v1/openapi.json.`,
    ),
  );
}
