// Benchmark: the connection pooler (PgBouncer, transaction mode) under 4x as
// many clients as the service's max_connections, against max_connections
// clients connected directly. Target: no connection error through the
// pooler, and at least 0.9x the direct transactions per second.
//
// Basin runs as `node dist/main.js --driver local`; one `shared` POSTGRES
// service (max_connections 50) gets its pooler enabled and pgbench's tables
// (scale 1). Then, in rounds (every direct one first), `pgbench -S` (select-only: one
// short transaction each, simple protocol, which transaction pooling
// supports) runs for BENCH_POOLER_DURATION_S seconds:
//   direct   max_connections - superuser_reserved_connections clients on the
//            service's port, less what else is connected and one for
//            Basin (every slot a tsdbadmin can have: the server refuses
//            more), sslmode=require;
//   pooled   4 x max_connections clients on the pooler's tsdb_transaction,
//            sslmode=require;
//   pooled=  as many clients as direct, through the pooler: its latency
//            against direct's is the pooler's added latency per transaction
//            (at 4x the clients, latency also holds the queueing).
// TPS excludes connection time (pgbench's "without initial connection
// time"), so TLS handshakes do not count on either side.

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { claimDataDir, LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt, pgEnv } from './env.js';

const TARGET = 0.9;
const run = promisify(execFile);

interface Result {
  tps: number;
  latencyMs: number;
  failed: number;
  aborted: number;
}

export async function localPooler(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_POOLER_ROUNDS', 3);
  const seconds = envInt('BENCH_POOLER_DURATION_S', 6);
  heading('pgbench -S through the pooler (4x max_connections clients) vs direct (local driver)');
  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'local-pooler.log'),
      ctx.settings.basinNodeArgs,
    );
    const { id, password } = await basin.createService({
      name: 'bench-pooler',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    await basin.waitReady(id, 20, 180_000);
    await basin.act(id, 'enablePooler');
    const svc = await basin.waitReady(id, 20, 60_000);
    const port = svc.endpoint?.port;
    const poolerPort = svc.connection_pooler?.endpoint?.port;
    if (!port || !poolerPort) throw new Error('no endpoint or no pooler endpoint');
    const env = { ...pgEnv(), PGPASSWORD: password, PGSSLMODE: 'require' };
    const direct = conn(port, 'tsdb');
    const pooled = conn(poolerPort, 'tsdb_transaction');
    const show = async (name: string) =>
      Number((await run('psql', [direct, '-XAtc', `SHOW ${name}`], { env })).stdout.trim());
    const maxConnections = await show('max_connections');
    const reserved = await show('superuser_reserved_connections');
    const { stdout: othersOut } = await run(
      'psql',
      [
        direct,
        '-XAtc',
        `SELECT count(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client backend'`,
      ],
      { env },
    );
    const others = Number(othersOut.trim());
    // One slot more is left to Basin's own connections (as the superuser,
    // they take a normal slot while one is free).
    const directClients = maxConnections - reserved - others - 1;
    const pooledClients = maxConnections * 4;
    await run('pgbench', ['-i', '-q', '-s', '1', direct], { env });
    console.log(
      `max_connections ${maxConnections} (${reserved} reserved for superusers, ${others} taken): ` +
        `${directClients} clients direct, ${pooledClients} through the pooler; ` +
        `${rounds} rounds of ${seconds} s each, pgbench -S -j 2`,
    );

    const bench = (c: string, clients: number) =>
      pgbench(c, clients, seconds, env).catch((err: Error) => {
        throw new Error(`pgbench with ${clients} clients failed: ${err.message}`);
      });
    const series: Record<'direct' | 'pooled' | 'pooledSame', Result[]> = {
      direct: [],
      pooled: [],
      pooledSame: [],
    };
    const rows: string[][] = [];
    // Every direct round first: the pooler keeps its server connections
    // open for a while after its clients leave, and they would take slots
    // the direct clients need.
    const runs: [keyof typeof series, string, string, number][] = [
      ['direct', 'direct', direct, directClients],
      ['pooled', 'pooled', pooled, pooledClients],
      ['pooledSame', 'pooled=', pooled, directClients],
    ];
    for (const [key, label, c, clients] of runs) {
      for (let r = 1; r <= rounds; r++) {
        const res = await bench(c, clients);
        series[key].push(res);
        rows.push([
          String(r),
          label,
          String(clients),
          fixed(res.tps),
          fixed(res.latencyMs, 3),
          String(res.failed + res.aborted),
        ]);
      }
    }
    table(['round', 'run', 'clients', 'tps', 'latency ms', 'errors'], rows);

    const med = (xs: Result[], f: (r: Result) => number) => median(xs.map(f));
    const directTps = med(series.direct, (r) => r.tps);
    const pooledTps = med(series.pooled, (r) => r.tps);
    const ratio = pooledTps / directTps;
    const added =
      med(series.pooledSame, (r) => r.latencyMs) - med(series.direct, (r) => r.latencyMs);
    const errors = Object.values(series)
      .flat()
      .reduce((n, r) => n + r.failed + r.aborted, 0);
    const met = ratio >= TARGET && errors === 0;
    const headline =
      `pooler (transaction mode): ${pooledClients} clients at ${fixed(pooledTps)} tps vs ` +
      `${directClients} direct at ${fixed(directTps)} tps: ratio ${fixed(ratio, 2)} ` +
      `(target >= ${TARGET}), added latency ${fixed(added, 3)} ms per transaction, ` +
      `${errors} errors`;
    console.log(headline);
    if (ratio < TARGET) warn(`the pooler serves ${fixed(ratio, 2)}x the direct tps (< ${TARGET}).`);
    if (errors > 0) warn(`${errors} transactions failed or clients aborted.`);
    await basin.deleteAndWait(id);
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

function conn(port: number, dbname: string): string {
  return `host=127.0.0.1 port=${port} user=tsdbadmin dbname=${dbname} connect_timeout=20`;
}

/** Runs pgbench select-only and reads its summary. */
async function pgbench(
  c: string,
  clients: number,
  seconds: number,
  env: NodeJS.ProcessEnv,
): Promise<Result> {
  const { stdout, stderr } = await run(
    'pgbench',
    ['-n', '-S', '-M', 'simple', '-c', String(clients), '-j', '2', '-T', String(seconds), c],
    { env, maxBuffer: 16 * 1024 * 1024 },
  );
  const num = (re: RegExp) => Number(re.exec(stdout)?.[1] ?? NaN);
  const tps = num(/tps = ([\d.]+) \(without initial connection time\)/);
  if (!Number.isFinite(tps)) throw new Error(`no tps in pgbench's output: ${stdout}${stderr}`);
  return {
    tps,
    latencyMs: num(/latency average = ([\d.]+) ms/),
    failed: num(/number of failed transactions: (\d+)/) || 0,
    aborted: (stderr.match(/aborted/g) ?? []).length,
  };
}
