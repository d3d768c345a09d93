import { test } from 'node:test';
import assert from 'node:assert/strict';
import { merge, nearestRank, summarise, valueOf } from './aggregate.js';
import type { Fn, SeriesSample } from './catalogue.js';
import { COARSE_STEP_S, RAW_RETENTION_S, SeriesStore } from './series-store.js';

const T0 = Date.parse('2026-06-25T10:00:00Z');
const labels = { node: '0', role: 'primary' };
const commits = (value: number): SeriesSample => ({
  name: 'basin_database_xact_commit_total',
  labels,
  value,
});
const lag = (value: number, node = '1'): SeriesSample => ({
  name: 'basin_replication_lag_bytes',
  labels: { node, role: 'replica' },
  value,
});

/** A store fed `values` of one series every 10 s from T0 (a sample at T0 + 10 s·i). */
function fed(values: number[], sample: (v: number) => SeriesSample = commits): SeriesStore {
  const store = new SeriesStore(10_000);
  values.forEach((v, i) => store.record('svc', T0 + i * 10_000, [sample(v)]));
  return store;
}

function ask(store: SeriesStore, fn: Fn, name = 'basin_database_xact_commit_total', bucket = 60) {
  return store.query(
    'svc',
    {
      name: name as never,
      fromMs: T0,
      toMs: T0 + 2 * bucket * 1000,
      bucketSeconds: bucket,
      fn,
      filters: [],
    },
    false,
  );
}

test('every fn of a bucket, from known samples (the second bucket is empty: null)', () => {
  // Six samples in the first minute: 10, 20, 5 (a reset), 15, 15, 40.
  const store = fed([10, 20, 5, 15, 15, 40]);
  const expected: Record<Fn, number | null> = {
    COUNT: 6,
    SUM: 105,
    AVG: 17.5,
    MIN: 5,
    MAX: 40,
    LAST: 40,
    // Rises: 10, then 5 (reset: the new value), 10, 0, 25.
    INCREASE: 50,
    // Over the 50 s those steps span.
    RATE: 1,
    P50: 15,
    P90: 40,
    P99: 40,
  };
  for (const [fn, value] of Object.entries(expected)) {
    const [series] = ask(store, fn as Fn);
    assert.deepEqual(series?.labels, labels);
    assert.deepEqual(
      series?.data,
      [
        { time: '2026-06-25T10:00:00.000Z', value },
        { time: '2026-06-25T10:01:00.000Z', value: null },
      ],
      fn,
    );
  }
});

test('the step from the previous bucket counts in the next, once', () => {
  // 0..110 by 10 over two minutes: each minute rises by 60 (the second by the step from 50 to 60 too).
  const store = fed(Array.from({ length: 12 }, (_, i) => i * 10));
  assert.deepEqual(
    ask(store, 'INCREASE')[0]?.data.map((d) => d.value),
    [50, 60],
  );
  assert.deepEqual(
    ask(store, 'RATE')[0]?.data.map((d) => d.value),
    [1, 1],
  );
});

test('percentiles are the nearest rank of the samples', () => {
  const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(nearestRank(sorted, 0.5), 50);
  assert.equal(nearestRank(sorted, 0.9), 90);
  assert.equal(nearestRank(sorted, 0.99), 99);
  assert.equal(nearestRank([7], 0.99), 7);
});

test('filters pick series by label; every label set is its own series', () => {
  const store = new SeriesStore(10_000);
  store.record('svc', T0, [lag(100, '1'), lag(300, '2')]);
  store.record('svc', T0 + 10_000, [lag(200, '1'), lag(500, '2')]);
  const q = (filters: { key: string; value: string }[]) =>
    store.query(
      'svc',
      {
        name: 'basin_replication_lag_bytes',
        fromMs: T0,
        toMs: T0 + 60_000,
        bucketSeconds: 60,
        fn: 'MAX',
        filters,
      },
      false,
    );
  assert.deepEqual(
    q([]).map((s) => [s.labels.node, s.data[0]?.value]),
    [
      ['1', 200],
      ['2', 500],
    ],
  );
  assert.deepEqual(
    q([{ key: 'node', value: '2' }]).map((s) => s.data[0]?.value),
    [500],
  );
  assert.deepEqual(q([{ key: 'node', value: '9' }]), []);
});

test('the coarse tier keeps five-minute summaries: exact but for percentiles', () => {
  // Two hours of a counter rising by 1 every 10 s, then a day and more later.
  const values = Array.from({ length: 720 }, (_, i) => i);
  const store = fed(values);
  const q = (fn: Fn) =>
    store.query(
      'svc',
      {
        name: 'basin_database_xact_commit_total',
        fromMs: T0,
        toMs: T0 + 3600_000,
        bucketSeconds: 3600,
        fn,
        filters: [],
      },
      true,
    )[0]?.data[0]?.value;
  assert.equal(q('COUNT'), 360);
  assert.equal(q('MIN'), 0);
  assert.equal(q('MAX'), 359);
  assert.equal(q('LAST'), 359);
  assert.equal(q('SUM'), (359 * 360) / 2);
  assert.equal(q('INCREASE'), 359);
  assert.equal(q('RATE'), 0.1);
});

test('raw samples older than a day go; summaries stay for the week', () => {
  const store = new SeriesStore(60_000);
  const step = 60_000;
  const n = (RAW_RETENTION_S * 1000) / step + 30;
  for (let i = 0; i < n; i++) store.record('svc', T0 + i * step, [commits(i)]);
  const fromRaw = store.query(
    'svc',
    {
      name: 'basin_database_xact_commit_total',
      fromMs: T0,
      toMs: T0 + 300_000,
      bucketSeconds: 300,
      fn: 'COUNT',
      filters: [],
    },
    false,
  );
  assert.deepEqual(fromRaw[0]?.data, [{ time: '2026-06-25T10:00:00.000Z', value: null }]);
  const fromCoarse = store.query(
    'svc',
    {
      name: 'basin_database_xact_commit_total',
      fromMs: T0,
      toMs: T0 + 300_000,
      bucketSeconds: COARSE_STEP_S,
      fn: 'COUNT',
      filters: [],
    },
    true,
  );
  assert.deepEqual(fromCoarse[0]?.data, [{ time: '2026-06-25T10:00:00.000Z', value: 5 }]);
});

test("a deleted service's samples go, and bytes per series are fixed", () => {
  const store = fed([1, 2, 3]);
  const bytes = store.bytes('svc');
  store.record('svc', T0 + 100_000, [commits(9)]);
  assert.equal(store.bytes('svc'), bytes);
  assert.deepEqual(store.available('svc'), ['basin_database_xact_commit_total']);
  store.keepOnly(new Set(['other']));
  assert.equal(store.has('svc'), false);
  assert.deepEqual(store.available('svc'), []);
});

test('merge: percentiles are the count-weighted nearest rank of the parts', () => {
  const a = summarise([0, 10], [1, 3])!;
  const b = summarise([20, 30, 40], [5, 7, 9], { t: 10, v: 3 })!;
  const m = merge([a, b])!;
  assert.equal(valueOf(m, 'COUNT'), 5);
  assert.equal(valueOf(m, 'INCREASE'), 2 + 6);
  assert.equal(valueOf(m, 'RATE'), 8 / 40);
  assert.equal(valueOf(m, 'P99'), b.p99);
  assert.equal(valueOf(null, 'COUNT'), null);
});
