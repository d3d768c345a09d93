// A resource's logs as the API shows them: the driver's entries (the
// database's own) merged with the entries Basin writes itself (events: why
// provisioning failed, retries), newest first, under one opaque cursor.
//
// The merge must resume exactly where a page ended, on both sides. Events are
// ours, so their position is a key, (at, id). The driver's cursor is opaque:
// when only some of the driver's entries fit a page, the driver is asked again
// for exactly that many, and its cursor after them is where the next page
// resumes. A side that showed nothing yet is pinned to the page's end, so an
// entry that arrives meanwhile never lands, out of order, on an older page.
// At equal times, the driver's entries come first.
//
// Each entry says which side it came from (`source`), and `query.source`
// keeps one side only: asking for Basin's entries never reads the database's
// lines, whatever their text says.

import type { LogEntry, LogPage, LogQuery, Target } from '../domain/logs.js';
import { cursorShape, decodeCursor, encodeCursor, InvalidCursorError } from '../lib/cursor.js';
import type { StoredEvent } from '../store/store.js';
import type { Ctx } from './context.js';

/**
 * t: target, n: node, d: the driver's cursor ('' before its first entry shown),
 * du: while d is '', an exclusive upper bound (epoch ms) for its entries (0:
 * none), dx: 1 once the driver has nothing older, ea/ei: events strictly older
 * than (ea, ei) (ei 0: no bound yet).
 */
const isMergedCursor = cursorShape({
  t: 'string',
  n: 'integer',
  d: 'string',
  du: 'integer',
  dx: 'integer',
  ea: 'integer',
  ei: 'integer',
});

type Position = { d: string; du: number; dx: number; ea: number; ei: number };

const START: Position = { d: '', du: 0, dx: 0, ea: 0, ei: 0 };

/** One page, newest first, of the driver's entries and Basin's events for `target`. */
export async function readMergedLogs(
  ctx: Pick<Ctx, 'driver' | 'store'>,
  target: Target,
  query: LogQuery,
): Promise<LogPage> {
  const node = query.node ?? 0;
  const scope = `${target.kind}:${target.id}`;
  const at = query.cursor === undefined ? START : resume(query.cursor, scope, node);
  const read: Read = { ctx, target, query, node, at };
  const sides = await readSides(read);
  const merged = merge(sides, query.limit);
  const next = await nextPosition(read, sides, merged);
  if (next === undefined) return { entries: merged.page };
  return { entries: merged.page, nextCursor: encodeCursor({ t: scope, n: node, ...next }) };
}

/** What one page reads: for whom, what was asked, and where the cursor left both sides. */
interface Read {
  ctx: Pick<Ctx, 'driver' | 'store'>;
  target: Target;
  query: LogQuery;
  node: number;
  at: Position;
}

/** Both sides' entries from where the cursor left them. */
interface Sides {
  fromDriver: LogPage;
  /** The driver's upper bound while it showed nothing yet (du). */
  driverBound: number | undefined;
  /** The driver has nothing more for this query (or is not asked). */
  driverDone: boolean;
  events: StoredEvent[];
}

/** The merged page, and how far into each side it went. */
interface Merged {
  page: LogEntry[];
  /** Entries of the driver's page shown. */
  i: number;
  /** Events shown. */
  j: number;
}

/** The driver's page from where the cursor left it, at most `n` entries, below `until`. */
function driverPage(read: Read, n: number, until: number | undefined): Promise<LogPage> {
  const { ctx, target, query, at } = read;
  return ctx.driver.readLogs(target, {
    ...query,
    node: query.nodeIndex ?? query.node,
    cursor: at.d === '' ? undefined : at.d,
    until: earliest(query.until, until),
    limit: n,
  });
}

/** Step 1: each side's next entries (none from a side `query.source` leaves out). */
async function readSides(read: Read): Promise<Sides> {
  const { ctx, target, query, node, at } = read;
  const limit = query.limit;
  const driverBound = at.d === '' && at.du > 0 ? at.du : undefined;
  const driverDone = at.dx === 1 || query.source === 'basin';
  const fromDriver: LogPage = driverDone
    ? { entries: [] }
    : await driverPage(read, limit, driverBound);
  const events =
    query.source === 'database'
      ? []
      : await ctx.store.events.list(target.kind, target.id, {
          node,
          before: at.ei > 0 ? { at: at.ea, id: at.ei } : undefined,
          since: query.since?.getTime(),
          until: query.until?.getTime(),
          severities: query.severities,
          search: query.search,
          limit: limit + 1,
        });
  return { fromDriver, driverBound, driverDone, events };
}

/**
 * Step 2: the merge, newest first. Once the driver's page is used up while
 * it has older entries, the page ends: an event older than what the driver
 * has not shown yet must wait.
 */
function merge({ fromDriver, events }: Sides, limit: number): Merged {
  const driven = fromDriver.entries;
  const driverMore = fromDriver.nextCursor !== undefined;
  const page: LogEntry[] = [];
  let i = 0;
  let j = 0;
  while (page.length < limit) {
    const d = driven[i];
    const e = events[j];
    if (d && (!e || timeOf(d) >= e.at)) {
      page.push(d);
      i++;
    } else if (e && (i < driven.length || !driverMore)) {
      page.push(entryOf(e));
      j++;
    } else {
      break;
    }
  }
  return { page, i, j };
}

/** Step 3: where the next page resumes on each side; undefined when nothing is older. */
async function nextPosition(
  read: Read,
  { fromDriver, driverBound, driverDone, events }: Sides,
  { page, i, j }: Merged,
): Promise<Position | undefined> {
  const { at } = read;
  const driven = fromDriver.entries;
  const driverMore = fromDriver.nextCursor !== undefined;
  const more = i < driven.length || driverMore || j < events.length;
  if (!more) return undefined;
  const last = page[page.length - 1];
  if (!last) {
    // Nothing fit: the driver stopped before its first entry (a local page
    // bounds its reading) and has more, which must come before older events.
    // Carry on from where it stopped; nothing else moves.
    if (driverMore) return { ...at, d: fromDriver.nextCursor as string, du: 0, dx: 0 };
    return undefined; // nothing matched, nothing older
  }

  const next: Position = { ...at };
  if (i === driven.length) {
    next.d = fromDriver.nextCursor ?? '';
    next.du = 0;
    next.dx = driverMore ? 0 : 1;
  } else if (i > 0) {
    // Some of the driver's entries fit: ask for exactly those to learn where
    // the next page resumes (pinned below the newest shown, so entries written
    // meanwhile cannot shift the count).
    const pin = at.d === '' ? Math.min(driverBound ?? Infinity, timeOf(driven[0]!) + 1) : undefined;
    const exact = await driverPage(read, i, pin);
    next.d = exact.nextCursor ?? '';
    next.du = 0;
    next.dx = exact.nextCursor === undefined ? 1 : 0;
  } else if (at.d === '' && !driverDone) {
    // None of the driver's entries fit (the page is all events): its next page
    // starts below this page's end.
    next.du = Math.min(driverBound ?? Infinity, timeOf(last) + 1);
  }
  if (j > 0) {
    const e = events[j - 1]!;
    next.ea = e.at;
    next.ei = e.id;
  } else if (at.ei === 0) {
    // No event shown yet: the next page's events are those not newer than this page's end.
    next.ea = timeOf(last);
    next.ei = Number.MAX_SAFE_INTEGER;
  }
  return next;
}

function resume(cursor: string, scope: string, node: number): Position {
  const c = decodeCursor(cursor, isMergedCursor);
  // A cursor of another resource or node was not issued for this request.
  if (c.t !== scope || c.n !== node) throw new InvalidCursorError();
  return { d: c.d, du: c.du, dx: c.dx, ea: c.ea, ei: c.ei };
}

function timeOf(entry: LogEntry): number {
  return Date.parse(entry.timestamp);
}

function entryOf(e: StoredEvent): LogEntry {
  return {
    timestamp: new Date(e.at).toISOString(),
    severity: e.severity,
    message: e.message,
    source: 'basin',
  };
}

/** The earlier of a query's `until` and a bound in epoch ms. */
function earliest(until: Date | undefined, boundMs: number | undefined): Date | undefined {
  if (boundMs === undefined) return until;
  return until === undefined || until.getTime() > boundMs ? new Date(boundMs) : until;
}
