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
// the page and the lines it skips, never the whole history.
//
// A cursor is a position: a file name and the byte offset just past the next
// older line to return (lines before it are what is left to read). Files only
// grow at their end and new files sort after old ones, so a position keeps
// pointing at the same line whatever is written or rotated meanwhile.
//
// The directory belongs to the service's OS user, which the service's
// tsdbadmin can act as (docs/security.md), so it may hold links to anything:
// a symlinked log directory is not read, and a file is read only when it is
// a regular file (opened without following a link) owned by `checks.owner`.

import { lstat, readdir, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { cursorShape, decodeCursor, encodeCursor } from '../../../lib/cursor.js';
import { InvalidCursorError } from '../../../lib/cursor.js';
import type { LogPage, LogQuery } from '../../../domain/logs.js';
import { openRegularFile, UnsafeFileError, type OpenChecks } from '../safe-fs.js';
import { firstLine, isLineBoundary, linesBackward } from './backward-lines.js';
import { parseJsonlogLine, peekTimeMs } from './jsonlog.js';
import { ORDER_SLACK_MS, Page } from './log-page.js';

/** The files written with the log_filename above (the `.log` suffix becomes `.json`). */
const LOG_FILE = /^postgresql-\d{8}-\d{6}\.json$/;

/** Scope (the caller's name for the node's stream), file name, offset. */
const isLogCursor = cursorShape({ s: 'string', f: 'string', o: 'integer' });

interface Position {
  file: string;
  offset: number;
}

/**
 * One page of the jsonlog files in `logDir`, newest first. Filters combine
 * with AND: `since` keeps entries strictly after it, `until` strictly before it,
 * `severities` any of them, `search` all terms (case-insensitive substrings of
 * the message); `query.node` is the caller's business (it picks `logDir`).
 * `nextCursor` is set only when an older matching entry exists: the next page
 * starts with it. `scope` names the stream (e.g. `service:<id>:<node>`) and is
 * sealed into cursors: a cursor from another scope, or not issued here, throws
 * InvalidCursorError. If the cursor's file was deleted meanwhile (retention),
 * reading continues with the next older file that still exists. Torn or
 * malformed lines are skipped; a missing `logDir` is an empty page.
 * `checks.owner`, when given, is the uid every file read must belong to.
 */
export async function readNodeLogs(
  logDir: string,
  query: LogQuery,
  scope: string,
  checks: OpenChecks = {},
): Promise<LogPage> {
  const resume = query.cursor === undefined ? undefined : decodePosition(query.cursor, scope);
  const files = await listLogFiles(logDir);
  const page = new Page(query);

  for (let i = files.length - 1; i >= 0; i--) {
    const file = files[i]!;
    if (resume !== undefined && file > resume.file) continue;
    const offset = file === resume?.file ? resume.offset : undefined;
    const outcome = await scanFile(join(logDir, file), file, offset, page, checks);
    if (outcome === 'done') break;
    if (outcome !== 'more') {
      return { entries: page.entries, nextCursor: encodePosition(outcome, scope) };
    }
  }
  return { entries: page.entries };
}

/**
 * Scans one file backwards from `offset` (its end when undefined), adding
 * matches to `page`. Returns the position of the first match that no longer
 * fits, 'done' when `since` was passed, 'more' when older files may still match.
 */
async function scanFile(
  path: string,
  file: string,
  offset: number | undefined,
  page: Page,
  checks: OpenChecks,
): Promise<Position | 'done' | 'more'> {
  let fh: FileHandle;
  try {
    fh = await openRegularFile(path, checks);
  } catch (err) {
    // Deleted by retention since the directory was listed: it held nothing newer.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'more';
    // A link, or someone else's file: not this node's log.
    if (err instanceof UnsafeFileError || (err as NodeJS.ErrnoException).code === 'ELOOP') {
      return 'more';
    }
    throw err;
  }
  try {
    let end = (await fh.stat()).size;
    if (offset !== undefined) {
      // Files only grow: a position past the end or inside a line was not issued here.
      if (offset > end || offset < 1 || !(await isLineBoundary(fh, offset))) {
        throw new InvalidCursorError();
      }
      end = offset;
    } else if (page.untilMs !== undefined && (await startsAfter(fh, page.untilMs))) {
      return 'more';
    }
    for await (const batch of linesBackward(fh, end)) {
      for (const line of batch) {
        // Most lines of a selective query are ruled out before JSON.parse.
        const peeked = peekTimeMs(line.text);
        if (peeked !== undefined) {
          if (page.pastSince(peeked)) return 'done';
          if (!page.mayMatch(line.text, peeked)) continue;
        }
        const rec = parseJsonlogLine(line.text);
        if (rec === undefined) continue;
        if (page.pastSince(rec.timeMs)) return 'done';
        if (!page.matches(rec)) continue;
        if (page.full) return { file, offset: line.end };
        page.add(rec);
      }
    }
    return 'more';
  } finally {
    await fh.close();
  }
}

/** Whether the whole file is at or after `untilMs` (judged by its first line), so it can be skipped. */
async function startsAfter(fh: FileHandle, untilMs: number): Promise<boolean> {
  const line = await firstLine(fh);
  const rec = line === undefined ? undefined : parseJsonlogLine(line);
  return rec !== undefined && rec.timeMs >= untilMs + ORDER_SLACK_MS;
}

/** The jsonlog files of a node, oldest first; none when the directory does not exist (yet). */
async function listLogFiles(logDir: string): Promise<string[]> {
  try {
    if (!(await lstat(logDir)).isDirectory()) return [];
    return (await readdir(logDir)).filter((name) => LOG_FILE.test(name)).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

function encodePosition(pos: Position, scope: string): string {
  return encodeCursor({ s: scope, f: pos.file, o: pos.offset });
}

function decodePosition(cursor: string, scope: string): Position {
  const c = decodeCursor(cursor, isLogCursor);
  // The file name is only ever compared with listed names, never opened as
  // given; checking it anyway rejects hand-made cursors early.
  if (c.s !== scope || !LOG_FILE.test(c.f) || c.o < 1) throw new InvalidCursorError();
  return { file: c.f, offset: c.o };
}
