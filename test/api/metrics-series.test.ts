import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createProject, issueCredential } from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { startBasin, type TestBasin } from '../helpers.js';
import { assertError, readyService, serviceUrl, waitGone } from './service-helpers.js';

const CPU = 'timescale_cloud_system_cpu_usage_millicores';
const COMMITS = 'basin_database_xact_commit_total';

async function sampled(t: Parameters<typeof startBasin>[0]): Promise<{ b: TestBasin; id: string }> {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  return { b, id };
}

const series = (b: TestBasin, id: string, body: unknown) =>
  b.call('POST', `${serviceUrl(b, id)}/metrics/series`, body);

test('a round of the collector makes every series of a running service available', async (t) => {
  const { b, id } = await sampled(t);
  assert.deepEqual((await b.call('GET', `${serviceUrl(b, id)}/metrics/available-series`)).body, []);
  await b.basin.collector.collect();
  const names = await b.call('GET', `${serviceUrl(b, id)}/metrics/available-series`);
  assert.equal(names.status, 200);
  assert.deepEqual(names.body, [
    'basin_database_xact_commit_total',
    'basin_database_xact_rollback_total',
    'timescale_cloud_database_num_connections',
    'timescale_cloud_system_cpu_usage_millicores',
    'timescale_cloud_system_disk_usage_bytes',
    'timescale_cloud_system_memory_usage_bytes',
  ]);
  const now = Date.now();
  const res = await series(b, id, {
    name: CPU,
    from: new Date(now - 60_000).toISOString(),
    to: new Date(now + 60_000).toISOString(),
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.length, 1);
  assert.deepEqual(res.body[0].labels, { node: '0', role: 'primary' });
  assert.equal(res.body[0].data.length, 2);
  assert.ok(res.body[0].data.some((d: { value: number | null }) => typeof d.value === 'number'));
});

test('samples recorded are answered bucket by bucket, exactly; deleted services lose theirs', async (t) => {
  const { b, id } = await sampled(t);
  const from = Date.parse('2030-01-01T00:00:00Z');
  // The store answers whatever window: samples in the future are fine for the raw tier.
  const labels = { node: '0', role: 'primary' };
  [0, 60, 120, 30, 90].forEach((v, i) =>
    b.basin.series.record(id, from + i * 10_000, [{ name: COMMITS, labels, value: v }]),
  );
  const res = await series(b, id, {
    name: COMMITS,
    from: new Date(from).toISOString(),
    to: new Date(from + 120_000).toISOString(),
    bucket_seconds: 60,
    fn: 'INCREASE',
    filters: [{ key: 'role', value: 'primary' }],
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body, [
    {
      labels,
      data: [
        // 60 + 60 + 30 (a reset) + 60.
        { time: '2030-01-01T00:00:00.000Z', value: 210 },
        { time: '2030-01-01T00:01:00.000Z', value: null },
      ],
    },
  ]);
  assert.equal((await b.call('DELETE', serviceUrl(b, id))).status, 202);
  await waitGone(b, id);
  await b.basin.collector.collect();
  assert.equal(b.basin.series.has(id), false);
});

test('every bad request is a 400 that says what to send', async (t) => {
  const { b, id } = await sampled(t);
  await b.basin.collector.collect();
  const from = new Date(Date.now() - 3600_000).toISOString();
  const to = new Date().toISOString();
  const cases: [unknown, RegExp][] = [
    [{ name: 'nosuch', from, to }, /Unknown metric series "nosuch".*available-series/],
    [{ name: CPU, from: to, to: from }, /from must be before to/],
    [{ name: CPU, from: 'yesterday', to }, /from|date-time/],
    [{ name: CPU, from, to, bucket_seconds: 30 }, /60/],
    [{ name: CPU, from, to, fn: 'P99' }, /takes no fn.*omit fn/],
    [{ name: COMMITS, from, to, fn: 'P99' }, /does not take fn P99; it takes RATE/],
    [{ name: COMMITS, from, to, fn: 'MEDIAN' }, /fn/],
    [
      { name: COMMITS, from, to, filters: [{ key: 'job_id', value: '1' }] },
      /no label "job_id".*node, role/,
    ],
    [
      {
        name: COMMITS,
        from: new Date(Date.now() - 7 * 86400_000).toISOString(),
        to,
        bucket_seconds: 60,
      },
      /at least 300/,
    ],
    [
      {
        name: COMMITS,
        from: new Date(Date.parse(to) - 8 * 86400_000).toISOString(),
        to,
        bucket_seconds: 300,
      },
      /at most 2016 are answered: use bucket_seconds of at least 343/,
    ],
    [{ name: COMMITS, from, to, extra: 1 }, /extra|additional/],
  ];
  for (const [body, message] of cases) {
    assertError(await series(b, id, body), 400, 'INVALID_REQUEST', message);
  }
});

test("another project's credential sees neither operation (404)", async (t) => {
  const { b, id } = await sampled(t);
  await b.basin.collector.collect();
  const other = await createProject(b.basin.store, systemClock, 'other');
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: other.id }, 'o');
  const as = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
    const res = await b.basin.app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${cred.bearerKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
    return { status: res.statusCode, body: JSON.parse(res.body), headers: {} };
  };
  const body = {
    name: CPU,
    from: new Date(Date.now() - 60_000).toISOString(),
    to: new Date().toISOString(),
  };
  for (const project of [b.projectId, other.id]) {
    const base = `/v1/projects/${project}/services/${id}/metrics`;
    assertError(await as('GET', `${base}/available-series`), 404, 'NOT_FOUND');
    assertError(await as('POST', `${base}/series`, body), 404, 'NOT_FOUND');
  }
});
