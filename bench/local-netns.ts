// Benchmark: what a service's network namespace costs a direct connection.
// Target: `pgbench -S` through the service's endpoint as shipped (the host's
// 127.0.0.1, given the namespace's address at connect by the driver's eBPF
// program where the host has it, else translated by nftables to it and
// back; over its veth) costs at most 5 % more CPU per transaction than the same
// server reached from inside its own namespace on its loopback, which is
// the path every connection took before namespaces (loopback to loopback,
// and no connection tracking: nothing translates in the namespace).
//
// Basin runs as `node dist/main.js --driver local` with its defaults
// (namespaces on); one `shared` POSTGRES service (no CPU quota) gets
// pgbench's tables (scale 1). Then, in rounds whose order rotates,
// `pgbench -S -M simple -c 8 -j 2` with TLS (sslmode=require) runs for
// BENCH_NETNS_DURATION_S seconds (5) each, BENCH_NETNS_ROUNDS times (10):
//   endpoint  host=127.0.0.1 port=<endpoint>, from the host, as a client
//             on this host connects;
//   address   host=<the namespace's address>, from the host: the veth and
//             connection tracking, no translation (where the cost is);
//   inside    the same as endpoint, run in the service's namespace
//             (nsenter --net), so 127.0.0.1 is the namespace's own
//             loopback: no translation, no veth.
// Each run reports its transactions per second (excluding connection time,
// so TLS handshakes count on neither side) and the CPU it took per
// transaction: the server's (its postmaster's own and its reaped
// backends', from /proc), pgbench's (user and system) and the machine's
// softirq time (where the kernel moves packets: the veth, conntrack and
// NAT work is there or in the processes' system time). On this shared
// 2-core machine other work moves transactions per second by tens of
// percent from one run to the next, and far less the CPU a transaction
// takes, so the target is judged on CPU (as service-get's CPU columns).

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { InstallationPaths } from '../test/harness/installation-paths.js';
import { claimDataDir, LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt, pgEnv } from './env.js';

/** At most this much more CPU a transaction through the endpoint. */
const TARGET = 0.05;
const CLIENTS = 8;
const run = promisify(execFile);

export async function localNetns(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_NETNS_ROUNDS', 10);
  const seconds = envInt('BENCH_NETNS_DURATION_S', 5);
  heading("pgbench -S through a service's endpoint vs inside its network namespace (local driver)");
  const dataDir = await claimDataDir(ctx);
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
    const paths = new InstallationPaths(dataDir);
    const namespace = paths.namespace(id);
    const netns = namespace.path;
    const env = { ...pgEnv(), PGPASSWORD: password, PGSSLMODE: 'require' };
    const conn = `host=127.0.0.1 port=${port} user=tsdbadmin dbname=tsdb connect_timeout=20`;
    await run('pgbench', ['-i', '-q', '-s', '1', conn], { env });
    console.log(
      `${rounds} rounds of ${seconds} s each, in alternating order, pgbench -S -c ${CLIENTS} -j 2, TLS`,
    );

    const pgdata = paths.pgdata(id);
    const postmaster = Number(readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const shown = JSON.parse(
      (await run('ip', ['-n', namespace.name, '-j', '-4', 'addr', 'show', 'dev', 'eth0'])).stdout,
    ) as { addr_info: { local: string }[] }[];
    const address = shown[0]?.addr_info[0]?.local;
    if (!address) throw new Error("no address in the service's namespace");
    const sides = {
      endpoint: () => measure([], conn, seconds, env, postmaster),
      address: () =>
        measure([], conn.replace('host=127.0.0.1', `host=${address}`), seconds, env, postmaster),
      inside: () => measure(['nsenter', `--net=${netns}`, '--'], conn, seconds, env, postmaster),
    };
    type Side = keyof typeof sides;
    const names = Object.keys(sides) as Side[];
    const samples: Record<Side, Sample[]> = { endpoint: [], address: [], inside: [] };
    const rows: string[][] = [];
    const loads: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      // Each round in another order: none is always first or last.
      const order = names.map((_, i) => names[(i + r) % names.length] as Side);
      for (const side of order) {
        const m = await sides[side]();
        samples[side].push(m);
        const load = loadavg()[0] ?? 0;
        loads.push(load);
        rows.push([String(r), side, fixed(m.tps), fixed(m.cpuUsPerTx, 1), fixed(load, 1)]);
      }
    }
    table(['round', 'client', 'tps', 'µs cpu/tx', 'load 1m'], rows);
    // A round's runs are next to each other in time: the ratio within each
    // round, then their median, is what the machine's drifting load moves
    // least.
    const perRound = (side: Side, f: (m: Sample) => number) =>
      median(samples[side].map((m, i) => f(m) / f(samples.inside[i] as Sample)));
    const med = (side: Side, f: (m: Sample) => number) => median(samples[side].map(f));
    const cost = perRound('endpoint', (m) => m.cpuUsPerTx) - 1;
    const veth = perRound('address', (m) => m.cpuUsPerTx) - 1;
    const cpu = (side: Side) =>
      fixed(
        med(side, (m) => m.cpuUsPerTx),
        1,
      );
    const tps = (side: Side) => fixed(med(side, (m) => m.tps));
    const headline =
      `namespace: ${cpu('endpoint')} µs of CPU a transaction through the endpoint (as shipped) vs ` +
      `${cpu('inside')} on the namespace's own loopback: a cost of ${fixed(cost * 100, 1)} % ` +
      `(target <= ${fixed(TARGET * 100)} %; the namespace's address, veth without translation: ` +
      `${fixed(veth * 100, 1)} %); ${tps('endpoint')} vs ${tps('inside')} tps (ratio ` +
      `${fixed(
        perRound('endpoint', (m) => m.tps),
        2,
      )}); load ${fixed(median(loads), 1)}`;
    console.log(headline);
    if (cost > TARGET) {
      warn(
        `the endpoint costs ${fixed(cost * 100, 1)} % more CPU a transaction (> ${TARGET * 100} %).`,
      );
    }
    await basin.deleteAndWait(id);
    return { headline, metTarget: cost <= TARGET };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

interface Sample {
  tps: number;
  cpuUsPerTx: number;
}

/** The kernel's clock ticks a second (/proc times are in them). */
const HZ = 100;

/** CPU seconds of `pid` and of its reaped children (a postmaster's backends), from /proc. */
function processCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [11, 12, 13, 14].reduce((sum, i) => sum + Number(f[i]), 0) / HZ;
}

/** The machine's softirq CPU seconds so far (/proc/stat). */
function softirq(): number {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/) ?? [];
  return Number(cpu[7]) / HZ;
}

/**
 * Runs pgbench select-only (after `prefix`, e.g. nsenter) and returns its
 * tps and the CPU a transaction took: the server's, pgbench's own (bash's
 * `times`), the machine's softirq.
 */
async function measure(
  prefix: string[],
  conn: string,
  seconds: number,
  env: NodeJS.ProcessEnv,
  postmaster: number,
): Promise<Sample> {
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
  ];
  const script = `pgbench ${args.join(' ')} "$1"; times`;
  const [file = 'bash', ...rest] = [...prefix, 'bash', '-c', script, 'bench', conn];
  const server0 = processCpu(postmaster);
  const softirq0 = softirq();
  const { stdout, stderr } = await run(file, rest, { env, maxBuffer: 16 * 1024 * 1024 });
  await sleep(300); // its backends exit and are reaped, their CPU counted into the postmaster's
  const server = processCpu(postmaster) - server0;
  const irq = softirq() - softirq0;
  const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1]);
  const tx = Number(/number of transactions actually processed: (\d+)/.exec(stdout)?.[1]);
  if (!Number.isFinite(tps) || !(tx > 0)) {
    throw new Error(`no tps in pgbench's output: ${stdout}${stderr}`);
  }
  const failed = Number(/number of failed transactions: (\d+)/.exec(stdout)?.[1] ?? 0);
  if (failed > 0 || /aborted/.test(stderr))
    throw new Error(`pgbench had errors: ${stdout}${stderr}`);
  // `times`: the shell's user and system time, then its children's (pgbench's).
  const children = stdout.trim().split('\n').at(-1) ?? '';
  const client = [...children.matchAll(/(\d+)m([\d.]+)s/g)].reduce(
    (sum, m) => sum + Number(m[1]) * 60 + Number(m[2]),
    0,
  );
  return { tps, cpuUsPerTx: ((server + client + irq) * 1_000_000) / tx };
}
