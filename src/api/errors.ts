// The one error handler: every error leaves as `{code, message}` with a code
// from the catalogue (domain/errors.ts). Fastify's own errors are mapped by
// their `code` or status, never by parsing their message.

import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode, ERROR_CATALOGUE } from '../domain/errors.js';
import { RateLimitedError } from './rate-limit.js';

const FASTIFY_CODES: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: [
    'INVALID_REQUEST',
    'The body is not valid JSON (or it has a __proto__ or constructor.prototype key, which is refused).',
  ],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['INVALID_REQUEST', 'The body is empty; send a JSON object.'],
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
  // RFC 9110 §11.6.1: a 401 names the schemes that would work.
  if (code === 'UNAUTHORIZED')
    reply.header('www-authenticate', 'Bearer realm="basin", Basic realm="basin"');
  return reply
    .status(ERROR_CATALOGUE[code].status)
    .type('application/json')
    .send({ code, message });
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(
    (err: FastifyError | AppError | Error, req: FastifyRequest, reply: FastifyReply) => {
      if (err instanceof AppError) {
        // RFC 9110 §10.2.3: how long to wait before trying again.
        if (err instanceof RateLimitedError)
          reply.header('retry-after', String(err.retryAfterSeconds));
        return sendError(reply, err.code, err.message);
      }
      const fe = err as FastifyError;
      if (fe.validation) {
        // Ajv does not name an unknown field in its message; say which one to remove.
        const extra = fe.validation.find((v) => v.keyword === 'additionalProperties')?.params
          .additionalProperty;
        const hint = typeof extra === 'string' ? ` (unknown field ${JSON.stringify(extra)})` : '';
        return sendError(reply, 'INVALID_REQUEST', `Invalid request: ${fe.message}${hint}.`);
      }
      const mapped = fe.code ? FASTIFY_CODES[fe.code] : undefined;
      if (mapped) return sendError(reply, mapped[0], mapped[1]);
      const status = fe.statusCode ?? 500;
      if (status === 413) {
        return sendError(
          reply,
          'PAYLOAD_TOO_LARGE',
          `The body is larger than the limit of ${app.initialConfig.bodyLimit} bytes; send a smaller one.`,
        );
      }
      if (status === 415)
        return sendError(reply, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as JSON.');
      if (status >= 400 && status < 500) return sendError(reply, 'INVALID_REQUEST', fe.message);
      // Requests share one logger (access-log.ts): the line names its request.
      req.log.error({ reqId: req.id, err }, 'unhandled error');
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

/**
 * Fastify answers some malformed URLs (bad percent-encoding, a path segment
 * longer than the router's limit) before routing, outside the error handler;
 * passed as the `frameworkErrors` option, this keeps their body `{code, message}`.
 */
export function frameworkErrors(err: FastifyError, _req: FastifyRequest, reply: FastifyReply) {
  switch (err.code) {
    case 'FST_ERR_BAD_URL':
      return sendError(
        reply,
        'INVALID_REQUEST',
        'The URL path is not valid (bad percent-encoding).',
      );
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return sendError(
        reply,
        'INVALID_REQUEST',
        'A path segment is too long; identifiers are at most 64 characters.',
      );
    default:
      return sendError(reply, 'INVALID_REQUEST', err.message);
  }
}

/**
 * Requests Node's HTTP parser rejects (malformed, headers too large) never
 * reach Fastify's handlers; answer them with the same `{code, message}` body.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  // An answer already under way (a body that never ended after the route
  // answered; `_httpMessage` is Node's own record of the socket's answer):
  // nothing may be written into the middle of it.
  if ((socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent) {
    socket.destroy();
    return;
  }
  // Node's headers or request timeout (--headers-timeout-ms, --request-timeout-ms).
  const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const body = JSON.stringify(
    timedOut
      ? {
          code: 'REQUEST_TIMEOUT',
          message:
            'The request did not arrive in time (its headers, or all of it); the connection is closed. Send it again, at once.',
        }
      : {
          code: 'INVALID_REQUEST',
          message: 'The HTTP request is malformed or its headers are too large.',
        },
  );
  const status = timedOut ? '408 Request Timeout' : '400 Bad Request';
  socket.end(
    `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
