// Issue 20, item 3, for usage: three Basin processes (dist/main.js, local
// driver) on one PostgreSQL store; only the leader runs the driver, whose
// samples live in its memory. Every process answers a service's usage (the
// `metrics` of its GET), its metric series (`metrics/series`,
// `metrics/available-series`) and its Prometheus gauges as the leader does,
// from the rounds the leader publishes through the store
// (engine/shared-usage.ts); and a follower started afterwards has the
// rounds published before it started.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { answering, type BasinProcess } from '../harness/basin-api.js';
import { freePort } from '../harness/postmaster.js';
import { API_KEY } from '../helpers.js';
import { parsePrometheusText } from '../metrics/prom-text.js';
import { startStorePostgres } from '../store-postgres.js';
import { installation } from './basin-process.js';

const GAUGES = [
  'basin_service_up',
  'basin_service_cpu_millicores',
  'basin_service_memory_bytes',
  'basin_service_storage_bytes',
  'basin_service_connections',
];

test(
  "three Basins: every process answers a service's usage, series and Prometheus gauges as the leader does",
  { timeout: 300_000 },
  async (t) => {
    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    const inst = await installation(t, {
      args: [
        ...['--store-url', url, '--repository-servers', 'off'],
        ...['--series-interval-ms', '1000', '--metrics-listen', '127.0.0.1:0'],
      ],
    });
    const procs: BasinProcess[] = [];
    const start = async (port: number) => {
      const b = await answering(
        inst.launch({ args: ['--port', String(port)] }),
        `http://127.0.0.1:${port}/v1`,
        API_KEY,
      );
      procs.push(b);
      return b;
    };
    const first = await start(inst.apiPort);
    await start(await freePort());
    const p = (id?: string) => first.servicePath(id);

    const created = await first.call('POST', p(), { name: 'sampled' });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    await first.waitForStatus(id, 'READY');
    const from = new Date().toISOString();
    // The driver's usage and a few rounds of series, then a third process,
    // started after them.
    await sleep(4000);
    await start(await freePort());
    const holder = (await pgc.sql('SELECT holder FROM leadership', [], 'basin')).rows[0];
    const leaderPid = Number((holder as { holder: string }).holder.split('/')[1]);
    assert.ok(
      procs.some((b) => b.pid === leaderPid),
      'one of the three leads',
    );
    assert.equal(procs.filter((b) => /leading as term/.test(b.output())).length, 1);

    /**
     * What `read` gives through every process, once all three agree (a round
     * may be published between two of the reads): that one answer.
     */
    const agreed = async <T>(what: string, read: (b: BasinProcess) => Promise<T>): Promise<T> => {
      let answers: T[] = [];
      for (let i = 0; i < 50; i++) {
        answers = await Promise.all(procs.map(read));
        if (answers.every((a) => JSON.stringify(a) === JSON.stringify(answers[0]))) {
          return answers[0] as T;
        }
        await sleep(100);
      }
      assert.fail(`${what}: the processes answer differently: ${JSON.stringify(answers)}`);
    };

    // The GET of the service: the driver's usage, sampled by the leader.
    const usage = await agreed('GET service', async (b) => {
      const res = await b.call('GET', p(id));
      assert.equal(res.status, 200, res.text);
      return { metrics: res.body.metrics, storage: res.body.storage };
    });
    assert.ok(usage.metrics, 'the service has usage');
    assert.ok(usage.metrics.memory_mb > 0, JSON.stringify(usage));
    assert.ok(usage.metrics.storage_mb > 0, JSON.stringify(usage));

    // The series: the same names, and the same samples over a window that
    // every process has whole (it ended before these reads).
    const names = await agreed('available series', async (b) => {
      const res = await b.call('GET', `${p(id)}/metrics/available-series`);
      assert.equal(res.status, 200, res.text);
      return res.body as string[];
    });
    assert.ok(names.includes('timescale_cloud_system_memory_usage_bytes'), names.join(', '));
    // The window ends after a round that carried the process sampler's
    // memory (it samples every 5 s, later than the first rounds on a busy
    // machine), as one process reads it; all must then agree on it.
    let to = '';
    for (let i = 0; ; i++) {
      to = new Date(Date.now() - 1000).toISOString();
      const res = await (procs[0] as BasinProcess).call('POST', `${p(id)}/metrics/series`, {
        name: 'timescale_cloud_system_memory_usage_bytes',
        from,
        to,
        bucket_seconds: 60,
        filters: [{ key: 'role', value: 'primary' }],
      });
      const data = (res.body as { data: { value: number | null }[] }[])[0]?.data ?? [];
      if (data.some((d) => (d.value ?? 0) > 0)) break;
      assert.ok(i < 60, `no memory sample in the series: ${res.text}`);
      await sleep(1000);
    }
    const series = (name: string, fn?: string) =>
      agreed(`series ${name} ${fn ?? ''}`, async (b) => {
        const res = await b.call('POST', `${p(id)}/metrics/series`, {
          name,
          from,
          to,
          bucket_seconds: 60,
          ...(fn ? { fn } : {}),
          filters: [{ key: 'role', value: 'primary' }],
        });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.body.length, 1, res.text);
        return (res.body as { data: { value: number | null }[] }[])[0]!.data.map((d) => d.value);
      });
    const memory = await series('timescale_cloud_system_memory_usage_bytes');
    assert.ok(
      memory.some((v) => (v ?? 0) > 0),
      `memory: ${JSON.stringify(memory)}`,
    );
    const counted = await series('basin_database_xact_commit_total', 'COUNT');
    const samples = counted.reduce<number>((n, v) => n + (v ?? 0), 0);
    // Sampled every second for 4 s before the third process started.
    assert.ok(samples >= 3, `${samples} samples: ${JSON.stringify(counted)}`);
    const commits = await series('basin_database_xact_commit_total', 'MAX');
    assert.ok(
      commits.some((v) => (v ?? 0) > 0),
      `commits: ${JSON.stringify(commits)}`,
    );

    // Prometheus, on each process's own listener: the service's gauges.
    // Each logs where (its log is written asynchronously: the line may come late).
    const listeners = await Promise.all(
      procs.map((b) =>
        b.waitFor(
          async () =>
            /Prometheus metrics at (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(b.output())?.[1],
          `process ${b.pid} logs its metrics address`,
          30_000,
        ),
      ),
    );
    const gauges = await agreed('Prometheus', async (b) => {
      const res = await fetch(listeners[procs.indexOf(b)] as string);
      assert.equal(res.status, 200);
      const families = parsePrometheusText(await res.text());
      return GAUGES.map((name) =>
        (families.get(name)?.samples ?? [])
          .filter((s) => s.labels.service === id)
          .map((s) => [s.labels.node, s.labels.role, s.value]),
      );
    });
    for (const [i, name] of GAUGES.entries()) {
      assert.ok((gauges[i] ?? []).length > 0, `${name} of the service: ${JSON.stringify(gauges)}`);
    }

    for (const b of procs) assert.equal((await b.stop()).code, 0);
  },
);
