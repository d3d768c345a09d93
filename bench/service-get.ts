// Benchmark: requests per second of GET /v1/projects/{p}/services/{s} with a
// Bearer key, against a bare node:http server answering the same JSON, side
// by side in one run. Target: Basin at least 0.8 of the bare server.
//
// Basin runs as `npm start` runs it (installations.ts, the harness the
// end-to-end tests use): the built
// dist/main.js, its default log level with one access line per request, its
// default rate limits, its log written to a file. The Fastify floor
// (fastify-floor.ts) is measured alongside: what any Fastify application
// costs. Each server runs in its own child process; the load generator runs
// here. They are measured in rounds (each server once per round, in a
// shuffled order) on fresh keep-alive connections, and the medians are
// compared, so that a noisy moment of the machine hits every side alike.
//
// BENCH_COMPARE='<name>=<dist dir> [flags…];…' adds other builds of Basin
// (e.g. a copy of an older commit's dist/), or the same one with other flags,
// measured in the same rounds, in a shuffled order: for A/B comparisons.

import { cpus } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readAccessLog } from './access-log-check.js';
import {
  type BasinProcess,
  claimBenchInstallation,
  type ClaimedInstallation,
  releaseBenchInstallation,
  REPO_DIST,
} from './installations.js';
import { startChild } from './children.js';
import { credentialsFor, issueBearerKeys } from './credentials.js';
import { type LoadResult, runLoad } from './load.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';

const TARGET = 0.8;
/** Credentials enough for this many requests per second, a whole minute, under the read limit. */
const PEAK_RPS = 100_000;

/** The table's measured columns: title, value, decimals. */
const COLUMNS: [string, (r: LoadResult) => number | undefined, number][] = [
  ['req/s', (r) => r.rps, 0],
  ['p50 ms', (r) => r.latencyMs.p50, 2],
  ['p99 ms', (r) => r.latencyMs.p99, 2],
  ['server cpu', (r) => r.cpu.watched[0], 2],
  ['cpu µs/req', (r) => cpuPerRequest(r), 1],
  ['loadgen cpu', (r) => r.cpu.self, 2],
  ['machine cpu', (r) => r.cpu.machine, 2],
];

interface Target {
  name: string;
  port: number;
  pid: number;
  path: string;
  serviceId: string;
  /** One header set per credential: requests take turns. */
  headers: Record<string, string>[];
  results: LoadResult[];
  /** Responses received over every load, warmups included. */
  received: number;
  basin?: BasinProcess;
  installation?: ClaimedInstallation;
  /** Where Basin's output (its access log) goes. */
  logPath?: string;
  /** Its bearer keys, which must not appear in its log. */
  keys: string[];
}

export async function serviceGetVsBare(ctx: BenchContext): Promise<BenchOutcome> {
  const s = ctx.settings;
  heading('GET /v1/projects/{p}/services/{s} (Bearer auth) vs bare node:http, same JSON');
  const builds = [{ name: 'basin', dist: REPO_DIST, flags: [] }, ...comparedBuilds()];
  const nKeys = credentialsFor(PEAK_RPS, s.connections);

  const bare = startChild('./bare-server.ts');
  const floor = startChild('./fastify-floor.ts');
  const basins: Target[] = [];
  let outcome: BenchOutcome;
  try {
    for (const b of builds) basins.push(await startBasin(ctx, b, nKeys));
    const first = basins[0] as Target;
    const body = await fetchBody(first);
    const baseline = async (name: string, child: typeof bare): Promise<Target> => {
      child.send({ type: 'body', body });
      const { port } = await child.message<{ port: number }>('ready');
      return { ...first, name, port, pid: child.pid, results: [], received: 0, basin: undefined };
    };
    const bareTarget = await baseline('bare', bare);
    const floorTarget = await baseline('fastify', floor);
    const targets = [bareTarget, floorTarget, ...basins];

    const load = async (t: Target, warmupMs: number, durationMs: number) => {
      const r = await runLoad({
        host: '127.0.0.1',
        port: t.port,
        path: t.path,
        headers: t.headers,
        connections: s.connections,
        warmupMs,
        durationMs,
        watchPids: [t.pid],
      });
      t.received += r.received;
      check(t, r);
      return r;
    };

    console.log(
      `${builds.map((b) => `${b.name}: node ${b.dist}main.js --driver sim --sim-delay-ms 0 ${b.flags.join(' ')}`).join('; ')} ` +
        `(default log level, access log to a file, default rate limits); ` +
        `body ${Buffer.byteLength(body)} bytes; ${s.connections} keep-alive connections, ` +
        `1 request in flight each, taking turns between ${nKeys} credentials; ${s.rounds} rounds ` +
        `of ${s.warmupMs / 1000} s warmup + ${s.durationMs / 1000} s measured per server, after ` +
        `${s.initialWarmupMs / 1000} s of JIT warmup each`,
    );
    for (const t of targets) await load(t, 0, s.initialWarmupMs);

    const rows: string[][] = [];
    for (let round = 1; round <= s.rounds; round++) {
      // A shuffled order each round: no server always follows another.
      const order = shuffled(targets);
      for (const t of order) {
        const r = await load(t, s.warmupMs, s.durationMs);
        t.results.push(r);
        rows.push([
          String(round),
          t.name,
          ...COLUMNS.map(([, pick, d]) => fixed(pick(r) ?? NaN, d)),
        ]);
      }
    }
    const mid = (t: Target, pick: (r: LoadResult) => number | undefined) =>
      median(t.results.map(pick).filter((v): v is number => v !== undefined));
    for (const t of targets) {
      rows.push(['median', t.name, ...COLUMNS.map(([, pick, d]) => fixed(mid(t, pick), d))]);
    }
    console.log('');
    table(['round', 'server', ...COLUMNS.map(([title]) => title)], rows);
    console.log(
      `\ncpu columns: cores busy during the measured window, of ${cpus().length}; ` +
        `machine = everything, including the kernel's loopback networking and other programs`,
    );

    const others = median(
      targets
        .flatMap((t) => t.results)
        .map((r) => (r.cpu.machine ?? NaN) - (r.cpu.watched[0] ?? NaN) - r.cpu.self)
        .filter(Number.isFinite),
    );
    if (others > 0.6) {
      warn(
        `${others.toFixed(2)} cores went to neither server nor load generator (kernel networking ` +
          `and other programs): the machine was busy, so the figures are noisy.`,
      );
    }
    const bareCpu = mid(bareTarget, (r) => r.cpu.watched[0]);
    if (bareCpu < 0.9) {
      warn(
        `the bare server used only ${bareCpu.toFixed(2)} of a core: it was held back by the load ` +
          `generator or by other programs, not by its own work, so the requests/s ratio flatters Basin.`,
      );
    }

    const lines: string[] = [];
    for (const t of [floorTarget, ...basins]) {
      const ratio = mid(t, (r) => r.rps) / mid(bareTarget, (r) => r.rps);
      const perRound = t.results.map((r, i) => r.rps / (bareTarget.results[i] as LoadResult).rps);
      // The same round's bare server against this build: CPU per request.
      const cpuRounds = t.results.map(
        (r, i) => cpuPerRequest(bareTarget.results[i] as LoadResult) / cpuPerRequest(r),
      );
      const cpuRatio = median(cpuRounds.filter(Number.isFinite));
      console.log(
        `\n${t.name}: per-round req/s ratios ${perRound.map((x) => x.toFixed(2)).join(' ')}; ` +
          `per-round cpu ratios (bare µs/req ÷ ${t.name} µs/req) ${cpuRounds.map((x) => x.toFixed(2)).join(' ')}`,
      );
      console.log(
        `${t.name}: server cpu per request ${mid(t, cpuPerRequest).toFixed(1)} µs, bare ` +
          `${mid(bareTarget, cpuPerRequest).toFixed(1)} µs; cpu ratio ${cpuRatio.toFixed(2)} (what to ` +
          `expect when each server has a core to itself)`,
      );
      lines.push(
        `service-get ${t.name}/bare: ${ratio.toFixed(2)} of the requests/s` +
          (t === floorTarget ? '' : ` (target >= ${TARGET})`) +
          `, ` +
          `cpu ratio ${cpuRatio.toFixed(2)}, p99 ${mid(t, (r) => r.latencyMs.p99).toFixed(2)} ms ` +
          `(bare ${mid(bareTarget, (r) => r.latencyMs.p99).toFixed(2)} ms)`,
      );
    }
    const ratio = mid(first, (r) => r.rps) / mid(bareTarget, (r) => r.rps);
    console.log(
      `\n${first.name} beyond the Fastify floor: ` +
        `${(mid(first, cpuPerRequest) - mid(floorTarget, cpuPerRequest)).toFixed(1)} µs of cpu a request ` +
        `(authentication, read view, rate limits, access log); the floor beyond bare node:http: ` +
        `${(mid(floorTarget, cpuPerRequest) - mid(bareTarget, cpuPerRequest)).toFixed(1)} µs`,
    );
    for (const l of lines) console.log(l);
    if (ratio < TARGET) warn(`Basin is below the target of ${TARGET} of the bare server.`);
    outcome = { headline: lines[1] as string, metTarget: ratio >= TARGET };
  } finally {
    await Promise.all([...basins.map((t) => t.basin?.stop(30_000)), bare.stop(), floor.stop()]);
  }

  // Basin wrote its access log to a file, flushed when it stopped: one line
  // per response, and no credential in it.
  try {
    for (const t of basins) {
      const log = await readAccessLog(t.logPath as string, t.keys);
      console.log(
        `${t.name} log: ${log.requestLines} access lines for ${t.received} responses to the load ` +
          `(${(log.bytes / 2 ** 20).toFixed(0)} MB in all, ${fixed(log.bytes / log.lines, 0)} bytes a line); ` +
          `statuses ${[...log.statuses].map(([k, v]) => `${k}: ${v}`).join(', ')}`,
      );
      if (log.leaks > 0) throw new Error(`${t.name}: ${log.leaks} log lines hold a credential`);
      if (t === basins[0] && log.requestLines < t.received) {
        throw new Error(`${t.name}: fewer access lines than responses: lines were lost`);
      }
    }
  } finally {
    for (const t of basins) if (t.installation) await releaseBenchInstallation(t.installation);
  }
  return outcome;
}

interface Build {
  name: string;
  dist: string;
  flags: string[];
}

/** BENCH_COMPARE: other builds (or flags) to measure in the same rounds. */
function comparedBuilds(): Build[] {
  return (process.env.BENCH_COMPARE ?? '')
    .split(';')
    .map((e) => e.trim())
    .filter(Boolean)
    .map((entry) => {
      const m = /^([\w.-]+)=(\S+)\s*(.*)$/.exec(entry);
      if (!m)
        throw new Error(`BENCH_COMPARE entries look like name=/path/to/dist [flags]; got ${entry}`);
      const dist = m[2] as string;
      return {
        name: m[1] as string,
        dist: dist.endsWith('/') ? dist : dist + '/',
        flags: (m[3] as string).split(/\s+/).filter(Boolean),
      };
    });
}

/** A Basin of `build` with the sim driver, `nKeys` credentials and one READY service. */
async function startBasin(ctx: BenchContext, build: Build, nKeys: number): Promise<Target> {
  const { name, dist } = build;
  const apiKey = `bench-bootstrap-key-${name}-0123456789`;
  const logPath = join(ctx.tmpDir, `${name}.log`);
  const installation = await claimBenchInstallation(ctx, { driver: 'sim' });
  const basin = await installation.start({
    dist,
    args: ['--sim-delay-ms', '0', ...build.flags],
    bootstrapKey: apiKey,
    logPath,
  });
  const dataDir = installation.dataDir;
  const keys = [apiKey, ...(await issueBearerKeys(dataDir, basin.projectId, nKeys - 1))];
  // The setup goes through the harness's request; the load generator
  // (load.ts) measures the server with raw sockets on purpose.
  const created = await basin.call('POST', basin.servicePath(), { name: 'bench' });
  if (created.status !== 202) {
    throw new Error(`${name}: creating a service answered ${created.status}: ${created.text}`);
  }
  const serviceId = (JSON.parse(created.text) as { service_id: string }).service_id;
  const path = `/v1${basin.servicePath(serviceId)}`;
  let received = 1;
  const deadline = Date.now() + 20_000;
  for (;;) {
    const got = await basin.call('GET', basin.servicePath(serviceId));
    received++;
    const status = (JSON.parse(got.text) as { status?: string }).status;
    if (got.status === 200 && status === 'READY') break;
    if (Date.now() > deadline)
      throw new Error(`${name}: the service is still ${status} after 20 s`);
    await sleep(20);
  }
  return {
    name,
    port: installation.apiPort,
    pid: basin.pid,
    path,
    serviceId,
    headers: keys.map((k) => ({ Authorization: `Bearer ${k}`, Accept: 'application/json' })),
    results: [],
    received,
    basin,
    installation,
    logPath,
    keys,
  };
}

/** The service's body, with one of the keys the load uses. */
async function fetchBody(t: Target): Promise<string> {
  const basin = t.basin as BasinProcess;
  const got = await basin.request('GET', basin.servicePath(t.serviceId), {
    authorization: `Bearer ${t.keys[t.keys.length - 1]}`,
  });
  t.received++;
  if (got.status !== 200) throw new Error(`GET ${t.path} answered ${got.status}: ${got.text}`);
  return got.text;
}

function check(t: Target, r: LoadResult): void {
  if (r.non200.size > 0) {
    const counts = [...r.non200].map(([status, n]) => `${n} x ${status}`).join(', ');
    throw new Error(`${t.name}: non-200 responses: ${counts}`);
  }
  if (r.sampleBody === undefined) throw new Error(`${t.name}: no response at all`);
  const got = (JSON.parse(r.sampleBody) as { service_id?: string }).service_id;
  if (got !== t.serviceId)
    throw new Error(`${t.name}: answered service ${got}, not ${t.serviceId}`);
}

/** Server CPU time per request, in µs. */
function cpuPerRequest(r: LoadResult): number {
  return ((r.cpu.watched[0] ?? NaN) / r.rps) * 1e6;
}

function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
