// GET /metrics on its own listener (--metrics-listen): the text format
// Prometheus reads, with the API's requests, the engine's queue and each
// service's series from the driver's cached samples; nothing else is
// served there, and the API's port does not serve /metrics.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DriverError, type ServiceSpec } from '../../src/drivers/driver.js';
import { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import type { Progress } from '../../src/domain/progress.js';
import { listenMetrics } from '../../src/metrics/listener.js';
import { parseConfig } from '../../src/config.js';
import { eventually, startBasin } from '../helpers.js';
import { parsePrometheusText, type Family } from './prom-text.js';

function series(families: Map<string, Family>, name: string) {
  const f = families.get(name);
  assert.ok(f, `${name} is exposed`);
  return f.samples;
}

test('/metrics on its own listener has the requests, the queue and each service', async (t) => {
  const b = await startBasin(t);
  const listener = await listenMetrics(b.basin.metrics, '127.0.0.1', 0);
  t.after(() => listener.close());
  const url = `http://127.0.0.1:${listener.address.port}`;

  const created = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 'db' });
  assert.equal(created.status, 202);
  const serviceId = created.body.service_id as string;
  await eventually(async () => {
    const res = await b.call('GET', `/v1/projects/${b.projectId}/services/${serviceId}`);
    return res.body.status === 'READY' && res.body.metrics ? true : undefined;
  }, 'service READY with metrics');
  assert.equal((await b.call('POST', `/v1/projects/${b.projectId}/services`, {})).status, 400);

  const res = await fetch(`${url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const families = parsePrometheusText(await res.text());

  const http = families.get('basin_http_request_duration_seconds');
  assert.equal(http?.type, 'histogram');
  const route = '/v1/projects/:project_id/services';
  const count = (status: string) =>
    http?.samples.find(
      (s) =>
        s.name === 'basin_http_request_duration_seconds_count' &&
        s.labels.route === route &&
        s.labels.method === 'POST' &&
        s.labels.status === status,
    )?.value;
  assert.equal(count('202'), 1);
  assert.equal(count('400'), 1);
  assert.ok(!http?.samples.some((s) => s.labels.route?.includes(serviceId)), 'no ids in routes');

  assert.equal(families.get('basin_engine_queue_depth')?.type, 'gauge');
  assert.equal(series(families, 'basin_engine_queue_depth').length, 1);

  const labels = { project: b.projectId, service: serviceId, node: '0', role: 'primary' };
  const one = (name: string, extra: Record<string, string> = {}) => {
    const found = series(families, name).filter(
      (s) => JSON.stringify(s.labels) === JSON.stringify({ ...labels, ...extra }),
    );
    assert.equal(found.length, 1, `${name} has one series for the service`);
    return (found[0] as { value: number }).value;
  };
  assert.equal(one('basin_service_up'), 1);
  assert.equal(one('basin_service_status', { status: 'READY' }), 1);
  assert.ok(
    !series(families, 'basin_service_status').some(
      (s) => s.labels.service === serviceId && s.labels.status !== 'READY',
    ),
    'only the current status has a series',
  );
  const svc = await b.call('GET', `/v1/projects/${b.projectId}/services/${serviceId}`);
  const m = svc.body.metrics as { memory_mb: number; storage_mb: number; milli_cpu: number };
  assert.ok(one('basin_service_storage_bytes') > 0);
  assert.equal(Math.round(one('basin_service_storage_bytes') / 1024 / 1024), m.storage_mb);
  assert.ok(one('basin_service_memory_bytes') >= 0);
  assert.ok(one('basin_service_cpu_millicores') >= 0);

  // A deleted service leaves no series behind.
  assert.equal(
    (await b.call('DELETE', `/v1/projects/${b.projectId}/services/${serviceId}`)).status,
    202,
  );
  await b.basin.engine.idle();
  const after = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
  assert.ok(
    !(after.get('basin_service_up')?.samples ?? []).some((s) => s.labels.service === serviceId),
  );
});

/** The sim, where every service but the first cannot be made (a permanent failure). */
class OnlyOne extends SimDriver {
  private first: string | undefined;
  constructor() {
    super({ delayMs: 0 });
  }
  override async applyService(spec: ServiceSpec): Promise<Progress> {
    this.first ??= spec.serviceId;
    if (spec.serviceId !== this.first) throw new DriverError('the disk is on fire', false);
    return super.applyService(spec);
  }
}

test('operations: how long they took to end, by kind and outcome, and failed attempts', async (t) => {
  const b = await startBasin(t, { options: { driver: new OnlyOne() } });
  const create = async (name: string) => {
    const res = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    return res.body.service_id as string;
  };
  const good = await create('good');
  await b.basin.engine.idle();
  await create('broken');
  await b.basin.engine.idle();
  assert.equal(
    (await b.call('DELETE', `/v1/projects/${b.projectId}/services/${good}`)).status,
    202,
  );
  await b.basin.engine.idle();

  const families = parsePrometheusText((await b.basin.metrics.render()).body);
  assert.equal(families.get('basin_engine_operation_duration_seconds')?.type, 'histogram');
  const count = (kind: string, outcome: string) =>
    series(families, 'basin_engine_operation_duration_seconds').find(
      (s) =>
        s.name === 'basin_engine_operation_duration_seconds_count' &&
        s.labels.kind === kind &&
        s.labels.outcome === outcome,
    )?.value;
  assert.equal(count('service.converge', 'done'), 1);
  assert.equal(count('service.converge', 'failed'), 1);
  assert.equal(count('service.delete', 'done'), 1);
  const failures = series(families, 'basin_engine_operation_attempt_failures_total');
  assert.deepEqual(
    failures.map((s) => [s.labels.kind, s.value]),
    [['service.converge', 1]],
  );
});

test('the metrics listener serves only GET /metrics; the API port has no /metrics', async (t) => {
  const b = await startBasin(t);
  const listener = await listenMetrics(b.basin.metrics, '127.0.0.1', 0);
  t.after(() => listener.close());
  const url = `http://127.0.0.1:${listener.address.port}`;
  const other = await fetch(`${url}/v1/projects`);
  assert.equal(other.status, 404);
  assert.equal(((await other.json()) as { code: string }).code, 'NOT_FOUND');
  const post = await fetch(`${url}/metrics`, { method: 'POST' });
  assert.equal(post.status, 405);
  assert.equal(((await post.json()) as { code: string }).code, 'METHOD_NOT_ALLOWED');
  const api = await b.basin.app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(api.statusCode, 404);
  assert.ok(!api.body.includes('basin_'), 'the API port does not answer metrics');
});

test('--metrics-listen is off by default and takes host:port', () => {
  const env = { BASIN_DATA_DIR: '/tmp/x' };
  assert.equal(parseConfig([], env).metricsListen, null);
  assert.deepEqual(parseConfig(['--metrics-listen', '127.0.0.1:9187'], env).metricsListen, {
    host: '127.0.0.1',
    port: 9187,
  });
  assert.deepEqual(parseConfig(['--metrics-listen', '[::1]:0'], env).metricsListen, {
    host: '::1',
    port: 0,
  });
  assert.throws(
    () => parseConfig(['--metrics-listen', '9187'], env),
    /BASIN_METRICS_LISTEN must be off or host:port/,
  );
});

test('the text parser refuses what Prometheus would refuse', () => {
  assert.throws(() => parsePrometheusText('a{b="c} 1\n'), /bad labels/);
  assert.throws(() => parsePrometheusText('a 1'), /newline/);
  assert.throws(() => parsePrometheusText('a one\n'), /bad value/);
  const f = parsePrometheusText('# HELP a the a\n# TYPE a gauge\na{x="q\\"z"} 2.5\n');
  assert.deepEqual(f.get('a')?.samples, [{ name: 'a', labels: { x: 'q"z' }, value: 2.5 }]);
});

test("seconds since the last backup: the store's last backup, aged at each scrape", async (t) => {
  let offsetMs = 0;
  const b = await startBasin(t, { options: { clock: () => Date.now() + offsetMs } });
  const created = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 'db' });
  const serviceId = created.body.service_id as string;
  const backups = await eventually(async () => {
    const list = await b.basin.store.backups.listByService(serviceId);
    return list.length > 0 ? list : undefined;
  }, 'the first backup');
  const startedAt = Math.max(...backups.map((x) => Date.parse(x.startedAt)));
  const age = async () => {
    const f = parsePrometheusText((await b.basin.metrics.render()).body);
    const s = series(f, 'basin_service_seconds_since_last_backup').find(
      (x) => x.labels.service === serviceId,
    );
    assert.ok(s, 'the service has the series');
    return s.value;
  };
  const first = await age();
  assert.ok(first >= 0 && first < 600, `age ${first}`);
  offsetMs = 3_600_000;
  const later = await age();
  assert.ok(later >= 3600 && later - first >= 3600 && later - first < 3700, `${first} → ${later}`);
  assert.ok(Math.abs(later - (Date.now() + offsetMs - startedAt) / 1000) < 60);
});

test("connections and replication lag: the collector's last samples, per node", async (t) => {
  const b = await startBasin(t);
  const created = await b.call('POST', `/v1/projects/${b.projectId}/services`, {
    name: 'db',
    replica_count: 1,
  });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  const id = created.body.service_id as string;
  await eventually(async () => {
    const s = await b.call('GET', `/v1/projects/${b.projectId}/services/${id}`);
    return s.body.status === 'READY';
  }, 'READY');
  await b.basin.collector.collect();
  const f = parsePrometheusText((await b.basin.metrics.render()).body);
  const of = (name: string) =>
    series(f, name)
      .filter((s) => s.labels.service === id)
      .map((s) => [s.labels.node, s.labels.role, s.value]);
  const latest = (name: Parameters<typeof b.basin.series.latest>[1]) =>
    b.basin.series
      .latest(id, name)
      .map((s) => [s.labels.node, s.labels.role, s.value])
      .sort();
  const connections = of('basin_service_connections').sort();
  assert.equal(connections.length, 2, JSON.stringify(connections));
  assert.deepEqual(connections, latest('timescale_cloud_database_num_connections'));
  const lag = of('basin_service_replication_lag_bytes');
  assert.equal(lag.length, 1);
  assert.equal(lag[0]?.[1], 'replica');
  assert.deepEqual(lag, latest('basin_replication_lag_bytes'));
  assert.ok((lag[0]?.[2] as number) > 0);
});

test("the pooler's clients and servers, and the transaction counters: the series' last samples", async (t) => {
  const b = await startBasin(t);
  const created = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 'db' });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  const id = created.body.service_id as string;
  const labels = { node: '0', role: 'primary' };
  const at = Date.now() + 3_600_000; // after anything the collector records meanwhile
  b.basin.series.record(id, at, [
    { name: 'basin_pooler_client_connections', labels, value: 7 },
    { name: 'basin_pooler_server_connections', labels, value: 3 },
    { name: 'basin_database_xact_commit_total', labels, value: 1234 },
    { name: 'basin_database_xact_rollback_total', labels, value: 5 },
  ]);
  const f = parsePrometheusText((await b.basin.metrics.render()).body);
  const of = (name: string) =>
    series(f, name)
      .filter((s) => s.labels.service === id)
      .map((s) => [s.labels.project, s.labels.node, s.labels.role, s.value]);
  const want = (v: number) => [[b.projectId, '0', 'primary', v]];
  assert.deepEqual(of('basin_service_pooler_client_connections'), want(7));
  assert.deepEqual(of('basin_service_pooler_server_connections'), want(3));
  assert.equal(f.get('basin_service_xact_commit_total')?.type, 'counter');
  assert.deepEqual(of('basin_service_xact_commit_total'), want(1234));
  assert.deepEqual(of('basin_service_xact_rollback_total'), want(5));
});
