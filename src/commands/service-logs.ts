import { nodesOf } from '../domain/service-nodes.js';
import { invalid } from '../domain/errors.js';
import { isRfc3339 } from '../domain/service-rules.js';
import { InvalidCursorError } from '../lib/cursor.js';
import { LOG_SOURCES, type LogPage, type LogSource, type Target } from '../domain/logs.js';
import type { ReadView } from '../store/store.js';
import type { Ctx, Principal } from './context.js';
import { readMergedLogs } from './merged-logs.js';
import { loadServiceOrReplica } from './service-lookup.js';

export const LOG_PAGE_SIZE = 500;

export const SEVERITIES = [
  'DEBUG5',
  'DEBUG4',
  'DEBUG3',
  'DEBUG2',
  'DEBUG1',
  'DEBUG',
  'INFO',
  'NOTICE',
  'WARNING',
  'ERROR',
  'LOG',
  'FATAL',
  'PANIC',
] as const;

export interface LogParams {
  cursor?: string;
  node?: number;
  search?: string[];
  severities?: string[];
  since?: string;
  until?: string;
  /** `basin`: Basin's own entries only; `database`: the server's only. */
  source?: string;
  /** Aborted when the client has gone: the driver stops reading. */
  signal?: AbortSignal;
}

/**
 * One page of a service's (or read replica set's) logs, newest first: the
 * database's own entries and Basin's (merged-logs.ts).
 */
export async function readServiceLogs(
  ctx: Ctx,
  reads: Pick<ReadView, 'services' | 'replicaSets'>,
  p: Principal,
  projectId: string,
  serviceId: string,
  q: LogParams,
): Promise<LogPage> {
  const found = loadServiceOrReplica(reads, p, projectId, serviceId);
  // `node` 0 is the primary, then the standbys by index: a node's stable
  // index (its directory) is another number after a failover.
  const indices =
    'service' in found
      ? [...nodesOf(found.service)]
          .sort((a, b) => (a.role === b.role ? a.index - b.index : a.role === 'primary' ? -1 : 1))
          .map((n) => n.index)
      : undefined;
  const [target, nodes]: [Target, number] =
    'service' in found
      ? [{ kind: 'service', id: found.service.id }, indices?.length ?? 1]
      : [{ kind: 'replicaSet', id: found.replicaSet.id }, found.replicaSet.nodes];
  if (q.node !== undefined && (!Number.isInteger(q.node) || q.node < 0 || q.node >= nodes)) {
    throw invalid(
      `node must be a whole number from 0 to ${nodes - 1} for ${serviceId}; got ${q.node}.`,
    );
  }
  const since = time('since', q.since);
  const until = time('until', q.until);
  if (since && until && since >= until) throw invalid('since must be earlier than until.');
  const severities = (q.severities ?? []).map((s) => {
    const up = s.trim().toUpperCase();
    if (!(SEVERITIES as readonly string[]).includes(up)) {
      throw invalid(`Unknown severity ${JSON.stringify(s)}; use any of ${SEVERITIES.join(', ')}.`);
    }
    return up;
  });
  const search = (q.search ?? []).map((s) => s.trim()).filter((s) => s.length > 0);
  const source = q.source as LogSource | undefined;
  if (source !== undefined && !LOG_SOURCES.includes(source)) {
    throw invalid(
      `source must be ${LOG_SOURCES.join(' or ')} (basin: Basin's own entries); got ${JSON.stringify(q.source)}.`,
    );
  }
  try {
    return await readMergedLogs(ctx, target, {
      cursor: q.cursor,
      since,
      until,
      severities,
      search,
      source,
      node: q.node,
      nodeIndex: indices?.[q.node ?? 0],
      limit: LOG_PAGE_SIZE,
      signal: q.signal,
    });
  } catch (err) {
    if (err instanceof InvalidCursorError) throw invalid(err.message);
    throw err;
  }
}

function time(field: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  if (!isRfc3339(value))
    throw invalid(
      `${field} must be an RFC 3339 timestamp like 2026-01-02T15:04:05Z; got ${JSON.stringify(value)}.`,
    );
  return new Date(value);
}
