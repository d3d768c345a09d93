// One page of a node's logs, read from PostgreSQL's jsonlog files.
//
// PostgreSQL (logging_collector = on, log_destination = 'jsonlog',
// log_directory = 'log', log_filename = 'postgresql-%Y%m%d-%H%M%S.log') writes
// pgdata/log/postgresql-YYYYMMDD-HHMMSS.json, starting a new file on rotation
// (by age and size); retention may delete the oldest. File names sort
// chronologically and lines within a file are in write order, so the newest
// entries are at the end of the newest file. A page is read backwards from a
// position, a chunk at a time, and stops as soon as it is full (plus one entry,
// to know whether older ones exist) or once `since` is passed: a request costs
// the page and the lines it skips, never the whole history; and never more
// than its budget (scan-budget.ts), after which it answers with what it has.
//
// A cursor is a position: a file name and the byte offset just past the next
// older line to return (lines before it are what is left to read); or, for a
// page whose budget ran out inside a line, that offset and where the line
// ends. Files only grow at their end and new files sort after old ones, so a
// position keeps pointing at the same place whatever is written or rotated
// meanwhile.
//
// The directory belongs to the service's OS user, which the service's
// tsdbadmin can act as (docs/security.md), so it may hold anything: links
// (a symlinked log directory is not read, and a file is read only when it
// is a regular file, opened without following a link, owned by
// `options.owner`), huge lines, files without newlines, thousands of files.
// And it may change while it is read: the directory is opened once, without
// following a link (safe-dir.ts), and listed and read through that
// descriptor, so a log directory swapped for a link to another service's
// after it was opened leads nowhere.

import type { FileHandle } from 'node:fs/promises';
import { cursorShape, decodeCursor, encodeCursor } from '../../../lib/cursor.js';
import { InvalidCursorError } from '../../../lib/cursor.js';
import type { LogPage, LogQuery } from '../../../domain/logs.js';
import { SafeDir } from '../host/files/safe-dir.js';
import { UnsafeFileError, type OpenChecks } from '../host/files/safe-fs.js';
import { BackwardLines, firstLine, isLineBoundary, type ReadPoint } from './backward-lines.js';
import { parseJsonlogLine, parseJsonlogPrefix, peekTimeMs } from './jsonlog.js';
import { ORDER_SLACK_MS, Page } from './log-page.js';
import { FILE_COST, READ_LIMITS, ScanBudget, type ReadLimits } from './scan-budget.js';

/** The files written with the log_filename above (the `.log` suffix becomes `.json`). */
const LOG_FILE = /^postgresql-\d{8}-\d{6}\.json$/;

/**
 * Scope (the caller's name for the node's stream), file name, offset; and,
 * for a read that stopped inside a line, where that line ends (see Position).
 */
const isLogCursor = cursorShape({ s: 'string', f: 'string', o: 'integer' });
const isMidLineCursor = cursorShape({ s: 'string', f: 'string', o: 'integer', e: 'integer' });

/**
 * Where a page stopped: the file, and how far back it was read (a
 * ReadPoint). A page that is full stops at a line boundary; one whose
 * budget ran out may stop anywhere, even inside a line or in the unended
 * tail of a file, and its cursor says which (`e`: 0 for a tail, else the
 * end of the line).
 */
interface Position {
  file: string;
  point: ReadPoint;
  /** Whether `point` is in the unended tail of the file rather than at a line boundary (without openEnd). */
  tail?: boolean;
}

export interface ReadOptions extends OpenChecks {
  /** READ_LIMITS by default. */
  limits?: Partial<ReadLimits>;
  /** Told of every read, with its size (tests count them). */
  onRead?: (bytes: number) => void;
  /** Milliseconds from a monotonic origin, for ReadLimits.maxMs (performance.now by default). */
  now?: () => number;
}

/**
 * One page of the jsonlog files in `logDir`, newest first. Filters combine
 * with AND: `since` keeps entries strictly after it, `until` strictly before it,
 * `severities` any of them, `search` all terms (case-insensitive substrings of
 * the message); `query.node` is the caller's business (it picks `logDir`).
 * `scope` names the stream (e.g. `service:<id>:<node>`) and is sealed into
 * cursors: a cursor from another scope, or not issued here, throws
 * InvalidCursorError. If the cursor's file was deleted meanwhile (retention),
 * reading continues with the next older file that still exists. Torn or
 * malformed lines are skipped; a missing `logDir` is an empty page, and so
 * is one that is a link or not a directory. Every component of `logDir`
 * but the last must be root's (its last, `log` in the data directory, is
 * not followed). `options.owner`, when given, is the uid every file read,
 * and the directory, must belong to.
 *
 * The read is bounded (scan-budget.ts): `nextCursor` is set when an older
 * matching entry exists (the page is full and the next page starts with
 * it), and also when the budget ran out first: the page then holds fewer
 * entries than the limit, maybe none, and the cursor continues where the
 * reading stopped. Lines longer than maxLineBytes are cut and marked (see
 * truncationMark). Rejects with the signal's reason (an AbortError) once
 * `query.signal` is aborted, without reading on.
 */
export async function readNodeLogs(
  logDir: string,
  query: LogQuery,
  scope: string,
  options: ReadOptions = {},
): Promise<LogPage> {
  const limits = { ...READ_LIMITS, ...options.limits };
  const budget = new ScanBudget(limits, query.signal, options.onRead, options.now);
  budget.checkAborted();
  const resume = query.cursor === undefined ? undefined : decodePosition(query.cursor, scope);
  const page = new Page(query);
  const dir = await openLogDir(logDir, options.owner);
  if (dir === undefined) return { entries: [] };
  try {
    const files = await listLogFiles(dir, limits.maxListed);
    for (let i = files.length - 1; i >= 0; i--) {
      const file = files[i]!;
      if (resume !== undefined && file > resume.file) continue;
      const from = file === resume?.file ? resume : undefined;
      const outcome = await scanFile(dir, file, from, page, budget, options);
      if (outcome === 'done') break;
      if (outcome !== 'more') {
        return { entries: page.entries, nextCursor: encodePosition(outcome, scope) };
      }
      // Between files: the next page starts with the older ones.
      if (i > 0 && budget.spent) {
        return {
          entries: page.entries,
          nextCursor: encodePosition({ file, point: { pos: 0 } }, scope),
        };
      }
    }
    return { entries: page.entries };
  } finally {
    await dir.close();
  }
}

/** The log directory, held open; undefined when there is none, or it is a link, a file, someone else's. */
async function openLogDir(logDir: string, owner: number | undefined): Promise<SafeDir | undefined> {
  try {
    return await SafeDir.open(logDir, owner);
  } catch (err) {
    if (err instanceof UnsafeFileError || (err as NodeJS.ErrnoException).code === 'ENOENT') {
      return undefined;
    }
    throw err;
  }
}

/**
 * Scans one file backwards from `resume` (its end when undefined), adding
 * matches to `page`. Returns the position of the first match that no longer
 * fits, or where the budget ran out; 'done' when `since` was passed; 'more'
 * when older files may still match.
 */
async function scanFile(
  dir: SafeDir,
  file: string,
  resume: Position | undefined,
  page: Page,
  budget: ScanBudget,
  checks: OpenChecks,
): Promise<Position | 'done' | 'more'> {
  const point = resume?.point;
  if (point !== undefined && point.pos === 0 && point.openEnd === undefined) return 'more';
  budget.charge(FILE_COST);
  let fh: FileHandle;
  try {
    fh = await dir.file(file, checks);
  } catch (err) {
    // Deleted by retention since the directory was listed: it held nothing newer.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'more';
    // A link, or someone else's file: not this node's log.
    if (err instanceof UnsafeFileError) return 'more';
    throw err;
  }
  try {
    const size = (await fh.stat()).size;
    if (resume !== undefined) {
      // Files only grow: a position past the end, or not where a page can stop, was not issued here.
      if (!(await isResumable(fh, resume, size))) throw new InvalidCursorError();
    } else if (page.untilMs !== undefined && (await startsAfter(fh, page.untilMs, budget))) {
      return 'more';
    }
    const lines = new BackwardLines(fh, point ?? { pos: size }, {
      maxLineBytes: budget.limits.maxLineBytes,
      budget,
    });
    for (let batch = await lines.next(); batch; batch = await lines.next()) {
      for (const line of batch) {
        // Most lines of a selective query are ruled out before JSON.parse.
        const peeked = peekTimeMs(line.text);
        if (peeked !== undefined) {
          if (page.pastSince(peeked)) return 'done';
          if (!page.mayMatch(line.text, peeked)) continue;
        }
        const rec =
          line.cut > 0 ? parseJsonlogPrefix(line.text, line.cut) : parseJsonlogLine(line.text);
        if (rec === undefined) continue;
        if (page.pastSince(rec.timeMs)) return 'done';
        if (!page.matches(rec)) continue;
        if (page.full) return { file, point: { pos: line.end } };
        page.add(rec);
      }
    }
    if (lines.finished) return 'more';
    // The budget ran out. Having read, the reader has met a newline unless it is in the tail.
    return { file, point: lines.point, tail: lines.point.openEnd === undefined };
  } finally {
    await fh.close();
  }
}

/**
 * Whether a page can have stopped at `position` of a file of `size` bytes:
 * at a line boundary; in the tail of the file; or inside a line, before the
 * newline that ends it. (Whether the bytes in between hold a newline is not
 * read again: that would cost what the cursor saves; a forged cursor only
 * misreads its holder's own logs.)
 */
async function isResumable(fh: FileHandle, { point, tail }: Position, size: number) {
  const { pos, openEnd } = point;
  if (pos > size) return false;
  if (tail) return true;
  if (openEnd === undefined) return isLineBoundary(fh, pos);
  return openEnd > pos && openEnd <= size && isLineBoundary(fh, openEnd);
}

/** Whether the whole file is at or after `untilMs` (judged by its first line), so it can be skipped. */
async function startsAfter(fh: FileHandle, untilMs: number, budget: ScanBudget): Promise<boolean> {
  const line = await firstLine(fh, undefined, budget);
  const rec = line === undefined ? undefined : parseJsonlogLine(line);
  return rec !== undefined && rec.timeMs >= untilMs + ORDER_SLACK_MS;
}

/**
 * The jsonlog files of a node, oldest first. At most `maxListed` entries
 * are looked at: PostgreSQL writes one file a day (or per 10 MB), so a
 * directory holding more was filled by someone else, and only part of it
 * is read.
 */
async function listLogFiles(dir: SafeDir, maxListed: number): Promise<string[]> {
  return (await dir.names(maxListed)).filter((n) => LOG_FILE.test(n)).sort();
}

function encodePosition({ file, point, tail }: Position, scope: string): string {
  const { pos, openEnd } = point;
  if (tail) return encodeCursor({ s: scope, f: file, o: pos, e: 0 });
  if (openEnd === undefined) return encodeCursor({ s: scope, f: file, o: pos });
  // Only the newline of the open line was read: that is the boundary just past it.
  if (openEnd === pos + 1) return encodeCursor({ s: scope, f: file, o: openEnd });
  return encodeCursor({ s: scope, f: file, o: pos, e: openEnd });
}

function decodePosition(cursor: string, scope: string): Position {
  const c = decodeCursor(
    cursor,
    (o): o is { s: string; f: string; o: number; e?: number } =>
      isLogCursor(o) || isMidLineCursor(o),
  );
  // The file name is only ever compared with listed names, never opened as
  // given; checking it anyway rejects hand-made cursors early.
  if (c.s !== scope || !LOG_FILE.test(c.f) || c.o < 0 || (c.e !== undefined && c.e < 0)) {
    throw new InvalidCursorError();
  }
  if (c.e === undefined) return { file: c.f, point: { pos: c.o } };
  if (c.e === 0) return { file: c.f, point: { pos: c.o }, tail: true };
  return { file: c.f, point: { pos: c.o, openEnd: c.e } };
}
