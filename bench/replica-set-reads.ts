// Part of local-failover: the read throughput of a 2-node read replica
// set's endpoint (HAProxy, leastconn) against one of its nodes' own port,
// pgbench -S (select-only, CPU-bound) with READ_CLIENTS clients each way.
// Target: at least 1.6x, which shows that the spreading works where each
// node has CPUs of its own. Each node is held to its size by its CPU
// cgroup (node-cgroups.ts), as a managed cloud's node is held to its
// machine's CPUs, while pgbench and HAProxy, as a cloud's clients and
// proxy would, run beside the budgets. On this 2-core host they must fit
// in what the two nodes' budgets leave: through the endpoint pgbench took
// ~0.4 CPUs and HAProxy ~0.5 at 500-millis nodes' rate, so two such nodes
// (one CPU) left them too little (the host 98 % busy, the nodes short of
// their budgets: a median of 1.48-1.78 in nine runs, bench/README.md). READ_NODE is
// therefore a quarter of a CPU, a size the benchmark adds to the default
// catalogue (READ_CATALOGUE; its smallest is 500m/2GB).
//
// The runs alternate (one node's port, then the endpoint, READ_ROUNDS
// times, after a warm-up through the endpoint) and the ratio is the median
// of the rounds': on a shared machine what one transaction costs drifts by
// tens of percent within a minute, which one long run of each would take
// for a difference between them. What the ratio alone cannot tell is
// measured beside it: each node's quota as its cgroup has it and the share
// of its periods it was throttled in (cpu.stat), which shows that the
// budget held it; the share of the endpoint's transactions each node
// served (xact_commit on each node), which shows whether the connections
// were spread; how busy the host's CPUs were (/proc/stat), and how much of
// them pgbench and HAProxy took through the endpoint (sh's `times`, /proc),
// which shows what was left for the nodes.

import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { DEFAULT_SIZES } from '../src/domain/sizes.js';
import type { CpuHierarchy, InstallationPaths } from '../test/harness/installation-paths.js';
import type { LocalBasin } from './local-basin.js';
import { median } from './report.js';

const run = promisify(execFile);

export const READ_CLIENTS = 16;
export const READ_ROUNDS = 3;
export const READ_SECONDS = 5;
const WARMUP_SECONDS = 3;
export const READ_TARGET = 1.6;
/** The size of each node of the set. */
export const READ_NODE = { cpu_millis: 250, memory_gbs: 1 };
/** The default size catalogue with READ_NODE's added (`--sizes`). */
export const READ_CATALOGUE = [
  'shared',
  `${READ_NODE.cpu_millis}m/${READ_NODE.memory_gbs}GB`,
  ...DEFAULT_SIZES.filter((s) => !s.shared).map((s) => `${s.cpuMillis}m/${s.memoryGbs}GB`),
].join(',');

/** One pgbench run, and what the host and the nodes' cgroups counted meanwhile. */
interface Run {
  tps: number;
  /** How busy the host's CPUs were (0-1). */
  busy: number;
  /** The CPUs pgbench and the installation's HAProxy used (CPU seconds per second). */
  pgbenchCpus: number;
  haproxyCpus: number;
  /** Each node's active CPU periods, and those it was throttled in, by index. */
  periods: { periods: number; throttled: number }[];
}

export interface ReadSpread {
  /** Each round's endpoint tps over one node's tps. */
  ratios: number[];
  /** The median of `ratios`. */
  ratio: number;
  endpointTps: number[];
  nodeTps: number[];
  /** The share of the endpoint runs' transactions each node served, by index. */
  shares: number[];
  /** How busy the host's CPUs were (0-1) during the runs on one node, and during the endpoint's. */
  cpuBusy: { node: number; endpoint: number };
  /** The CPUs pgbench and HAProxy used through the endpoint: no budget holds them. */
  endpointClientCpus: { pgbench: number; haproxy: number };
  cores: number;
  /** Each node's CPU quota as its cgroup has it ("50000/100000" µs), or why there is none. */
  quotas: string[];
  /** The share of its active periods each node was throttled in (0-1), by index, over each kind of run. */
  throttled: { node: number[]; endpoint: number[] };
}

/** The host's CPU counters (jiffies): busy and total, from /proc/stat's first line. */
function cpuTimes(): { busy: number; total: number; cores: number } {
  const text = readFileSync('/proc/stat', 'utf8');
  const first = text.split('\n')[0] ?? '';
  const v = first.trim().split(/\s+/).slice(1).map(Number);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const cores = text.split('\n').filter((l) => /^cpu\d+\s/.test(l)).length;
  return { busy: total - idle, total, cores };
}

/** The throttling counters of the nodes' cgroups, by index (zeros without cgroups). */
function throttling(h: CpuHierarchy | undefined, dirs: string[]) {
  return dirs.map((dir) => {
    if (!h) return { periods: 0, throttled: 0 };
    const stat = readFileSync(join(dir, 'cpu.stat'), 'utf8');
    const field = (k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0);
    return { periods: field('nr_periods'), throttled: field('nr_throttled') };
  });
}

/** CPU time (s) used so far by the HAProxy processes started with files under `dir`. */
function haproxySeconds(dir: string): number {
  let ticks = 0;
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (!stat.includes('(haproxy)')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // exited meanwhile
    }
  }
  return ticks / 100; // USER_HZ
}

/** Seconds from the children's line of sh's `times` ("0m1.230000s 0m0.450000s"), user + system. */
function childSeconds(times: string): number {
  const line = times.trim().split('\n').at(-1) ?? '';
  return [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce(
    (n, m) => n + Number(m[1]) * 60 + Number(m[2]),
    0,
  );
}

/** A cgroup's quota as "<quota>/<period>" µs ("none/<period>" without one). */
function quotaOf(h: CpuHierarchy, dir: string): string {
  const read = (f: string) => readFileSync(join(dir, f), 'utf8').trim();
  if (h.version === 2) return read('cpu.max').replace(' ', '/').replace('max', 'none');
  const quota = read('cpu.cfs_quota_us');
  return `${quota === '-1' ? 'none' : quota}/${read('cpu.cfs_period_us')}`;
}

/** The share of the runs' periods each node was throttled in. */
function throttledShare(runs: Run[]): number[] {
  return [0, 1].map((i) => {
    const periods = runs.reduce((n, r) => n + (r.periods[i]?.periods ?? 0), 0);
    const throttled = runs.reduce((n, r) => n + (r.periods[i]?.throttled ?? 0), 0);
    return periods > 0 ? throttled / periods : 0;
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/** pgbench -S through a new 2-node replica set's endpoint, and on one of its nodes' own port. */
export async function replicaSetReads(
  basin: LocalBasin,
  paths: InstallationPaths,
  svc: { id: string; password: string },
  waitActive: (rsId: string) => Promise<void>,
): Promise<ReadSpread> {
  const rs = await basin.createReplicaSet(svc.id, { name: 'bench-reads', nodes: 2, ...READ_NODE });
  await waitActive(rs.id);
  const env = { ...process.env, PGPASSWORD: svc.password };
  // pgbench through sh, whose `times` then says how much CPU pgbench used.
  const pgbench = async (port: number, seconds: number) => {
    const conn = `host=127.0.0.1 port=${port} user=tsdbadmin dbname=tsdb sslmode=require`;
    const args = ['-S', '-n', '-c', String(READ_CLIENTS), '-j', '2', '-T', String(seconds)];
    const { stdout } = await run(
      'sh',
      ['-c', 'pgbench "$@" && echo --- && times', 'sh', ...args, conn],
      { env },
    );
    const [out = '', times = ''] = stdout.split('\n---\n');
    return { tps: Number(/tps = ([\d.]+)/.exec(out)?.[1] ?? Number.NaN), cpu: childSeconds(times) };
  };
  const haproxyDir = paths.haproxyDir();
  const nodes = [0, 1].map((index) => {
    const pgdata = paths.pgdata(rs.id, index);
    const lines = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n');
    return { port: Number(lines[3]), socket: paths.socketDir(rs.id, index) };
  });
  const commits = async () =>
    Promise.all(
      nodes.map(async (n) => {
        const { stdout } = await run('psql', [
          `host=${n.socket} port=${n.port} user=postgres dbname=postgres`,
          '-XAtqc',
          "SELECT xact_commit FROM pg_stat_database WHERE datname = 'tsdb'",
        ]);
        return Number(stdout.trim());
      }),
    );
  const found = await paths.nodeCpuCgroups(rs.id, [0, 1]);
  const h = 'none' in found ? undefined : found.hierarchy;
  const dirs = 'none' in found ? ['', ''] : found.dirs;
  const quotas = dirs.map((d) => (h ? quotaOf(h, d) : `none (${'none' in found && found.none})`));
  const measured = async (port: number): Promise<Run> => {
    const cpu = cpuTimes();
    const before = throttling(h, dirs);
    const proxy = haproxySeconds(haproxyDir);
    const started = performance.now();
    const { tps, cpu: pgbenchSeconds } = await pgbench(port, READ_SECONDS);
    const wall = (performance.now() - started) / 1000;
    const proxyAfter = haproxySeconds(haproxyDir);
    const after = throttling(h, dirs);
    const cpuAfter = cpuTimes();
    return {
      tps,
      busy: (cpuAfter.busy - cpu.busy) / Math.max(1, cpuAfter.total - cpu.total),
      pgbenchCpus: pgbenchSeconds / wall,
      haproxyCpus: (proxyAfter - proxy) / wall,
      periods: after.map((a, i) => ({
        periods: a.periods - (before[i]?.periods ?? 0),
        throttled: a.throttled - (before[i]?.throttled ?? 0),
      })),
    };
  };

  // Both nodes warm first (buffers, caches, the connections' first queries).
  await pgbench(rs.port, WARMUP_SECONDS);
  const nodeRuns: Run[] = [];
  const endpointRuns: Run[] = [];
  const served = [0, 0];
  for (let r = 0; r < READ_ROUNDS; r++) {
    nodeRuns.push(await measured(nodes[0]!.port));
    const before = await commits();
    endpointRuns.push(await measured(rs.port));
    // pgbench's sessions have ended: PostgreSQL 15 counted their commits as they left.
    await sleep(500);
    const after = await commits();
    after.forEach((a, i) => (served[i]! += a - (before[i] ?? 0)));
  }
  const all = served.reduce((a, b) => a + b, 0);
  const ratios = endpointRuns.map((e, i) => e.tps / (nodeRuns[i]?.tps ?? Number.NaN));
  return {
    ratios,
    ratio: median(ratios),
    endpointTps: endpointRuns.map((x) => x.tps),
    nodeTps: nodeRuns.map((x) => x.tps),
    shares: served.map((s) => (all > 0 ? s / all : 0)),
    cpuBusy: {
      node: mean(nodeRuns.map((x) => x.busy)),
      endpoint: mean(endpointRuns.map((x) => x.busy)),
    },
    endpointClientCpus: {
      pgbench: mean(endpointRuns.map((x) => x.pgbenchCpus)),
      haproxy: mean(endpointRuns.map((x) => x.haproxyCpus)),
    },
    cores: cpuTimes().cores,
    quotas,
    throttled: { node: throttledShare(nodeRuns), endpoint: throttledShare(endpointRuns) },
  };
}
