// Part of local-failover: the read throughput of a 2-node read replica
// set's endpoint (HAProxy, leastconn) against one of its nodes' own port,
// pgbench -S (select-only, CPU-bound) with READ_CLIENTS clients each way.
// Target: at least 1.6x, which shows that the spreading works where each
// node has cores of its own. What the ratio alone cannot tell is measured
// beside it: the share of the endpoint's transactions each node served
// (xact_commit on each node, before and after), which shows whether the
// connections were spread, and how busy the host's CPUs were during each
// run (/proc/stat), which shows whether one node alone already used all
// of them (then no spreading can add throughput on this host).

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Layout } from '../src/drivers/local/layout.js';
import type { LocalBasin } from './local-basin.js';

const run = promisify(execFile);

export const READ_CLIENTS = 16;
export const READ_SECONDS = 8;
export const READ_TARGET = 1.6;

export interface ReadSpread {
  endpointTps: number;
  nodeTps: number;
  /** The share of the endpoint run's transactions each node served, by index. */
  shares: number[];
  /** How busy the host's CPUs were (0-1) during the run on one node, and during the endpoint's. */
  cpuBusy: { node: number; endpoint: number };
  cores: number;
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

/** Runs `fn`, and says how busy the host's CPUs were meanwhile (0-1). */
async function busyDuring<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const a = cpuTimes();
  const out = await fn();
  const b = cpuTimes();
  return [out, (b.busy - a.busy) / Math.max(1, b.total - a.total)];
}

/** pgbench -S through a new 2-node replica set's endpoint, and on one of its nodes' own port. */
export async function replicaSetReads(
  basin: LocalBasin,
  layout: Layout,
  svc: { id: string; password: string },
  waitActive: (rsId: string) => Promise<void>,
): Promise<ReadSpread> {
  const rs = await basin.createReplicaSet(svc.id, {
    name: 'bench-reads',
    nodes: 2,
    cpu_millis: 1000,
    memory_gbs: 4,
  });
  await waitActive(rs.id);
  const env = { ...process.env, PGPASSWORD: svc.password };
  const tps = async (port: number) => {
    const conn = `host=127.0.0.1 port=${port} user=tsdbadmin dbname=tsdb sslmode=require`;
    const args = ['-S', '-n', '-c', String(READ_CLIENTS), '-j', '2', '-T', String(READ_SECONDS)];
    const { stdout } = await run('pgbench', [...args, conn], { env });
    return Number(/tps = ([\d.]+)/.exec(stdout)?.[1] ?? Number.NaN);
  };
  const nodes = [0, 1].map((index) => {
    const ref = { id: rs.id, node: index };
    const lines = readFileSync(join(layout.pgdata(ref), 'postmaster.pid'), 'utf8').split('\n');
    return { port: Number(lines[3]), socket: layout.socketDir(ref) };
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
  const [nodeTps, nodeBusy] = await busyDuring(() => tps(nodes[0]!.port));
  // pg_stat_database is updated when a session ends or at most every second.
  const before = await commits();
  const [endpointTps, endpointBusy] = await busyDuring(() => tps(rs.port));
  await new Promise((r) => setTimeout(r, 1_500));
  const after = await commits();
  const served = after.map((a, i) => a - (before[i] ?? 0));
  const all = served.reduce((a, b) => a + b, 0);
  return {
    endpointTps,
    nodeTps,
    shares: served.map((s) => (all > 0 ? s / all : 0)),
    cpuBusy: { node: nodeBusy, endpoint: endpointBusy },
    cores: cpuTimes().cores,
  };
}
