// The typed client of Basin's API. Requests and answers are typed by the
// types openapi-typescript generates from the committed openapi.json
// (generated/openapi.ts); openapi-fetch sends them. This layer adds what a
// generator does not: answers as plain values with errors thrown as
// BasinError (each with its `code`), waiting for a status (wait.ts) and
// paging through logs (logs.ts).

import createClient, { type Client } from 'openapi-fetch';
import type { HttpMethod } from 'openapi-typescript-helpers';
import type { DataMethod } from './data-method.js';
import { BasinError, errorOfResponse } from './errors.js';
import type { paths } from './generated/openapi.js';
import { type LogQuery, logEntries, logPages, type ServiceRef } from './logs.js';
import { type ServiceStatus, type WaitOptions, waitFor } from './wait.js';
import type { components } from './generated/openapi.js';

type Service = components['schemas']['Service'];
type LogEntry = NonNullable<components['schemas']['ServiceLogsResponse']['entries']>[number];
type LogPage = components['schemas']['ServiceLogsResponse'];

export interface BasinClientOptions {
  /** Basin's address, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is allowed). */
  url: string;
  /** A bearer key (`bsn_…`). Or give `accessKey` and `secretKey` (HTTP Basic). */
  apiKey?: string;
  accessKey?: string;
  secretKey?: string;
  /** A fetch of your own (tests, proxies, custom TLS); the global fetch by default. */
  fetch?: (input: Request) => Promise<Response>;
}

export type { DataMethod };

export interface BasinClient {
  /** The address requests go to, without `/v1`. */
  readonly url: string;
  GET: DataMethod<paths, 'get'>;
  POST: DataMethod<paths, 'post'>;
  DELETE: DataMethod<paths, 'delete'>;
  /**
   * Polls the service until it has `status` (`DELETED`: until it is gone),
   * backing off between polls; throws WAIT_TIMEOUT, or WAIT_FAILED when it
   * reaches a status of `failOn` (UNSTABLE by default). Rate limits and a
   * Basin restarting are waited out.
   */
  waitFor(service: ServiceRef, status: ServiceStatus, options?: WaitOptions): Promise<Service>;
  /** Every log entry matching `query`, newest first, following the cursor page by page. */
  logs(service: ServiceRef, query?: LogQuery): AsyncGenerator<LogEntry>;
  /** The pages themselves (a page may be empty and still have a cursor: see docs/decisions.md). */
  logPages(service: ServiceRef, query?: LogQuery): AsyncGenerator<LogPage>;
  /** openapi-fetch underneath, answering `{data, error, response}` without throwing. */
  readonly raw: Client<paths>;
}

export function createBasinClient(options: BasinClientOptions): BasinClient {
  const url = options.url.replace(/\/+$/, '').replace(/\/v1$/, '');
  const raw = createClient<paths>({
    baseUrl: url,
    headers: { authorization: authorization(options) },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  const method = <M extends HttpMethod>(m: M): DataMethod<paths, M> =>
    (async (path: string, init?: Record<string, unknown>) => {
      let result: { data?: unknown; error?: unknown; response: Response };
      try {
        result = await raw.request(m as never, path as never, init as never);
      } catch (err) {
        throw new BasinError('NETWORK_ERROR', `Cannot reach Basin at ${url}: ${describe(err)}`, {
          cause: err,
        });
      }
      if (!result.response.ok) throw errorOfResponse(result.response, result.error);
      return result.data;
    }) as DataMethod<paths, M>;

  const client: BasinClient = {
    url,
    GET: method('get'),
    POST: method('post'),
    DELETE: method('delete'),
    waitFor: (service, status, waitOptions) => waitFor(client, service, status, waitOptions),
    logs: (service, query) => logEntries(client, service, query),
    logPages: (service, query) => logPages(client, service, query),
    raw,
  };
  return client;
}

function authorization(o: BasinClientOptions): string {
  if (o.apiKey !== undefined) return `Bearer ${o.apiKey}`;
  if (o.accessKey !== undefined && o.secretKey !== undefined) {
    return `Basic ${btoa(`${o.accessKey}:${o.secretKey}`)}`;
  }
  throw new TypeError('createBasinClient needs apiKey, or accessKey and secretKey.');
}

/** fetch's "fetch failed" says little; its cause (ECONNREFUSED…) says what happened. */
function describe(err: unknown): string {
  const cause = (err as { cause?: { message?: string; code?: string } } | null)?.cause;
  if (cause?.code) return `${cause.code}${cause.message ? ` (${cause.message})` : ''}`;
  if (cause?.message) return cause.message;
  return err instanceof Error ? err.message : String(err);
}
