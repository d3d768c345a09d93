// The metrics series API on real PostgreSQL, as a user reads it: Basin as
// shipped (`node dist/main.js`, local driver) sampling every 2 s; a service
// runs pgbench for half a minute (fifteen samples); then its transactions
// (RATE), connections, CPU and memory over that run are real, non-null and
// plausible.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { installation } from './basin-process.js';
import { conninfo } from './clients.js';

const run = promisify(execFile);
const PGBENCH = '/usr/lib/postgresql/15/bin/pgbench';

test(
  'after half a minute of pgbench, the series of a real service hold its work',
  { timeout: 400_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start({ args: ['--series-interval-ms', '2000'] });
    const created = await b.call('POST', b.servicePath(), { name: 'benched' });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const svc = await b.waitForStatus(id, 'READY');
    const env = { PATH: process.env.PATH ?? '', PGPASSWORD: created.body.initial_password };
    const conn = conninfo(svc.endpoint.port as number);
    await run(PGBENCH, ['-i', '-s', '1', '-q', conn], { env });

    const start = Date.now();
    // Throttled (-R): what is tested is that every commit is counted, not
    // how many the machine can make; at full speed pgbench would take both
    // cores from the test files running beside this one.
    await run(PGBENCH, ['-T', '30', '-R', '50', '-c', '4', '-j', '2', '-n', conn], { env });
    const end = Date.now();
    // One more sampling after the run, so the last bucket has its end.
    await new Promise((r) => setTimeout(r, 5000));

    const names = await b.call('GET', `${b.servicePath(id)}/metrics/available-series`);
    assert.equal(names.status, 200, names.text);
    for (const name of [
      'basin_database_xact_commit_total',
      'basin_database_xact_rollback_total',
      'timescale_cloud_database_num_connections',
      'timescale_cloud_system_cpu_usage_millicores',
      'timescale_cloud_system_disk_usage_bytes',
      'timescale_cloud_system_memory_usage_bytes',
    ])
      assert.ok(names.body.includes(name), `${name} in ${names.text}`);

    const read = async (body: Record<string, unknown>): Promise<number[]> => {
      const res = await b.call('POST', `${b.servicePath(id)}/metrics/series`, {
        filters: [{ key: 'role', value: 'primary' }],
        ...body,
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.length, 1, res.text);
      assert.deepEqual(res.body[0].labels, { node: '0', role: 'primary' });
      const values = res.body[0].data.map((d: { value: number | null }) => d.value);
      assert.ok(
        values.every((v: number | null) => v !== null),
        `no empty bucket: ${res.text}`,
      );
      return values;
    };
    const iso = (ms: number) => new Date(ms).toISOString();
    // The run, in one bucket (of at least a minute).
    const whole = {
      from: iso(start),
      to: iso(end),
      bucket_seconds: Math.max(60, Math.ceil((end - start) / 1000)),
    };
    const [tps] = await read({ name: 'basin_database_xact_commit_total', fn: 'RATE', ...whole });
    assert.ok(tps !== undefined && tps > 5, `pgbench commits, per second: ${tps}`);
    const [committed] = await read({
      name: 'basin_database_xact_commit_total',
      fn: 'INCREASE',
      ...whole,
    });
    assert.ok(committed !== undefined && committed > 300, `commits in the run: ${committed}`);

    // The run but its first seconds (pgbench's 4 clients all connected), LAST of each.
    const during = { from: iso(start + 5000), to: iso(end - 2000) };
    const [connections] = await read({
      name: 'timescale_cloud_database_num_connections',
      ...during,
    });
    assert.ok(connections !== undefined && connections >= 4, `connections: ${connections}`);
    const [cpu] = await read({ name: 'timescale_cloud_system_cpu_usage_millicores', ...during });
    assert.ok(cpu !== undefined && cpu > 0 && cpu < 64_000, `CPU, millicores: ${cpu}`);
    const [memory] = await read({ name: 'timescale_cloud_system_memory_usage_bytes', ...during });
    assert.ok(
      memory !== undefined && memory > 1024 * 1024 && memory < 24 * 1024 ** 3,
      `memory, bytes: ${memory}`,
    );
  },
);
