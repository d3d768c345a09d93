// Synthetic logs for the sim driver, and their paging.
//
// A log stream (one per target and node) has one entry per LOG_INTERVAL_MS
// slot of absolute time: slot i holds exactly one entry, timestamped somewhere
// inside [i * interval, (i + 1) * interval), whose content is a pure function of
// (target, node, i). Nothing is stored: a page is computed by walking slots from
// the newest downwards, so a request costs O(page + skipped entries), and the
// same entry reads the same on every call and after a server restart.

import { decodeCursor, encodeCursor, cursorShape } from '../../lib/cursor.js';
import { InvalidCursorError } from '../../lib/cursor.js';
import type { LogEntry, LogPage, LogQuery, Target } from '../../domain/logs.js';
import { checkpointMessage, messageFor, severityFor, type Severity } from './sim-log-messages.js';
import { hashString, mixSeed, mulberry32, type Rng } from './sim-random.js';

/** One entry every 5 s: ~720 an hour, so paging (500 a page) is exercised at once. */
export const LOG_INTERVAL_MS = 5_000;
/** A target's history starts this long before the sim first saw it. */
export const LOG_BACKFILL_MS = 60 * 60 * 1000;
/** Entries older than this are gone, as with a real cloud's log retention; bounds a scan. */
export const LOG_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
/** Page size when the caller passes no usable limit (the API's maximum). */
const DEFAULT_LIMIT = 500;
/** Checkpoints (restartpoints on standbys) happen every 60 slots, i.e. every 5 minutes. */
const CHECKPOINT_EVERY = 60;

/** Where a stream is read and what the sim knows of its history. */
export interface SimLogSource {
  target: Target;
  /** 0 is the primary; 1.. are standbys. */
  node: number;
  /** When the sim first saw the target; its history starts LOG_BACKFILL_MS earlier. */
  firstSeenMs: number;
  nowMs: number;
}

interface Slot {
  index: number;
  timestampMs: number;
  severity: Severity;
  /** Which line of the checkpoint cycle this slot holds, or -1 for an ordinary one. */
  checkpointStep: number;
  /** Continues the slot's random sequence, for its message. */
  rng: Rng;
}

/** What a cursor holds: target kind and id, node, and the slot index to resume at. */
const isSimCursor = cursorShape({ k: 'string', t: 'string', n: 'number', i: 'integer' });

/**
 * One page of a target's logs, newest first. Filters combine with AND:
 * `since` keeps entries strictly after it, `until` strictly before it,
 * `severities` any of them (case-insensitive), `search` all terms
 * (case-insensitive substrings of the message). `nextCursor` is set only when
 * at least one older matching entry exists: it points at that entry's slot, so
 * the next page starts there. Throws InvalidCursorError for a cursor not issued
 * for this target and node. A cursor older than the retained history (after a
 * restart, or once retention passes it) yields an empty last page.
 */
export function readSimLogs(source: SimLogSource, query: LogQuery): LogPage {
  const { target, node, nowMs } = source;
  const stream = new LogStream(target, node);
  const newest = stream.newestAt(nowMs);

  let hi = newest;
  if (query.cursor !== undefined) hi = resumeIndex(query.cursor, target, node, newest);
  if (query.until !== undefined) hi = Math.min(hi, stream.lastBefore(query.until.getTime()));

  const startMs = Math.max(source.firstSeenMs - LOG_BACKFILL_MS, nowMs - LOG_RETENTION_MS);
  let lo = Math.ceil(startMs / LOG_INTERVAL_MS);
  if (query.since !== undefined) lo = Math.max(lo, stream.firstAfter(query.since.getTime()));

  const severities = new Set(query.severities.map((s) => s.toUpperCase()));
  const terms = query.search.map((t) => t.toLowerCase());
  const limit = Number.isFinite(query.limit) ? Math.max(1, Math.floor(query.limit)) : DEFAULT_LIMIT;

  const entries: LogEntry[] = [];
  for (let i = hi; i >= lo; i--) {
    const slot = stream.slot(i);
    if (severities.size > 0 && !severities.has(slot.severity)) continue;
    const message = stream.message(slot);
    if (terms.length > 0) {
      const haystack = message.toLowerCase();
      if (!terms.every((term) => haystack.includes(term))) continue;
    }
    if (entries.length === limit) {
      // A further match exists: the next page starts at it.
      return { entries, nextCursor: encodeCursor({ k: target.kind, t: target.id, n: node, i }) };
    }
    entries.push({
      timestamp: new Date(slot.timestampMs).toISOString(),
      severity: slot.severity,
      message,
      source: 'database',
    });
  }
  return { entries };
}

function resumeIndex(cursor: string, target: Target, node: number, newest: number): number {
  const c = decodeCursor(cursor, isSimCursor);
  // A cursor from another stream, or pointing into the future, was not issued here.
  if (c.k !== target.kind || c.t !== target.id || c.n !== node || c.i > newest) {
    throw new InvalidCursorError();
  }
  return c.i;
}

/** The entries of one target's node, computed on demand from a seed. */
class LogStream {
  private readonly seed: number;
  private readonly replica: boolean;
  private readonly checkpointPhase: number;

  constructor(target: Target, node: number) {
    this.seed = hashString(`${target.kind}:${target.id}:${node}`);
    // Read replica set nodes and HA standbys (node > 0) are all standbys.
    this.replica = target.kind === 'replicaSet' || node > 0;
    this.checkpointPhase = this.seed % CHECKPOINT_EVERY;
  }

  slot(index: number): Slot {
    const rng = mulberry32(mixSeed(this.seed, index));
    const timestampMs = index * LOG_INTERVAL_MS + Math.floor(rng() * LOG_INTERVAL_MS);
    const cycle = mod(index - this.checkpointPhase, CHECKPOINT_EVERY);
    const checkpointStep = cycle < (this.replica ? 3 : 2) ? cycle : -1;
    const severity = checkpointStep >= 0 ? 'LOG' : severityFor(rng());
    return { index, timestampMs, severity, checkpointStep, rng };
  }

  message(slot: Slot): string {
    return slot.checkpointStep >= 0
      ? checkpointMessage(this.replica, slot.checkpointStep, slot.index, slot.rng)
      : messageFor(slot.severity, this.replica, slot.index, slot.rng);
  }

  timestampOf(index: number): number {
    return (
      index * LOG_INTERVAL_MS +
      Math.floor(mulberry32(mixSeed(this.seed, index))() * LOG_INTERVAL_MS)
    );
  }

  /** The newest slot whose entry is not in the future. */
  newestAt(nowMs: number): number {
    const i = Math.floor(nowMs / LOG_INTERVAL_MS);
    return this.timestampOf(i) <= nowMs ? i : i - 1;
  }

  /** The newest slot whose entry is strictly before `ms`. */
  lastBefore(ms: number): number {
    const i = Math.floor(ms / LOG_INTERVAL_MS);
    return this.timestampOf(i) < ms ? i : i - 1;
  }

  /** The oldest slot whose entry is strictly after `ms`. */
  firstAfter(ms: number): number {
    const i = Math.floor(ms / LOG_INTERVAL_MS);
    return this.timestampOf(i) > ms ? i : i + 1;
  }
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}
