// Benchmark: `service-get` on several processes (issue 20, item 5). Three
// Basins (`node dist/main.js --driver sim --store-url …`, one data
// directory, three ports) on one PostgreSQL store (test/store-postgres.ts,
// the harness's postmaster); `GET /v1/projects/{p}/services/{s}` sent to
// each of them, the leader and the two followers, against the bare
// `node:http` baseline in the same rounds, as service-get.ts does for one
// process. Target: every process at least 0.8 of the bare server.
//
// A follower serves the GET from the store's read mirror
// (store/postgres/read-mirror.ts), as the leader does: no request reads the
// database. The load takes turns between 100 credentials (made as `basin
// --store-url … credential create` makes them), so that no process's
// per-credential read limit is reached; any non-200 fails the benchmark.

import { cpus } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startStoreCluster, type StorePostgres } from '../test/store-postgres.js';
import { answering } from '../test/harness/basin-api.js';
import { freePort } from '../test/harness/postmaster.js';
import { readAccessLog } from './access-log-check.js';
import type { BenchContext } from './bench-context.js';
import { startChild } from './children.js';
import { credentialsFor, issueBearerKeys } from './credentials.js';
import {
  type BasinProcess,
  claimBenchInstallation,
  type ClaimedInstallation,
  releaseBenchInstallation,
} from './installations.js';
import { type LoadResult, runLoad } from './load.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';

const TARGET = 0.8;
const PROCESSES = 3;
/** As service-get.ts: credentials enough for this many requests/s under the read limit. */
const PEAK_RPS = 100_000;

interface Target {
  name: string;
  port: number;
  pid: number;
  results: LoadResult[];
  received: number;
  basin?: BasinProcess;
  logPath?: string;
}

export async function severalGet(ctx: BenchContext): Promise<BenchOutcome> {
  const s = ctx.settings;
  heading(`GET /v1/projects/{p}/services/{s} on ${PROCESSES} Basins, one PostgreSQL store`);
  const nKeys = credentialsFor(PEAK_RPS, s.connections);
  const bootstrapKey = 'bench-bootstrap-key-several-0123456789';
  let pgc: StorePostgres | undefined;
  let inst: ClaimedInstallation | undefined;
  const bare = startChild('./bare-server.ts');
  const basins: Target[] = [];
  let keys: string[] = [bootstrapKey];
  let outcome: BenchOutcome;
  try {
    try {
      pgc = await startStoreCluster();
      const url = await pgc.createDatabase('basin');
      inst = await claimBenchInstallation(ctx, { driver: 'sim', args: ['--store-url', url] });
      const ports = [inst.apiPort, ...(await Promise.all([freePort(), freePort()]))];
      const start = async (i: number) => {
        const port = ports[i] as number;
        const logPath = join(ctx.tmpDir, `several-${i}.log`);
        const launched = (inst as ClaimedInstallation).launch({
          args: ['--port', String(port), '--sim-delay-ms', '0'],
          bootstrapKey,
          logPath,
        });
        const basin = await answering(launched, `http://127.0.0.1:${port}/v1`, bootstrapKey);
        return { name: `#${i}`, port, pid: basin.pid, results: [], received: 0, basin, logPath };
      };
      // The first alone: it bootstraps the empty store.
      basins.push(await start(0));
      basins.push(...(await Promise.all([start(1), start(2)])));
      const first = basins[0]?.basin as BasinProcess;
      keys = [
        bootstrapKey,
        ...(await issueBearerKeys(inst.dataDir, first.projectId, nKeys - 1, url)),
      ];
      const headers = keys.map((k) => ({
        Authorization: `Bearer ${k}`,
        Accept: 'application/json',
      }));

      // Who leads: the lease's holder is <host>/<pid>.
      const leaderPid = await (async () => {
        for (let i = 0; i < 200; i++) {
          const res = await (pgc as StorePostgres).sql(
            'SELECT holder FROM leadership',
            [],
            'basin',
          );
          const holder = (res.rows[0] as { holder?: string } | undefined)?.holder;
          const pid = Number(holder?.split('/').pop());
          if (basins.some((b) => b.pid === pid)) return pid;
          await sleep(50);
        }
        throw new Error('no process leads');
      })();
      let follower = 0;
      for (const b of basins) b.name = b.pid === leaderPid ? 'leader' : `follower ${++follower}`;

      const created = await first.call('POST', first.servicePath(), { name: 'bench' });
      if (created.status !== 202) {
        throw new Error(`creating a service answered ${created.status}: ${created.text}`);
      }
      const serviceId = (created.body as { service_id: string }).service_id;
      const path = `/v1${first.servicePath(serviceId)}`;
      // READY with its usage, as every process answers it: the leader's
      // status write through the mirror, the leader's first round of samples
      // (published every --series-interval-ms) through the store.
      const bodies = new Map<string, string>();
      for (const b of basins) {
        const basin = b.basin as BasinProcess;
        await basin.waitForStatus(serviceId, 'READY', 30_000);
        const ready = await basin.waitFor(
          async () => {
            const got = await basin.call('GET', basin.servicePath(serviceId));
            return got.body?.metrics ? got.text : undefined;
          },
          `service ${serviceId} with its usage through ${b.name}`,
          30_000,
        );
        bodies.set(b.name, ready);
      }
      const leader = basins.find((b) => b.pid === leaderPid) as Target;
      const body = await (leader.basin as BasinProcess).request(
        'GET',
        first.servicePath(serviceId),
        {
          authorization: `Bearer ${keys[keys.length - 1]}`,
        },
      );
      if (body.status !== 200) throw new Error(`GET ${path}: ${body.status} ${body.text}`);
      bare.send({ type: 'body', body: body.text });
      const { port: barePort } = await bare.message<{ port: number }>('ready');
      const bareTarget: Target = {
        name: 'bare',
        port: barePort,
        pid: bare.pid,
        results: [],
        received: 0,
      };
      const targets = [bareTarget, ...basins];

      const load = async (t: Target, warmupMs: number, durationMs: number) => {
        const r = await runLoad({
          host: '127.0.0.1',
          port: t.port,
          path,
          headers,
          connections: s.connections,
          warmupMs,
          durationMs,
          watchPids: [t.pid],
        });
        t.received += r.received;
        if (r.non200.size > 0) {
          const counts = [...r.non200].map(([status, n]) => `${n} x ${status}`).join(', ');
          throw new Error(`${t.name}: non-200 responses: ${counts}`);
        }
        const got =
          r.sampleBody && (JSON.parse(r.sampleBody) as { service_id?: string }).service_id;
        if (got !== serviceId) throw new Error(`${t.name}: answered ${got}, not ${serviceId}`);
        return r;
      };
      console.log(
        `${PROCESSES} x node dist/main.js --driver sim --sim-delay-ms 0 --store-url postgres://… ` +
          `(one data directory, a port each; default log level, access logs to files, default ` +
          `rate limits); body ${Buffer.byteLength(body.text)} bytes (the leader's; the ` +
          `followers' ${basins
            .filter((b) => b !== leader)
            .map((b) => Buffer.byteLength(bodies.get(b.name) ?? ''))
            .join(', ')}, with usage); ` +
          `${s.connections} keep-alive connections, taking turns between ${nKeys} credentials; ` +
          `${s.rounds} rounds of ${s.warmupMs / 1000} s warmup + ${s.durationMs / 1000} s measured ` +
          `per server, after ${s.initialWarmupMs / 1000} s of JIT warmup each`,
      );
      for (const t of targets) await load(t, 0, s.initialWarmupMs);
      const rows: string[][] = [];
      const cpuUs = (r: LoadResult) => ((r.cpu.watched[0] ?? NaN) / r.rps) * 1e6;
      for (let round = 1; round <= s.rounds; round++) {
        for (const t of shuffled(targets)) {
          const r = await load(t, s.warmupMs, s.durationMs);
          t.results.push(r);
          rows.push([
            String(round),
            t.name,
            fixed(r.rps, 0),
            fixed(r.latencyMs.p99, 2),
            fixed(r.cpu.watched[0] ?? NaN, 2),
            fixed(cpuUs(r), 1),
            fixed(r.cpu.machine ?? NaN, 2),
          ]);
        }
      }
      const mid = (t: Target, pick: (r: LoadResult) => number) => median(t.results.map(pick));
      for (const t of targets) {
        rows.push([
          'median',
          t.name,
          fixed(
            mid(t, (r) => r.rps),
            0,
          ),
          fixed(
            mid(t, (r) => r.latencyMs.p99),
            2,
          ),
          fixed(
            mid(t, (r) => r.cpu.watched[0] ?? NaN),
            2,
          ),
          fixed(mid(t, cpuUs), 1),
          fixed(
            mid(t, (r) => r.cpu.machine ?? NaN),
            2,
          ),
        ]);
      }
      console.log('');
      table(
        ['round', 'server', 'req/s', 'p99 ms', 'server cpu', 'cpu µs/req', 'machine cpu'],
        rows,
      );
      console.log(`\ncpu columns: cores busy during the measured window, of ${cpus().length}`);
      const bareCpu = mid(bareTarget, (r) => r.cpu.watched[0] ?? NaN);
      if (bareCpu < 0.9) {
        warn(
          `the bare server used only ${bareCpu.toFixed(2)} of a core: the machine was busy, ` +
            `so the requests/s ratios flatter Basin; read the cpu ratios.`,
        );
      }
      const lines: string[] = [];
      let worst = Infinity;
      for (const t of basins) {
        const ratio = mid(t, (r) => r.rps) / mid(bareTarget, (r) => r.rps);
        const cpuRatio = median(
          t.results
            .map((r, i) => cpuUs(bareTarget.results[i] as LoadResult) / cpuUs(r))
            .filter(Number.isFinite),
        );
        worst = Math.min(worst, ratio);
        lines.push(
          `several-get ${t.name}/bare: ${ratio.toFixed(2)} of the requests/s (target >= ${TARGET}), ` +
            `cpu ratio ${cpuRatio.toFixed(2)}, p99 ${mid(t, (r) => r.latencyMs.p99).toFixed(2)} ms`,
        );
      }
      for (const l of lines) console.log(l);
      if (worst < TARGET) warn(`a process is below the target of ${TARGET} of the bare server.`);
      outcome = {
        headline: `several-get: every process >= ${worst.toFixed(2)} of bare (${lines.map((l) => l.split(':')[1]?.split(' of')[0]?.trim()).join(', ')})`,
        metTarget: worst >= TARGET,
      };
    } finally {
      await Promise.all([...basins.map((t) => t.basin?.stop(30_000)), bare.stop()]);
    }
    // Every process wrote an access line for every response, and no key.
    for (const t of basins) {
      if (!t.logPath) continue;
      const log = await readAccessLog(t.logPath, keys);
      if (log.leaks > 0) throw new Error(`${t.name}: ${log.leaks} log lines hold a credential`);
      if (log.requestLines < t.received) {
        throw new Error(`${t.name}: ${log.requestLines} access lines for ${t.received} responses`);
      }
    }
    return outcome;
  } finally {
    if (inst) await releaseBenchInstallation(inst);
    await pgc?.stop();
  }
}

function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
