// Logs and metrics as the commands ask for them and the drivers answer
// (docs/architecture.md §8, Logs). Pure shapes: reading them is a driver's business.

/** Which resource logs or metrics are asked of. */
export type Target = { kind: 'service'; id: string } | { kind: 'replicaSet'; id: string };

/**
 * Who wrote an entry: Basin itself (its events: why a service is UNSTABLE,
 * restarts, failovers) or the database server. A server line is whatever
 * the server logged, which any role can choose (`RAISE LOG 'basin: …'`), so
 * only this field, set by who reads the entry and never by its text, says
 * that an entry is Basin's.
 */
export type LogSource = 'basin' | 'database';

export const LOG_SOURCES: readonly LogSource[] = ['basin', 'database'];

export interface LogEntry {
  /** RFC 3339. */
  timestamp: string;
  severity: string;
  message: string;
  source: LogSource;
}

export interface LogQuery {
  /** `lastCursor` of a previous page, as the client sent it; the reader issued it and checks it. */
  cursor?: string | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
  /** Upper-case severities; any matches. */
  severities: string[];
  /** Terms that must all appear (case-insensitive). */
  search: string[];
  /** Only the entries of one source (the merge decides: drivers answer the database's only). */
  source?: LogSource | undefined;
  /**
   * The node as the API numbers it: 0 the primary, then the standbys (a
   * replica set: its nodes). Basin's own entries and cursors use it.
   */
  node?: number | undefined;
  /**
   * That node's stable index (its directory), for the driver, when it
   * differs from `node`: after a failover the primary is another node.
   */
  nodeIndex?: number | undefined;
  limit: number;
  /**
   * Aborted when the client has gone (its connection closed): the driver
   * stops reading and rejects with the signal's reason (an AbortError).
   */
  signal?: AbortSignal | undefined;
}

export interface LogPage {
  /** Newest first. */
  entries: LogEntry[];
  /**
   * Present when older entries exist, or may: a driver that bounds the work
   * of a page (the local one does) answers before it knows, with fewer
   * entries than the limit and a cursor to continue where it stopped.
   */
  nextCursor?: string;
}
