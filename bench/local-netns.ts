// Benchmark: what a service's network namespace costs a direct connection.
// Target: `pgbench -S` through the service's endpoint as shipped (the host's
// 127.0.0.1, translated by nftables to the namespace's address and back,
// over its veth) reaches at least 0.95x the transactions per second of the
// same server reached from inside its own namespace on its loopback, which
// is the path every connection took before namespaces (loopback to
// loopback): a cost of at most 5 %.
//
// Basin runs as `node dist/main.js --driver local` with its defaults
// (namespaces on); one `shared` POSTGRES service (no CPU quota) gets
// pgbench's tables (scale 1). Then, in rounds whose order alternates (A B,
// B A, …), `pgbench -S -M simple -c 8 -j 2` with TLS (sslmode=require)
// runs for BENCH_NETNS_DURATION_S seconds:
//   endpoint  host=127.0.0.1 port=<endpoint>, from the host, as a client
//             on this host connects;
//   inside    the same, run in the service's namespace (nsenter --net), so
//             127.0.0.1 is the namespace's own loopback: no translation,
//             no veth.
// TPS excludes connection time (pgbench's "without initial connection
// time"), so TLS handshakes count on neither side.

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Layout } from '../src/drivers/local/layout.js';
import { namespaceName, namespacePath } from '../src/drivers/local/network/addresses.js';
import { claimDataDir, LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './run.js';

const TARGET = 0.95;
const CLIENTS = 8;
const run = promisify(execFile);

export async function localNetns(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_NETNS_ROUNDS', 4);
  const seconds = envInt('BENCH_NETNS_DURATION_S', 8);
  heading("pgbench -S through a service's endpoint vs inside its network namespace (local driver)");
  const dataDir = claimDataDir(ctx, 'local-netns-');
  let basin: LocalBasin | undefined;
  try {
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'local-netns.log'),
      ctx.settings.basinNodeArgs,
    );
    const { id, password } = await basin.createService({
      name: 'bench-netns',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    const svc = await basin.waitReady(id, 20, 180_000);
    const port = svc.endpoint?.port;
    if (!port) throw new Error('no endpoint');
    const tag = readFileSync(new Layout(dataDir).installationFile, 'utf8').trim();
    const netns = namespacePath(namespaceName(tag, id));
    const env = { ...pgEnv(), PGPASSWORD: password, PGSSLMODE: 'require' };
    const conn = `host=127.0.0.1 port=${port} user=tsdbadmin dbname=tsdb connect_timeout=20`;
    await run('pgbench', ['-i', '-q', '-s', '1', conn], { env });
    console.log(
      `${rounds} rounds of ${seconds} s each, in alternating order, pgbench -S -c ${CLIENTS} -j 2, TLS`,
    );

    const sides = {
      endpoint: (): Promise<number> => pgbench([], conn, seconds, env),
      inside: (): Promise<number> =>
        pgbench(['nsenter', `--net=${netns}`, '--'], conn, seconds, env),
    };
    const tps: Record<keyof typeof sides, number[]> = { endpoint: [], inside: [] };
    const rows: string[][] = [];
    const loads: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      const order: (keyof typeof sides)[] =
        r % 2 === 1 ? ['inside', 'endpoint'] : ['endpoint', 'inside'];
      for (const side of order) {
        const t = await sides[side]();
        tps[side].push(t);
        loads.push(loadavg()[0] ?? 0);
        rows.push([String(r), side, fixed(t), fixed(loadavg()[0] ?? 0, 1)]);
      }
    }
    table(['round', 'client', 'tps', 'load 1m'], rows);
    const endpoint = median(tps.endpoint);
    const inside = median(tps.inside);
    const ratio = endpoint / inside;
    const headline =
      `namespace: ${fixed(endpoint)} tps through the endpoint (DNAT, veth) vs ${fixed(inside)} ` +
      `on its own loopback: ratio ${fixed(ratio, 3)}, a cost of ${fixed((1 - ratio) * 100, 1)} % ` +
      `(target <= ${fixed((1 - TARGET) * 100)} %); load ${fixed(median(loads), 1)}`;
    console.log(headline);
    if (ratio < TARGET) {
      warn(`the endpoint serves ${fixed(ratio, 3)}x the namespace's own loopback (< ${TARGET}).`);
    }
    await basin.deleteAndWait(id);
    return { headline, metTarget: ratio >= TARGET };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/** Runs pgbench select-only (after `prefix`, e.g. nsenter) and returns its tps. */
async function pgbench(
  prefix: string[],
  conn: string,
  seconds: number,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const args = [
    '-n',
    '-S',
    '-M',
    'simple',
    '-c',
    String(CLIENTS),
    '-j',
    '2',
    '-T',
    String(seconds),
    conn,
  ];
  const [file, ...rest] = [...prefix, 'pgbench', ...args] as [string, ...string[]];
  const { stdout, stderr } = await run(file, rest, { env, maxBuffer: 16 * 1024 * 1024 });
  const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1]);
  if (!Number.isFinite(tps)) throw new Error(`no tps in pgbench's output: ${stdout}${stderr}`);
  const failed = Number(/number of failed transactions: (\d+)/.exec(stdout)?.[1] ?? 0);
  if (failed > 0 || /aborted/.test(stderr))
    throw new Error(`pgbench had errors: ${stdout}${stderr}`);
  return tps;
}

/** The environment without PG* settings of the person running the bench. */
function pgEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')));
}

function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  const n = v === undefined || v === '' ? fallback : Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number >= 1`);
  return n;
}
