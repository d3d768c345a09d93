// Benchmark: automatic failover on the local driver. A POSTGRES service with
// one synchronous HA replica; a writer commits numbered rows through the
// service's endpoint (HAProxy) on one connection, reconnecting on errors;
// the primary's postmaster is killed with -9. Measured: the time from the
// kill to the first commit acknowledged through the same endpoint, and the
// acknowledged commits missing afterwards (must be 0). Target: < 5 s.
//
// The floor: the same kill, then a caught-up standby promoted by hand
// (`SELECT pg_promote()` over its socket) and a commit on its own port, with
// Basin stopped: what no supervisor can beat on this host.
//
// Also: replication lag under a pgbench write load through the endpoint
// (replay lag in bytes on the primary, sampled every 200 ms), how many of
// Basin's health checks of the primaries went unanswered (false alarms:
// none hangs here), and the read throughput (pgbench -S) of a 2-node read
// replica set's endpoint against one of its nodes' own port, each node held
// to a quarter of a CPU by its cgroup (target >= 1.6x: the spreading
// works; replica-set-reads.ts).

import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { InstallationPaths } from '../test/harness/installation-paths.js';
import { claimDataDir, LocalBasin, postmasterPid, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import {
  READ_CATALOGUE,
  READ_CLIENTS,
  READ_NODE,
  READ_ROUNDS,
  READ_SECONDS,
  READ_TARGET,
  replicaSetReads,
} from './replica-set-reads.js';

const run = promisify(execFile);
const TARGET_MS = 5_000;
const ROUNDS = 3;

interface Node {
  index: number;
  pid: number;
  port: number;
  socket: string;
  standby: boolean;
}

function nodesOf(paths: InstallationPaths, id: string): Node[] {
  return paths.nodes(id).flatMap((index) => {
    const pgdata = paths.pgdata(id, index);
    const pm = postmasterPid(pgdata);
    if (!pm) return [];
    const port = Number(readFileLines(join(pgdata, 'postmaster.pid'))[3] ?? Number.NaN);
    return [
      {
        index,
        pid: pm.pid,
        port,
        socket: paths.socketDir(id, index),
        standby: existsSync(join(pgdata, 'standby.signal')),
      },
    ];
  });
}

function readFileLines(path: string): string[] {
  try {
    return readFileSync(path, 'utf8').split('\n');
  } catch {
    return [];
  }
}

async function superuser(node: Node, sql: string): Promise<string> {
  const { stdout } = await run('psql', [
    `host=${node.socket} port=${node.port} user=postgres dbname=postgres`,
    '-XAtqc',
    sql,
  ]);
  return stdout.trim();
}

function client(port: number, password: string): pg.Client {
  const c = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'tsdbadmin',
    database: 'tsdb',
    password,
    ssl: { rejectUnauthorized: false },
    connectionTimeoutMillis: 1_000,
    query_timeout: 2_000,
  });
  c.on('error', () => {});
  return c;
}

/** Commits numbered rows through `port`; each acknowledged commit is stamped. */
function writer(port: number, password: string, from: number) {
  const acked: { i: number; sent: number; at: number }[] = [];
  const failures: number[] = [];
  let stop = false;
  let c: pg.Client | undefined;
  const done = (async () => {
    for (let i = from; !stop; i++) {
      try {
        if (!c) {
          c = client(port, password);
          await c.connect();
        }
        const sent = performance.now();
        await c.query('INSERT INTO w (i) VALUES ($1)', [i]);
        acked.push({ i, sent, at: performance.now() });
      } catch {
        failures.push(performance.now());
        void c?.end().catch(() => {});
        c = undefined;
        await sleep(20);
      }
    }
    await c?.end().catch(() => {});
  })();
  return {
    acked,
    failures,
    async stop() {
      stop = true;
      await done;
    },
  };
}

export async function localFailover(ctx: BenchContext): Promise<BenchOutcome> {
  heading('failover: kill -9 of the primary (one synchronous replica) to the next commit');
  const dataDir = await claimDataDir(ctx);
  const paths = new InstallationPaths(dataDir);
  let basin: LocalBasin | undefined;
  try {
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'local-failover.log'),
      ctx.settings.basinNodeArgs,
      // The replica set's nodes are of a size the default catalogue lacks.
      ['--sizes', READ_CATALOGUE],
    );
    const svc = await basin.createWithPassword({
      name: 'bench-ha',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      replica_count: 1,
    });
    await basin.waitReady(svc.id, 50, 180_000);
    await basin.act(svc.id, 'setHA', { sync_replica_count: 1 });
    await sleep(200);
    await basin.waitReady(svc.id, 50, 120_000);
    const setup = client(svc.port, svc.password);
    await setup.connect();
    await setup.query('CREATE TABLE w (i bigint PRIMARY KEY)');
    await setup.end();

    const rounds: { ms: number; lost: number; primary: number }[] = [];
    let next = 1;
    for (let r = 0; r < ROUNDS; r++) {
      // Both nodes run, the standby streams synchronously.
      const nodes = await waitFor(async () => {
        const ns = nodesOf(paths, svc.id);
        const primary = ns.find((n) => !n.standby);
        if (ns.length !== 2 || !primary) return undefined;
        const sync = await superuser(
          primary,
          "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum') AND state = 'streaming'",
        ).catch(() => '0');
        return sync === '1' ? ns : undefined;
      }, 120_000);
      const primary = nodes.find((n) => !n.standby)!;
      const w = writer(svc.port, svc.password, next);
      await waitFor(async () => (w.acked.length > 200 ? true : undefined), 30_000);
      const killedAt = performance.now();
      process.kill(primary.pid, 'SIGKILL');
      // The first commit sent after the first error that followed the kill:
      // the killed postmaster's backends (until the fence kills them) may
      // still acknowledge commits on their open connections, as the
      // synchronous standby has them.
      const first = await waitFor(async () => {
        const broke = w.failures.find((f) => f > killedAt);
        return broke === undefined ? undefined : w.acked.find((a) => a.sent > broke);
      }, 60_000);
      await sleep(300);
      await w.stop();
      next = (w.acked.at(-1)?.i ?? next) + 1;
      const check = client(svc.port, svc.password);
      await check.connect();
      const have = new Set(
        (await check.query<{ i: string }>('SELECT i FROM w')).rows.map((x) => Number(x.i)),
      );
      await check.end();
      rounds.push({
        ms: first.at - killedAt,
        lost: w.acked.filter((a) => !have.has(a.i)).length,
        primary: primary.index,
      });
      // UNSTABLE while it fails over, then READY (waitReady would stop at UNSTABLE).
      const b = basin;
      await waitFor(
        async () => ((await b.get(svc.id))?.status === 'READY' ? true : undefined),
        120_000,
      );
    }

    // Replication lag under pgbench writes through the endpoint.
    const lag = await pgbenchLag(paths, svc);

    // Read throughput: a 2-node replica set's endpoint against one node's own port.
    const rsBasin = basin;
    const reads = await replicaSetReads(rsBasin, paths, svc, async (rsId) => {
      await waitFor(
        async () =>
          (await rsBasin.replicaSetStatus(svc.id, rsId)) === 'active' ? true : undefined,
        180_000,
      );
    });

    // False alarms of the hung-primary checks: no primary here ever hangs
    // (they are killed), so every unanswered check is one, under pgbench.
    const logs = await basin.request('GET', `/${svc.id}/logs?search=health%20check`);
    const unanswered = (JSON.parse(logs.text) as { logs: string[] }).logs.filter((l) =>
      /did not answer a health check/.test(l),
    ).length;

    // The floor: a caught-up standby promoted by hand, Basin stopped.
    await sleep(1_000);
    const before = nodesOf(paths, svc.id);
    await basin.stop();
    basin = undefined;
    const p = before.find((n) => !n.standby)!;
    const s = before.find((n) => n.standby)!;
    const floorStart = performance.now();
    process.kill(p.pid, 'SIGKILL');
    await superuser(s, 'SELECT pg_promote(true, 60)');
    const direct = client(s.port, svc.password);
    await direct.connect();
    await direct.query('INSERT INTO w (i) VALUES (-1)');
    const floorMs = performance.now() - floorStart;
    await direct.end();

    table(
      ['round', 'killed', 'kill → first commit (ms)', 'acknowledged commits lost'],
      rounds.map((x, i) => [String(i + 1), `node${x.primary}`, fixed(x.ms, 0), String(x.lost)]),
    );
    console.log(
      `floor (kill, pg_promote() by hand on the caught-up standby, commit on its own port): ${fixed(floorMs, 0)} ms`,
    );
    console.log(
      `replication lag under pgbench (4 clients, 10 s, through the endpoint): replay lag ` +
        `median ${fixed(lag.medianKb, 0)} kB, max ${fixed(lag.maxKb, 0)} kB over ${lag.samples} samples; ` +
        `pgbench ${fixed(lag.tps, 0)} tps`,
    );
    console.log(
      `health checks of the primaries left unanswered (1.5 s each; 3 in a row fail over) over the run: ${unanswered}`,
    );
    const pct = (x: number) => `${fixed(x * 100, 0)} %`;
    const shares = (xs: number[]) => xs.map(pct).join(' / ');
    const tpsList = (xs: number[]) => xs.map((x) => fixed(x, 0)).join(', ');
    console.log(
      `read replica set (2 nodes of ${READ_NODE.cpu_millis} millis, each held to its budget by its ` +
        `CPU cgroup, quota ${reads.quotas.join(' and ')} µs; pgbench -S, ${READ_CLIENTS} clients, ` +
        `${READ_ROUNDS} rounds of ${READ_SECONDS} s on one node's own port then ${READ_SECONDS} s ` +
        `through the endpoint): ratio ${fixed(reads.ratio, 2)} (median of ` +
        `${reads.ratios.map((r) => fixed(r, 2)).join(', ')}; target >= ${READ_TARGET}); endpoint ` +
        `${tpsList(reads.endpointTps)} tps, one node ${tpsList(reads.nodeTps)} tps; node0/node1 ` +
        `throttled in ${shares(reads.throttled.node)} of their periods on one node's port, ` +
        `${shares(reads.throttled.endpoint)} through the endpoint; the endpoint's transactions ` +
        `served by node0/node1: ${shares(reads.shares)}; host CPUs (${reads.cores}) busy: ` +
        `${pct(reads.cpuBusy.node)} on one node, ${pct(reads.cpuBusy.endpoint)} through the endpoint, ` +
        `where pgbench used ${fixed(reads.endpointClientCpus.pgbench, 2)} CPUs and HAProxy ` +
        `${fixed(reads.endpointClientCpus.haproxy, 2)}`,
    );
    if (reads.ratio < READ_TARGET) {
      warn(
        `the replica set's endpoint served less than ${READ_TARGET}x one node's reads ` +
          `(the host's ${reads.cores} CPUs were ${pct(reads.cpuBusy.endpoint)} busy through the endpoint, ` +
          `${fixed(reads.endpointClientCpus.pgbench + reads.endpointClientCpus.haproxy, 2)} of them ` +
          "pgbench's and HAProxy's, which no budget holds: what the nodes' budgets need beyond what " +
          'they left, the nodes did not get)',
      );
    }
    const mid = median(rounds.map((x) => x.ms));
    const lost = rounds.reduce((n, x) => n + x.lost, 0);
    const met = rounds.every((x) => x.ms < TARGET_MS) && lost === 0;
    const headline = `failover kill -9 → first commit: median ${fixed(mid, 0)} ms, max ${fixed(
      Math.max(...rounds.map((x) => x.ms)),
      0,
    )} ms, ${lost} acknowledged commits lost (target < ${TARGET_MS} ms, 0 lost; floor ${fixed(floorMs, 0)} ms)`;
    console.log(headline);
    if (!met) warn('a failover took 5 s or more, or lost an acknowledged commit.');
    return { headline, metTarget: met };
  } finally {
    await basin?.stop().catch(() => {});
    await releaseDataDir(dataDir);
  }
}

async function pgbenchLag(
  paths: InstallationPaths,
  svc: { id: string; password: string; port: number },
): Promise<{ medianKb: number; maxKb: number; samples: number; tps: number }> {
  const conn = `host=127.0.0.1 port=${svc.port} user=tsdbadmin dbname=tsdb sslmode=require`;
  const env = { ...process.env, PGPASSWORD: svc.password };
  await run('pgbench', ['-i', '-q', '-s', '2', conn], { env });
  const primary = nodesOf(paths, svc.id).find((n) => !n.standby)!;
  const samples: number[] = [];
  let stop = false;
  const sampling = (async () => {
    while (!stop) {
      const v = await superuser(
        primary,
        'SELECT coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)), 0) FROM pg_stat_replication',
      ).catch(() => '');
      if (v !== '') samples.push(Number(v));
      await sleep(200);
    }
  })();
  const { stdout } = await run('pgbench', ['-c', '4', '-j', '2', '-T', '10', '-n', conn], {
    env,
  });
  stop = true;
  await sampling;
  const tps = Number(/tps = ([\d.]+)/.exec(stdout)?.[1] ?? Number.NaN);
  return {
    medianKb: median(samples) / 1024,
    maxKb: Math.max(0, ...samples) / 1024,
    samples: samples.length,
    tps,
  };
}

async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await sleep(10);
  }
}
