import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeCursor } from '../../lib/cursor.js';
import { InvalidCursorError } from '../../lib/cursor.js';
import type { LogEntry, LogQuery, Target } from '../../domain/logs.js';
import { createSimDriver, type SimDriver } from './sim-driver.js';

const START = Date.parse('2025-06-01T12:00:00.000Z');
const SERVICE: Target = { kind: 'service', id: 'svc0000001' };

function setup() {
  const clock = { now: START };
  const sim = createSimDriver({ delayMs: 0, clock: () => clock.now });
  return { clock, sim };
}

function query(over: Partial<LogQuery> = {}): LogQuery {
  return { severities: [], search: [], limit: 500, ...over };
}

/** Every page from the newest, following cursors; checks each page's size. */
async function walk(sim: SimDriver, target: Target, q: LogQuery) {
  const pages: LogEntry[][] = [];
  let cursor: string | undefined;
  do {
    const page = await sim.readLogs(target, { ...q, cursor });
    assert.ok(page.entries.length <= q.limit);
    if (page.nextCursor !== undefined) assert.equal(page.entries.length, q.limit);
    pages.push(page.entries);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { pages, entries: pages.flat() };
}

async function everything(sim: SimDriver, target: Target = SERVICE, node = 0) {
  const page = await sim.readLogs(target, query({ limit: 1_000_000, node }));
  assert.equal(page.nextCursor, undefined);
  return page.entries;
}

test('a new service already has an hour of logs, newest first, well formed', async () => {
  const { sim } = setup();
  const all = await everything(sim);
  assert.ok(all.length >= 719 && all.length <= 721, `${all.length} entries`);
  for (const [i, e] of all.entries()) {
    assert.equal(e.timestamp, new Date(Date.parse(e.timestamp)).toISOString(), 'RFC 3339 UTC ms');
    assert.match(e.severity, /^(LOG|WARNING|ERROR|FATAL)$/);
    assert.ok(e.message.length > 0);
    const t = Date.parse(e.timestamp);
    assert.ok(t <= START && t >= START - 3_600_000);
    const newer = all[i - 1];
    if (newer) assert.ok(Date.parse(newer.timestamp) > t, 'strictly newest first');
  }
  const count = (s: string) => all.filter((e) => e.severity === s).length;
  assert.ok(count('LOG') > all.length * 0.8);
  assert.ok(count('WARNING') > 0 && count('ERROR') > 0);
  assert.ok(all.some((e) => e.message === 'checkpoint starting: time'));
  assert.ok(all.some((e) => e.message.startsWith('connection authorized: user=tsdbadmin')));
});

test('paging walks the whole history without duplicates or gaps, then stops', async () => {
  const { sim } = setup();
  const all = await everything(sim);
  const { pages, entries } = await walk(sim, SERVICE, query());
  assert.equal(pages.length, 2);
  assert.equal(pages[0]?.length, 500);
  assert.deepEqual(entries, all);
  const small = await walk(sim, SERVICE, query({ limit: 7 }));
  assert.deepEqual(small.entries, all);
  assert.equal(small.pages.length, Math.ceil(all.length / 7));
});

test('a history that is an exact multiple of the limit has no trailing empty page', async () => {
  const { sim } = setup();
  const all = await everything(sim);
  const oldest600 = all.slice(-600);
  const until = new Date(all[all.length - 601]?.timestamp ?? '');
  for (const limit of [600, 300, 200, 1]) {
    const { pages, entries } = await walk(sim, SERVICE, query({ until, limit }));
    assert.deepEqual(entries, oldest600);
    assert.equal(pages.length, 600 / limit, `limit ${limit}`);
  }
  const exact = await sim.readLogs(SERVICE, query({ limit: all.length }));
  assert.equal(exact.entries.length, all.length);
  assert.equal(exact.nextCursor, undefined);
});

test('filters combine with AND and match a brute-force filter', async () => {
  const { sim } = setup();
  const all = await everything(sim);
  const severe = await walk(sim, SERVICE, query({ severities: ['ERROR', 'FATAL'], limit: 5 }));
  assert.deepEqual(
    severe.entries,
    all.filter((e) => e.severity === 'ERROR' || e.severity === 'FATAL'),
  );
  assert.ok(severe.entries.length > 0);
  const lower = await everything(sim);
  const warnings = await sim.readLogs(SERVICE, query({ severities: ['warning'] }));
  assert.deepEqual(
    warnings.entries,
    lower.filter((e) => e.severity === 'WARNING'),
  );

  const search = await walk(
    sim,
    SERVICE,
    query({ search: ['CONNECTION', 'authorized'], limit: 10 }),
  );
  assert.deepEqual(
    search.entries,
    all.filter((e) => e.message.startsWith('connection authorized:')),
  );
  assert.ok(search.entries.length > 10);
  const none = await sim.readLogs(SERVICE, query({ search: ['checkpoint', 'authorized'] }));
  assert.deepEqual(none, { entries: [] });

  const since = new Date(all[40]?.timestamp ?? '');
  const until = new Date(all[5]?.timestamp ?? '');
  const window = await sim.readLogs(SERVICE, query({ since, until }));
  assert.deepEqual(window.entries, all.slice(6, 40), 'both bounds are exclusive');

  const combined = await walk(
    sim,
    SERVICE,
    query({ since, severities: ['LOG'], search: ['duration'], limit: 2 }),
  );
  assert.deepEqual(
    combined.entries,
    all
      .slice(0, 40)
      .filter((e) => e.severity === 'LOG' && e.message.toLowerCase().includes('duration')),
  );
});

test('logs are deterministic, stable as time passes, and differ per node', async () => {
  const a = setup();
  const b = setup();
  const first = await everything(a.sim);
  assert.deepEqual(await everything(b.sim), first);
  a.clock.now += 60_000;
  const later = await everything(a.sim);
  assert.ok(later.length >= first.length + 11 && later.length <= first.length + 13);
  assert.deepEqual(later.slice(later.length - first.length), first, 'old entries unchanged');

  const replica = await everything(a.sim, SERVICE, 1);
  assert.notDeepEqual(replica.slice(0, 20), later.slice(0, 20));
  assert.ok(replica.some((e) => e.message === 'restartpoint starting: time'));
  assert.ok(!replica.some((e) => e.message.startsWith('checkpoint')));
  const set = await everything(a.sim, { kind: 'replicaSet', id: 'rs00000001' });
  assert.ok(set.some((e) => e.message.startsWith('restartpoint complete: wrote')));
});

test('cursors not issued for this target and node are InvalidCursorError', async () => {
  const { sim } = setup();
  const page = await sim.readLogs(SERVICE, query({ limit: 10 }));
  const cursor = page.nextCursor ?? assert.fail('expected a cursor');
  const other = await sim.readLogs({ kind: 'service', id: 'svc0000002' }, query({ limit: 10 }));
  const node1 = await sim.readLogs(SERVICE, query({ limit: 10, node: 1 }));
  const b64 = (text: string) => Buffer.from(text).toString('base64url');
  const bad = [
    'garbage!',
    'dGhpcyBpcyBub3QgYSBjdXJzb3I',
    b64('{"v":1,"k":"service","t":"svc0000001","n":0}'),
    b64('{"v":1,"k":"service","t":"svc0000001","n":0,"i":"12"}'),
    `${cursor}A`,
    other.nextCursor,
    node1.nextCursor,
    encodeCursor({ k: 'replicaSet', t: 'svc0000001', n: 0, i: 1 }),
    encodeCursor({ k: 'service', t: 'svc0000001', n: 0, i: Math.floor(START / 5000) + 10 }),
  ];
  for (const text of bad) {
    assert.ok(text !== undefined);
    await assert.rejects(sim.readLogs(SERVICE, query({ cursor: text })), InvalidCursorError, text);
  }
  const next = await sim.readLogs(SERVICE, query({ cursor, limit: 10 }));
  assert.equal(next.entries.length, 10);
  assert.ok(
    Date.parse(next.entries[0]?.timestamp ?? '') < Date.parse(page.entries[9]?.timestamp ?? ''),
  );
});

test('a cursor older than the retained history gives an empty last page', async () => {
  const { sim } = setup();
  const old = encodeCursor({
    k: 'service',
    t: SERVICE.id,
    n: 0,
    i: Math.floor(START / 5000) - 5000,
  });
  assert.deepEqual(await sim.readLogs(SERVICE, query({ cursor: old })), { entries: [] });
});
