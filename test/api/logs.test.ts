import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startBasin, type TestBasin } from '../helpers.js';
import {
  assertError,
  RFC3339,
  readyService,
  serviceUrl,
  waitForStatus,
} from './service-helpers.js';

const logsUrl = (b: TestBasin, id: string, query = '') =>
  `${serviceUrl(b, id)}/logs${query ? `?${query}` : ''}`;

/** One page, with the response's invariants checked. */
async function page(b: TestBasin, id: string, query = ''): Promise<any> {
  const res = await b.call('GET', logsUrl(b, id, query));
  assert.equal(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
  const body = res.body;
  assert.ok(Array.isArray(body.logs));
  assert.ok(Array.isArray(body.entries));
  assert.ok(body.entries.length <= 500, 'at most 500 a page');
  assert.equal(body.logs.length, body.entries.length);
  for (const [i, e] of body.entries.entries()) {
    assert.deepEqual(Object.keys(e).sort(), ['message', 'severity', 'source', 'timestamp']);
    assert.ok(e.source === 'basin' || e.source === 'database', e.source);
    assert.equal(body.logs[i], e.message, 'logs[i] is entries[i].message');
    assert.match(e.timestamp, RFC3339);
    assert.equal(typeof e.severity, 'string');
    const newer = body.entries[i - 1];
    if (newer) assert.ok(Date.parse(newer.timestamp) >= Date.parse(e.timestamp), 'newest first');
  }
  if ('lastCursor' in body) {
    assert.equal(typeof body.lastCursor, 'string');
    assert.ok(body.lastCursor.length > 0);
  }
  return body;
}

/** Every page from the newest, following lastCursor until it is absent. */
async function walk(b: TestBasin, id: string, query = ''): Promise<any[][]> {
  const pages: any[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const q = [query, cursor ? `cursor=${encodeURIComponent(cursor)}` : '']
      .filter(Boolean)
      .join('&');
    const body = await page(b, id, q);
    pages.push(body.entries);
    if (body.lastCursor === undefined) return pages;
    assert.equal(body.entries.length, 500, 'a page followed by a cursor is full');
    cursor = body.lastCursor;
    assert.ok(pages.length < 20, 'paging ends');
  }
}

/**
 * The sim's synthetic logs grow by an entry every few seconds; a clock that
 * stands still keeps the history the same between the walks a test compares.
 */
const FROZEN = {
  options: {
    clock: (
      (now) => () =>
        now
    )(Date.now()),
  },
};

test('logs: newest first, 500 a page, lastCursor walks the whole history without duplicates', async (t) => {
  const b = await startBasin(t, FROZEN);
  const { id } = await readyService(b);

  const first = await page(b, id);
  assert.equal(first.entries.length, 500);
  assert.equal(typeof first.lastCursor, 'string', 'older entries exist');
  const newest = Date.parse(first.entries[0].timestamp);
  assert.ok(newest <= Date.now() && newest > Date.now() - 60_000, 'the newest entry is recent');

  const pages = await walk(b, id);
  assert.ok(pages.length >= 2);
  assert.deepEqual(pages[0], first.entries);
  for (let i = 1; i < pages.length; i++) {
    const prev = pages[i - 1] as any[];
    const cur = pages[i] as any[];
    assert.ok(cur.length > 0);
    assert.ok(
      Date.parse(cur[0].timestamp) < Date.parse(prev[prev.length - 1].timestamp),
      'each page is strictly older than the one before',
    );
  }
  const all = pages.flat();
  const keys = all.map((e) => `${e.timestamp} ${e.message}`);
  assert.equal(new Set(keys).size, keys.length, 'no duplicates');
  assert.ok(all.length > 500);
  // The last page's end really is the end: an unfiltered page never has a cursor beyond it.
  const last = pages[pages.length - 1] as any[];
  assert.ok(last.length <= 500);
});

test('logs filters: severities (OR), search terms (AND), since and until, together', async (t) => {
  const b = await startBasin(t, FROZEN);
  const { id } = await readyService(b);
  const all = (await walk(b, id)).flat();

  const errors = (await walk(b, id, 'severities=ERROR&severities=FATAL')).flat();
  assert.ok(errors.length > 0);
  assert.ok(errors.every((e) => e.severity === 'ERROR' || e.severity === 'FATAL'));
  assert.equal(errors.length, all.filter((e) => ['ERROR', 'FATAL'].includes(e.severity)).length);
  assert.ok(errors.some((e) => e.severity === 'ERROR'));
  const one = (await walk(b, id, 'severities=warning')).flat();
  assert.ok(one.length > 0 && one.every((e) => e.severity === 'WARNING'), 'case-insensitive');

  const found = (await walk(b, id, 'search=checkpoint&search=COMPLETE')).flat();
  assert.ok(found.length > 0);
  for (const e of found) {
    assert.ok(/checkpoint/i.test(e.message) && /complete/i.test(e.message), e.message);
  }
  const expected = all.filter((e) => /checkpoint/i.test(e.message) && /complete/i.test(e.message));
  assert.equal(found.length, expected.length);
  assert.ok(
    all.some((e) => /checkpoint/i.test(e.message) && !/complete/i.test(e.message)),
    'every term is required, not just one',
  );
  assert.deepEqual((await page(b, id, 'search=no-such-term-anywhere')).entries, []);
  // By who wrote them: this service never failed, so every entry is the database's.
  assert.deepEqual((await page(b, id, 'source=basin')).entries, []);
  assert.deepEqual((await walk(b, id, 'source=database')).flat(), all);
  assert.ok(all.every((e) => e.source === 'database'));

  // since/until: entries strictly inside the bounds, and all of them.
  const since = all[300].timestamp;
  const until = all[20].timestamp;
  const inside = await page(
    b,
    id,
    `since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}`,
  );
  assert.equal(inside.lastCursor, undefined);
  assert.deepEqual(inside.entries, all.slice(21, 300));
  for (const e of inside.entries) {
    const ts = Date.parse(e.timestamp);
    assert.ok(ts > Date.parse(since) && ts < Date.parse(until));
  }
  // An offset spelling of the same instant works too.
  const offset = new Date(Date.parse(until) + 2 * 3_600_000).toISOString().replace('Z', '+02:00');
  assert.deepEqual((await page(b, id, `until=${encodeURIComponent(offset)}`)).entries[0], all[21]);

  // Everything combined.
  const combined = (
    await walk(
      b,
      id,
      `severities=LOG&search=checkpoint&since=${encodeURIComponent(all[all.length - 1].timestamp)}`,
    )
  ).flat();
  assert.ok(combined.length > 0);
  assert.ok(combined.every((e) => e.severity === 'LOG' && /checkpoint/i.test(e.message)));
});

test('logs nodes: node 0 always, node 1 only once the service has an HA replica', async (t) => {
  const b = await startBasin(t, FROZEN);
  const { id } = await readyService(b);
  const primary = await page(b, id, 'node=0');
  assert.ok(primary.entries.length > 0);
  assert.deepEqual(primary.entries, (await page(b, id)).entries, 'node 0 is the default');
  assertError(
    await b.call('GET', logsUrl(b, id, 'node=1')),
    400,
    'INVALID_REQUEST',
    /node must be a whole number from 0 to 0/,
  );

  assert.equal(
    (await b.call('POST', `${serviceUrl(b, id)}/setHA`, { replica_count: 1 })).status,
    202,
  );
  await waitForStatus(b, id, 'READY');
  const standby = await page(b, id, 'node=1');
  assert.ok(standby.entries.length > 0);
  assert.notDeepEqual(standby.entries, primary.entries, 'another node, other logs');
  assertError(await b.call('GET', logsUrl(b, id, 'node=2')), 400, 'INVALID_REQUEST', /from 0 to 1/);
  // A cursor belongs to its node.
  assertError(
    await b.call('GET', logsUrl(b, id, `node=1&cursor=${encodeURIComponent(primary.lastCursor)}`)),
    400,
    'INVALID_REQUEST',
    /cursor/,
  );
  for (const node of ['-1', 'one', '1.5', '']) {
    assertError(await b.call('GET', logsUrl(b, id, `node=${node}`)), 400, 'INVALID_REQUEST');
  }
});

test('logs bad queries are 400 INVALID_REQUEST; unknown services 404', async (t) => {
  const b = await startBasin(t, FROZEN);
  const { id } = await readyService(b);
  const other = await readyService(b, { name: 'other' });
  const foreignCursor = (await page(b, other.id)).lastCursor;
  const ownCursor = (await page(b, id)).lastCursor;
  const now = new Date().toISOString();
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  const e = encodeURIComponent;

  const bad: [string, RegExp][] = [
    ['cursor=garbage', /cursor is not valid/],
    ['cursor=', /cursor/],
    [`cursor=${e(ownCursor.slice(0, -3))}`, /cursor is not valid/],
    [`cursor=${e(`${ownCursor}x`)}`, /cursor is not valid/],
    [`cursor=${e(foreignCursor)}`, /cursor is not valid/],
    ['since=yesterday', /since must be an RFC 3339 timestamp/],
    ['until=2025-06-01', /until must be an RFC 3339 timestamp/],
    ['since=2025-02-30T00:00:00Z', /since must be an RFC 3339 timestamp/],
    [`since=${e(now)}&until=${e(now)}`, /since must be earlier than until/],
    [`since=${e(now)}&until=${e(hourAgo)}`, /since must be earlier than until/],
    ['severities=VERBOSE', /Unknown severity "VERBOSE"/],
    ['severities=ERROR&severities=NOPE', /Unknown severity "NOPE"/],
    ['limit=10', /limit|additional/],
    ['source=tenant', /source must be basin or database/],
    ['source=Basin', /source must be basin or database/],
  ];
  for (const [query, message] of bad) {
    const res = await b.call('GET', logsUrl(b, id, query));
    assert.equal(res.status, 400, `${query} → ${res.status} ${JSON.stringify(res.body)}`);
    assertError(res, 400, 'INVALID_REQUEST', message);
  }
  // The own cursor is fine.
  assert.equal((await b.call('GET', logsUrl(b, id, `cursor=${e(ownCursor)}`))).status, 200);

  assertError(await b.call('GET', logsUrl(b, 'nosuchsvc1')), 404, 'NOT_FOUND');
  assertError(await b.call('GET', `/v1/projects/zzzzzzzzzz/services/${id}/logs`), 404, 'NOT_FOUND');

  // A deleted service has no logs to read.
  assert.equal((await b.call('DELETE', serviceUrl(b, other.id))).status, 202);
  await b.basin.engine.idle();
  assertError(await b.call('GET', logsUrl(b, other.id)), 404, 'NOT_FOUND');
});
