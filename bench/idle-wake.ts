// Benchmark: waking a suspended service (docs/decisions.md, Idle services).
// Target: connect → first query answered in under 1 s at p99 for a
// suspended service, reported against the same for a running one, in the
// same run.
//
// Basin runs as `node dist/main.js --driver local --idle-suspend-after 3s`
// (root, service networks on, as shipped otherwise); one `shared` POSTGRES
// service with a table. Then BENCH_IDLE_WAKES times: wait until it is
// suspended (its postmaster gone, its answer says so), then one client
// connects (node-postgres, TLS verify-full against the installation's CA,
// as `localhost`) and runs `SELECT count(*)` on the table: the time from
// the connect to the answer is a wake. Right after each wake, while it
// runs, BENCH_IDLE_RUNNING clients do the same, one after the other: the
// running baseline, with the same client, TLS and query.

import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Layout } from '../src/drivers/local/layout.js';
import { claimDataDir, LocalBasin, postmasterPid, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, percentile, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';

const TARGET_P99_MS = 1_000;
const IDLE = '3s';

export async function idleWake(ctx: BenchContext): Promise<BenchOutcome> {
  const wakes = envInt('BENCH_IDLE_WAKES', 10);
  const perWake = envInt('BENCH_IDLE_RUNNING', 3);
  heading(`connect → first query: a suspended service (wake) vs a running one (local driver)`);
  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'idle-wake.log'),
      ctx.settings.basinNodeArgs,
      ['--idle-suspend-after', IDLE],
    );
    const { id, password } = await basin.createService({
      name: 'bench-idle-wake',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    const svc = await basin.waitReady(id, 20, 180_000);
    const port = svc.endpoint?.port;
    if (!port) throw new Error('no endpoint');
    const ca = readFileSync(new Layout(basin.dataDir).caCert, 'utf8');
    const firstQuery = async (): Promise<number> => {
      const began = performance.now();
      const client = new pg.Client({
        host: '127.0.0.1',
        port,
        user: 'tsdbadmin',
        database: 'tsdb',
        password,
        ssl: { ca, servername: 'localhost', rejectUnauthorized: true },
        connectionTimeoutMillis: 30_000,
      });
      client.on('error', () => {});
      try {
        await client.connect();
        const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM kept');
        if (rows[0]?.n !== '1000') throw new Error(`read back ${JSON.stringify(rows)}`);
        return performance.now() - began;
      } finally {
        await client.end().catch(() => {});
      }
    };
    {
      const setup = new pg.Client({
        host: '127.0.0.1',
        port,
        user: 'tsdbadmin',
        database: 'tsdb',
        password,
        ssl: { ca, servername: 'localhost' },
      });
      await setup.connect();
      await setup.query('CREATE TABLE kept AS SELECT generate_series(1, 1000) AS n');
      await setup.end();
    }

    const woken: number[] = [];
    const running: number[] = [];
    const loads: number[] = [];
    const rows: string[][] = [];
    for (let i = 1; i <= wakes; i++) {
      const asleep = await waitSuspended(basin, id);
      loads.push(loadavg()[0] as number);
      const wake = await firstQuery();
      woken.push(wake);
      const after: number[] = [];
      for (let j = 0; j < perWake; j++) after.push(await firstQuery());
      running.push(...after);
      rows.push([
        String(i),
        fixed(asleep / 1000, 1),
        fixed(wake),
        after.map((ms) => fixed(ms, 1)).join(' '),
        fixed(loads.at(-1) as number, 2),
      ]);
    }
    table(['wake', 'asleep s', 'wake → answer ms', 'running → answer ms', 'load 1m'], rows);
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const w = sorted(woken);
    const r = sorted(running);
    const p99 = percentile(w, 99);
    console.log(
      `\nwake: p50 ${fixed(percentile(w, 50))} ms, p99 ${fixed(p99)} ms (${w.length} wakes); ` +
        `running: p50 ${fixed(percentile(r, 50), 1)} ms, p99 ${fixed(percentile(r, 99), 1)} ms ` +
        `(${r.length} connects); load average (1 min) at the wakes: median ${fixed(median(loads), 2)}`,
    );
    const met = p99 < TARGET_P99_MS;
    const headline =
      `connect → first query: suspended p50 ${fixed(percentile(w, 50))} ms / p99 ${fixed(p99)} ms, ` +
      `running p50 ${fixed(percentile(r, 50), 1)} ms / p99 ${fixed(percentile(r, 99), 1)} ms ` +
      `(target p99 < ${TARGET_P99_MS} ms; load ${fixed(median(loads), 2)})`;
    console.log(headline);
    if (!met) warn(`waking a suspended service took ${fixed(p99)} ms at p99.`);
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/** Waits until the service is suspended (no postmaster, its answer says so); returns how long it waited (ms). */
async function waitSuspended(basin: LocalBasin, id: string): Promise<number> {
  const began = Date.now();
  const deadline = began + 120_000;
  for (;;) {
    if (!postmasterPid(basin.pgdata(id))) {
      const svc = (await basin.get(id)) as { idle?: { state?: string } } | undefined;
      if (svc?.idle?.state === 'suspended') return Date.now() - began;
    }
    if (Date.now() > deadline) throw new Error(`service ${id} did not suspend within 120 s`);
    await sleep(50);
  }
}
