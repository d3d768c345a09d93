// Paging through a service's logs: pages come newest first, each with a
// cursor to the next (older) one until there is none. A page may hold fewer
// entries than asked for, even none, and still have a cursor (Basin bounds
// the work of a page): only a missing cursor ends the logs.

import type { Gets } from './data-method.js';
import type { components, paths } from './generated/openapi.js';

type LogsGet = paths['/v1/projects/{project_id}/services/{service_id}/logs']['get'];
/** The filters of GET …/logs (severities and search terms may be lists). */
export type LogQuery = Omit<NonNullable<LogsGet['parameters']['query']>, 'cursor'>;
type LogPage = components['schemas']['ServiceLogsResponse'];
type LogEntry = NonNullable<LogPage['entries']>[number];

/** A service as the API answered it, or just its ids. */
export interface ServiceRef {
  project_id?: string | undefined;
  service_id?: string | undefined;
}

export function servicePath(service: ServiceRef): { project_id: string; service_id: string } {
  const { project_id, service_id } = service;
  if (!project_id || !service_id) {
    throw new TypeError('A service needs its project_id and service_id.');
  }
  return { project_id, service_id };
}

export async function* logPages(
  client: Gets,
  service: ServiceRef,
  query: LogQuery = {},
): AsyncGenerator<LogPage> {
  const path = servicePath(service);
  let cursor: string | undefined;
  do {
    const page = await client.GET('/v1/projects/{project_id}/services/{service_id}/logs', {
      params: { path, query: { ...query, ...(cursor === undefined ? {} : { cursor }) } },
    });
    yield page;
    cursor = page.last_cursor ?? page.lastCursor;
  } while (cursor !== undefined);
}

export async function* logEntries(
  client: Gets,
  service: ServiceRef,
  query: LogQuery = {},
): AsyncGenerator<LogEntry> {
  for await (const page of logPages(client, service, query)) {
    // `entries` is optional in the spec; `logs` (messages only) is not.
    yield* page.entries ?? page.logs.map((message) => ({ message, severity: '', timestamp: '' }));
  }
}
