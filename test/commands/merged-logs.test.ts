// The merge of a driver's log entries with Basin's events (merged-logs.ts),
// against a driver that pages with an opaque cursor as the real ones do and
// the real SQLite store: walking every page gives exactly the merged history,
// newest first, whatever the page size, the filters and the interleaving.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { readMergedLogs } from '../../src/commands/merged-logs.js';
import type { LogEntry, LogPage, LogQuery, Target } from '../../src/domain/logs.js';
import { cursorShape, decodeCursor, encodeCursor } from '../../src/lib/cursor.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { NewEvent, Store } from '../../src/store/store.js';
import { tempDir } from '../helpers.js';

const TARGET: Target = { kind: 'service', id: 's1' };
const isCursor = cursorShape({ i: 'integer' });

/**
 * A driver whose history is `entries` (newest first), filtered and paged like
 * the real ones: its cursor is a position counted from the oldest entry, so
 * it keeps pointing at the same entry as newer ones arrive.
 */
function fakeDriver(entries: () => LogEntry[]) {
  const calls: LogQuery[] = [];
  return {
    calls,
    name: 'fake',
    capabilities: {
      forks: false,
      haReplicas: false,
      replicaSets: false,
      pooler: false,
      replicaSetPooler: false,
    },
    metrics: () => undefined,
    async readLogs(_target: Target, q: LogQuery): Promise<LogPage> {
      calls.push(q);
      const all = entries();
      const start = q.cursor === undefined ? 0 : all.length - decodeCursor(q.cursor, isCursor).i;
      const out: LogEntry[] = [];
      for (let i = start; i < all.length; i++) {
        const e = all[i]!;
        const t = Date.parse(e.timestamp);
        if (q.until && t >= q.until.getTime()) continue;
        if (q.since && t <= q.since.getTime()) continue;
        if (q.severities.length > 0 && !q.severities.includes(e.severity)) continue;
        if (!q.search.every((s) => e.message.toLowerCase().includes(s.toLowerCase()))) continue;
        if (out.length === q.limit) {
          return { entries: out, nextCursor: encodeCursor({ i: all.length - i }) };
        }
        out.push(e);
      }
      return { entries: out };
    },
  };
}

function openStore(t: TestContext): Store {
  const store = openSqliteStore(join(tempDir(t), 'basin.db'));
  t.after(() => store.close());
  return store;
}

const entry = (ms: number, message: string, severity = 'LOG'): LogEntry => ({
  timestamp: new Date(ms).toISOString(),
  severity,
  message,
  source: 'database',
});

async function addEvents(store: Store, events: Partial<NewEvent>[]) {
  await store.transaction(async (tx) => {
    for (const e of events) {
      await tx.events.add({
        resourceKind: 'service',
        resourceId: 's1',
        node: null,
        at: 0,
        severity: 'ERROR',
        message: 'basin: event',
        ...e,
      });
    }
  });
}

type Query = Omit<LogQuery, 'cursor' | 'limit'>;
const NO_FILTER: Query = { severities: [], search: [] };

/** Every page from the newest, following the cursor until it is absent. */
async function walk(ctx: Parameters<typeof readMergedLogs>[0], limit: number, q = NO_FILTER) {
  const pages: LogEntry[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await readMergedLogs(ctx, TARGET, { ...q, cursor, limit });
    assert.ok(page.entries.length <= limit);
    pages.push(page.entries);
    if (page.nextCursor === undefined) return pages;
    assert.equal(page.entries.length, limit, 'a page followed by a cursor is full');
    cursor = page.nextCursor;
    assert.ok(pages.length < 1000, 'paging ends');
  }
}

/** The merged history by the rule: newest first, the driver's entry first at equal times. */
function expected(driver: LogEntry[], events: LogEntry[]): string[] {
  const tagged = [
    ...driver.map((e, i) => ({ e, t: Date.parse(e.timestamp), side: 0, i })),
    ...events.map((e, i) => ({ e, t: Date.parse(e.timestamp), side: 1, i })),
  ];
  tagged.sort((a, b) => b.t - a.t || a.side - b.side || a.i - b.i);
  return tagged.map(({ e }) => `${e.timestamp} ${e.severity} ${e.message}`);
}
const show = (entries: LogEntry[]) =>
  entries.map((e) => `${e.timestamp} ${e.severity} ${e.message}`);

test('merged logs: every page size walks exactly the merged history, ties and all', async (t) => {
  const store = openStore(t);
  // Driver entries every 10 ms; events in between, on equal times, and older than all.
  const driverEntries = Array.from({ length: 40 }, (_, k) => entry(10_000 - k * 10, `db ${k}`));
  const events = [
    { at: 10_005, message: 'basin: newest of all' },
    { at: 9_900, message: 'basin: same time as db 10 (a)' },
    { at: 9_900, message: 'basin: same time as db 10 (b)' },
    { at: 9_855, message: 'basin: between' },
    { at: 9_000, message: 'basin: older than all' },
    { at: 8_000, message: 'basin: oldest' },
  ];
  await addEvents(store, events);
  const driver = fakeDriver(() => driverEntries);
  const ctx = { driver, store };
  // Events newest first, ids descending at equal times (b was added after a).
  const eventEntries = [...events]
    .map((e, id) => ({ ...e, id }))
    .sort((a, b) => b.at - a.at || b.id - a.id)
    .map((e) => entry(e.at, e.message, 'ERROR'));
  const want = expected(driverEntries, eventEntries);
  assert.equal(want.length, 46);
  for (const limit of [1, 2, 3, 4, 5, 7, 11, 45, 46, 47, 500]) {
    const pages = await walk(ctx, limit);
    assert.deepEqual(show(pages.flat()), want, `limit ${limit}`);
  }
});

test('merged logs: filters apply to both sides, and a cursor resumes within them', async (t) => {
  const store = openStore(t);
  const driverEntries = Array.from({ length: 30 }, (_, k) =>
    entry(5_000 - k * 10, k % 3 === 0 ? `checkpoint ${k}` : `query ${k}`, k % 2 ? 'ERROR' : 'LOG'),
  );
  await addEvents(store, [
    { at: 4_995, message: 'basin: provisioning failed: checkpoint disk', severity: 'ERROR' },
    { at: 4_845, message: 'basin: retrying', severity: 'WARNING' },
    { at: 4_800, message: 'basin: CHECKPOINT too slow', severity: 'ERROR', node: 1 },
  ]);
  const ctx = { driver: fakeDriver(() => driverEntries), store };
  const q: Query = {
    severities: ['ERROR'],
    search: ['checkpoint'],
    since: new Date(4_750),
    until: new Date(5_000),
  };
  const matching = driverEntries.filter((e) => {
    const ms = Date.parse(e.timestamp);
    return e.severity === 'ERROR' && /checkpoint/i.test(e.message) && ms > 4_750 && ms < 5_000;
  });
  const want = expected(matching, [
    entry(4_995, 'basin: provisioning failed: checkpoint disk', 'ERROR'),
  ]);
  assert.ok(want.length >= 3);
  for (const limit of [1, 2, 500]) {
    assert.deepEqual(show((await walk(ctx, limit, q)).flat()), want, `limit ${limit}`);
  }
  // Node 1 has the node's own event; node-less events show only for node 0.
  const node1 = (await walk(ctx, 500, { ...NO_FILTER, node: 1 })).flat();
  assert.deepEqual(
    node1.filter((e) => e.message.startsWith('basin:')).map((e) => e.message),
    ['basin: CHECKPOINT too slow'],
  );
});

test('merged logs: a service without a database yet shows its events alone', async (t) => {
  const store = openStore(t);
  await addEvents(store, [
    {
      at: 1_000,
      message: 'basin: provisioning failed (attempt 1), retrying in 1 s: x',
      severity: 'WARNING',
    },
    { at: 3_000, message: 'basin: provisioning failed: no space left' },
  ]);
  const ctx = { driver: fakeDriver(() => []), store };
  const first = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 1 });
  assert.deepEqual(show(first.entries), [
    `${new Date(3_000).toISOString()} ERROR basin: provisioning failed: no space left`,
  ]);
  const second = await readMergedLogs(ctx, TARGET, {
    ...NO_FILTER,
    limit: 1,
    cursor: first.nextCursor,
  });
  assert.equal(second.entries[0]?.severity, 'WARNING');
  assert.equal(second.nextCursor, undefined);
});

test('merged logs: entries written between pages never land on an older page', async (t) => {
  const store = openStore(t);
  let driverEntries = Array.from({ length: 10 }, (_, k) => entry(1_000 - k * 10, `db ${k}`));
  await addEvents(store, [{ at: 975, message: 'basin: old event' }]);
  const ctx = { driver: fakeDriver(() => driverEntries), store };
  const first = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 4 });
  assert.deepEqual(
    first.entries.map((e) => e.message),
    ['db 0', 'db 1', 'db 2', 'basin: old event'],
  );
  // New entries on both sides, newer than everything shown.
  driverEntries = [entry(2_000, 'db new'), ...driverEntries];
  await addEvents(store, [{ at: 2_001, message: 'basin: new event' }]);
  const rest: string[] = [];
  let cursor = first.nextCursor;
  while (cursor) {
    const page = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 4, cursor });
    rest.push(...page.entries.map((e) => e.message));
    cursor = page.nextCursor;
  }
  assert.deepEqual(rest, ['db 3', 'db 4', 'db 5', 'db 6', 'db 7', 'db 8', 'db 9']);
});

test('merged logs: an events-only page pins the driver below it', async (t) => {
  const store = openStore(t);
  const driverEntries = [entry(1_000, 'db old')];
  await addEvents(store, [
    { at: 3_000, message: 'basin: e1' },
    { at: 2_000, message: 'basin: e2' },
  ]);
  let entries = driverEntries;
  const ctx = { driver: fakeDriver(() => entries), store };
  const first = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 2 });
  assert.deepEqual(
    first.entries.map((e) => e.message),
    ['basin: e1', 'basin: e2'],
  );
  entries = [entry(5_000, 'db newer than the page'), ...driverEntries];
  const second = await readMergedLogs(ctx, TARGET, {
    ...NO_FILTER,
    limit: 2,
    cursor: first.nextCursor,
  });
  assert.deepEqual(
    second.entries.map((e) => e.message),
    ['db old'],
  );
  assert.equal(second.nextCursor, undefined);
});

test('merged logs: a cursor belongs to its resource and node', async (t) => {
  const store = openStore(t);
  await addEvents(store, [{ at: 1 }, { at: 2 }]);
  const ctx = { driver: fakeDriver(() => []), store };
  const { nextCursor } = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 1 });
  assert.ok(nextCursor);
  await assert.rejects(
    readMergedLogs(
      ctx,
      { kind: 'service', id: 's2' },
      { ...NO_FILTER, limit: 1, cursor: nextCursor },
    ),
    { name: 'InvalidCursorError' },
  );
  await assert.rejects(
    readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 1, node: 1, cursor: nextCursor }),
    { name: 'InvalidCursorError' },
  );
});

test('merged logs: a driver that answers short pages (bounded reads) still merges in order', async (t) => {
  const store = openStore(t);
  const driverEntries = Array.from({ length: 9 }, (_, k) => entry(1_000 - k * 10, `db ${k}`));
  await addEvents(store, [
    { at: 995, message: 'basin: a' },
    { at: 955, message: 'basin: b' },
    { at: 900, message: 'basin: c' },
  ]);
  const inner = fakeDriver(() => driverEntries);
  // At most 2 entries a call, with a cursor whenever more exist.
  const driver = {
    ...inner,
    readLogs: (tg: Target, q: LogQuery) =>
      inner.readLogs(tg, { ...q, limit: Math.min(q.limit, 2) }),
  };
  const ctx = { driver, store };
  const seen: LogEntry[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < 50; n++) {
    const page = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 5, cursor });
    seen.push(...page.entries);
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  assert.equal(cursor, undefined, 'paging ends');
  assert.deepEqual(
    show(seen),
    expected(driverEntries, [
      entry(995, 'basin: a', 'ERROR'),
      entry(955, 'basin: b', 'ERROR'),
      entry(900, 'basin: c', 'ERROR'),
    ]),
  );
});

test('merged logs: an empty driver page with a cursor (its read budget ran out) does not end paging', async (t) => {
  const store = openStore(t);
  const driverEntries = Array.from({ length: 6 }, (_, k) => entry(1_000 - k * 10, `db ${k}`));
  await addEvents(store, [
    { at: 1_005, message: 'basin: newest' },
    { at: 965, message: 'basin: middle' },
  ]);
  const inner = fakeDriver(() => driverEntries);
  // Every other call stops before its first entry, as the local reader does
  // when a page's bytes or time run out: no entries, a cursor where it stopped.
  let calls = 0;
  const driver = {
    ...inner,
    async readLogs(tg: Target, q: LogQuery): Promise<LogPage> {
      if (calls++ % 2 === 1) return inner.readLogs(tg, { ...q, limit: Math.min(q.limit, 2) });
      const start =
        q.cursor === undefined ? 0 : driverEntries.length - decodeCursor(q.cursor, isCursor).i;
      if (start >= driverEntries.length) return { entries: [] };
      return { entries: [], nextCursor: encodeCursor({ i: driverEntries.length - start }) };
    },
  };
  const ctx = { driver, store };
  const seen: LogEntry[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < 100; n++) {
    const page = await readMergedLogs(ctx, TARGET, { ...NO_FILTER, limit: 3, cursor });
    seen.push(...page.entries);
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  assert.equal(cursor, undefined, 'paging ends');
  assert.deepEqual(
    show(seen),
    expected(driverEntries, [
      entry(1_005, 'basin: newest', 'ERROR'),
      entry(965, 'basin: middle', 'ERROR'),
    ]),
  );
});

test("merged logs: each entry names its source, and source=basin never reads the database's lines", async (t) => {
  const store = openStore(t);
  // A role's RAISE reads exactly like Basin's own entry.
  const forged = 'basin: provisioning failed: forged by a role';
  const driverEntries = Array.from({ length: 7 }, (_, k) =>
    entry(1_000 - k * 10, k === 3 ? forged : `db ${k}`),
  );
  await addEvents(store, [
    { at: 995, message: 'basin: provisioning failed: real' },
    { at: 945, message: 'basin: node0 restarted' },
    { at: 900, message: 'basin: oldest' },
  ]);
  const driver = fakeDriver(() => driverEntries);
  const ctx = { driver, store };

  const all = (await walk(ctx, 4, { ...NO_FILTER, search: ['basin'] })).flat();
  assert.deepEqual(
    all.map((e) => `${e.source} ${e.message}`),
    [
      'basin basin: provisioning failed: real',
      `database ${forged}`,
      'basin basin: node0 restarted',
      'basin basin: oldest',
    ],
  );

  driver.calls.length = 0;
  for (const limit of [1, 2, 500]) {
    const ours = (await walk(ctx, limit, { ...NO_FILTER, source: 'basin' })).flat();
    assert.deepEqual(
      ours.map((e) => `${e.source} ${e.message}`),
      [
        'basin basin: provisioning failed: real',
        'basin basin: node0 restarted',
        'basin basin: oldest',
      ],
      `limit ${limit}`,
    );
  }
  assert.equal(driver.calls.length, 0, "Basin's entries alone never ask the driver");

  const theirs = (await walk(ctx, 3, { ...NO_FILTER, source: 'database' })).flat();
  assert.deepEqual(
    theirs.map((e) => e.message),
    driverEntries.map((e) => e.message),
  );
  assert.ok(theirs.every((e) => e.source === 'database'));
});
