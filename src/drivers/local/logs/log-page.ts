// A page of log entries being gathered, and the query's filters.

import type { LogEntry, LogQuery } from '../../../domain/logs.js';
import type { JsonlogRecord } from './jsonlog.js';

/** Page size when the caller passes no usable limit (the API's maximum). */
const DEFAULT_LIMIT = 500;

/**
 * Backends stamp an entry when they emit it and the logging collector writes
 * entries as they arrive, so neighbouring lines may be out of order by a few
 * milliseconds. Scans stop only this far past `since`, and skip a file by its
 * first line only when it starts this far after `until`.
 */
export const ORDER_SLACK_MS = 1_000;

/** Whether JSON escapes some character of `text`: then it is not found verbatim in a raw line. */
const escapedInJson = (text: string) => [...text].some((c) => c < ' ' || c === '"' || c === '\\');

/**
 * What ends the message of a log line longer than Basin reads
 * (ReadLimits.maxLineBytes): `<the message as read>… [truncated by Basin: <n> more bytes]`,
 * `n` being the bytes of the line that were not read.
 */
export const truncationMark = (bytes: number) => `… [truncated by Basin: ${bytes} more bytes]`;

export class Page {
  readonly entries: LogEntry[] = [];
  readonly limit: number;
  readonly sinceMs: number | undefined;
  readonly untilMs: number | undefined;
  private readonly severities: Set<string>;
  private readonly terms: string[];
  /** How the wanted severities appear in a raw line (lower-cased). */
  private readonly rawSeverities: string[];
  /** The terms that appear verbatim in a raw line wherever they appear in its message. */
  private readonly rawTerms: string[];

  constructor(query: LogQuery) {
    this.limit = Number.isFinite(query.limit)
      ? Math.max(1, Math.floor(query.limit))
      : DEFAULT_LIMIT;
    this.sinceMs = query.since?.getTime();
    this.untilMs = query.until?.getTime();
    this.severities = new Set(query.severities.map((s) => s.toUpperCase()));
    this.terms = query.search.map((t) => t.toLowerCase());
    this.rawSeverities = [...this.severities].map((s) =>
      `"error_severity":${JSON.stringify(s)}`.toLowerCase(),
    );
    this.rawTerms = this.terms.filter((t) => !escapedInJson(t));
  }

  get full(): boolean {
    return this.entries.length >= this.limit;
  }

  /** Whether an entry at `timeMs`, and everything older, is before `since`: the scan can stop. */
  pastSince(timeMs: number): boolean {
    return this.sinceMs !== undefined && timeMs <= this.sinceMs - ORDER_SLACK_MS;
  }

  /**
   * A cheap test of a raw line stamped `timeMs`: false only when its record
   * cannot match (out of the time window, or a wanted severity or term is
   * nowhere in the line), which saves parsing most lines of a selective query.
   */
  mayMatch(raw: string, timeMs: number): boolean {
    if (!this.inWindow(timeMs)) return false;
    if (this.rawSeverities.length === 0 && this.rawTerms.length === 0) return true;
    const lower = raw.toLowerCase();
    if (this.rawSeverities.length > 0 && !this.rawSeverities.some((s) => lower.includes(s))) {
      return false;
    }
    return this.rawTerms.every((term) => lower.includes(term));
  }

  matches(rec: JsonlogRecord): boolean {
    if (!this.inWindow(rec.timeMs)) return false;
    if (this.severities.size > 0 && !this.severities.has(rec.severity.toUpperCase())) return false;
    if (this.terms.length === 0) return true;
    const haystack = rec.message.toLowerCase();
    return this.terms.every((term) => haystack.includes(term));
  }

  /** Adds a matching record; a message that was cut short says so (filters saw it without the mark). */
  add(rec: JsonlogRecord): void {
    this.entries.push({
      timestamp: new Date(rec.timeMs).toISOString(),
      severity: rec.severity,
      message: rec.cut === undefined ? rec.message : rec.message + truncationMark(rec.cut),
      source: 'database',
    });
  }

  private inWindow(timeMs: number): boolean {
    if (this.sinceMs !== undefined && timeMs <= this.sinceMs) return false;
    return this.untilMs === undefined || timeMs < this.untilMs;
  }
}
