// Prometheus, as an operator runs it: Basin as shipped (`node dist/main.js`,
// local driver) with `--metrics-listen`; a real service gets data and a real
// pgbench; its series, read with a strict text-format parser, carry its
// labels and move: CPU while pgbench runs, the committed-transactions
// counter by at least what pgbench reports it committed. The API's port
// does not serve them.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { API_KEY } from '../helpers.js';
import { installation } from './basin-process.js';
import { conninfo, pgQuery } from './clients.js';
import { parsePrometheusText, type Family } from '../metrics/prom-text.js';

const run = promisify(execFile);
const PGBENCH = '/usr/lib/postgresql/15/bin/pgbench';

test(
  "a real service's series are on the metrics listener, labelled, and move with its work",
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    // Samples every 2 s, so the counters' last sample follows the run closely.
    const b = await inst.start({
      args: ['--metrics-listen', '127.0.0.1:0', '--series-interval-ms', '2000'],
    });
    // The log is written asynchronously: the line may come a little after the API answers.
    const started = Date.now();
    let announced: RegExpExecArray | null = null;
    while (!announced && Date.now() - started < 30_000) {
      announced = /Prometheus metrics at (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(b.output());
      if (!announced) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(announced, `the metrics address is logged: ${b.tail()}`);
    const url = announced[1] as string;
    const scrape = async (): Promise<Map<string, Family>> => {
      const res = await fetch(url);
      assert.equal(res.status, 200);
      return parsePrometheusText(await res.text());
    };

    const created = await b.call('POST', b.servicePath(), { name: 'scraped' });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    const svc = await b.waitForStatus(id, 'READY');
    const port: number = svc.endpoint.port;
    const projectId = svc.project_id as string;

    const value = (families: Map<string, Family>, name: string): number | undefined => {
      const found = (families.get(name)?.samples ?? []).filter((s) => s.labels.service === id);
      if (found.length === 0) return undefined;
      assert.equal(found.length, 1, `${name}: one series`);
      assert.deepEqual(found[0]?.labels, {
        project: projectId,
        service: id,
        node: '0',
        role: 'primary',
      });
      return found[0]?.value;
    };
    const until = async <T>(what: string, f: () => Promise<T | undefined>): Promise<T> => {
      const deadline = Date.now() + 120_000;
      for (;;) {
        const v = await f();
        if (v !== undefined) return v;
        if (Date.now() > deadline) throw new Error(`not seen in time: ${what}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    const first = await until('storage and memory sampled', async () => {
      const f = await scrape();
      const storage = value(f, 'basin_service_storage_bytes');
      const memory = value(f, 'basin_service_memory_bytes');
      return storage && memory ? { f, storage } : undefined;
    });
    assert.equal(value(first.f, 'basin_service_up'), 1);
    const statuses = (first.f.get('basin_service_status')?.samples ?? []).filter(
      (s) => s.labels.service === id && s.value === 1,
    );
    assert.deepEqual(
      statuses.map((s) => s.labels.status),
      ['READY'],
    );

    // Work: some 60 MB of rows, then a real pgbench for 15 s while we scrape.
    await pgQuery(
      port,
      password,
      "CREATE TABLE filler AS SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 100000) g",
    );
    const env = { PATH: process.env.PATH ?? '', PGPASSWORD: password };
    const conn = conninfo(port);
    await run(PGBENCH, ['-i', '-s', '1', '-q', conn], { env });
    const sampled = await until('the commit counter sampled', async () => {
      const f = await scrape();
      return value(f, 'basin_service_xact_commit_total') !== undefined ? f : undefined;
    });
    assert.equal(sampled.get('basin_service_xact_commit_total')?.type, 'counter');
    assert.equal(sampled.get('basin_service_xact_rollback_total')?.type, 'counter');
    assert.ok((value(sampled, 'basin_service_xact_rollback_total') ?? -1) >= 0);
    const committedBefore = value(sampled, 'basin_service_xact_commit_total') as number;
    // Throttled (-R): what is tested is that every commit is counted, not
    // how many the machine can make; at full speed pgbench would take both
    // cores from the test files running beside this one.
    const bench = run(PGBENCH, ['-T', '15', '-R', '100', '-c', '4', '-j', '2', '-n', conn], {
      env,
    });
    const cpu = await until('CPU used by pgbench', async () => {
      const v = value(await scrape(), 'basin_service_cpu_millicores');
      return v !== undefined && v > 0 ? v : undefined;
    });
    assert.ok(cpu > 0);
    const { stdout } = await bench;
    const processed = Number(/number of transactions actually processed: (\d+)/.exec(stdout)?.[1]);
    assert.ok(processed > 0, `pgbench committed transactions: ${stdout}`);
    // Each of pgbench's transactions is a commit of the server's; the
    // counter (the server's own, since it started) has them all once sampled.
    const committedAfter = await until(
      `${processed} more commits than ${committedBefore}`,
      async () => {
        const v = value(await scrape(), 'basin_service_xact_commit_total');
        return v !== undefined && v >= committedBefore + processed ? v : undefined;
      },
    );
    assert.ok(committedAfter - committedBefore >= processed);
    const grown = await until('storage grown by the rows', async () => {
      const v = value(await scrape(), 'basin_service_storage_bytes');
      return v !== undefined && v >= first.storage + 30 * 1024 * 1024 ? v : undefined;
    });
    assert.ok(grown > first.storage);

    // The API's own requests are counted by route pattern.
    const http = (await scrape()).get('basin_http_request_duration_seconds');
    assert.equal(http?.type, 'histogram');
    assert.ok(
      http?.samples.some(
        (s) =>
          s.name.endsWith('_count') &&
          s.labels.method === 'POST' &&
          s.labels.route === '/v1/projects/:project_id/services' &&
          s.labels.status === '202' &&
          s.value >= 1,
      ),
    );

    // Polls, which the fast lane answers before Fastify, are counted too
    // (waitForStatus polled this service's GET).
    assert.ok(
      http?.samples.some(
        (s) =>
          s.name.endsWith('_count') &&
          s.labels.method === 'GET' &&
          s.labels.route === '/v1/projects/:project_id/services/:service_id' &&
          s.labels.status === '200' &&
          s.value >= 1,
      ),
      'polls of the service are counted',
    );
    // The create's operation, ended, and how long it took.
    const ops = (await scrape()).get('basin_engine_operation_duration_seconds');
    const converged = ops?.samples.find(
      (s) =>
        s.name.endsWith('_count') &&
        s.labels.kind === 'service.converge' &&
        s.labels.outcome === 'done',
    );
    assert.ok(converged && converged.value >= 1, 'the create ended, counted by kind');

    // Not on the API's port, whatever the key.
    const onApi = await fetch(`http://127.0.0.1:${inst.apiPort}/metrics`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    assert.equal(onApi.status, 404);
    assert.ok(!(await onApi.text()).includes('basin_service_up'));
  },
);
