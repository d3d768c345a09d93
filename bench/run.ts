// `npm run bench`: runs the benchmarks in BENCHMARKS, one after the other,
// and closes with each one's headline. `npm run bench -- <name> …` runs only
// the named ones.
//
// Settings, from the environment (defaults keep the whole run under ~90 s):
//   BENCH_CONNECTIONS (32)   keep-alive connections, one request in flight each
//   BENCH_ROUNDS (5)         alternating measured rounds per server
//   BENCH_WARMUP_S (1)       unmeasured seconds at the start of each round
//   BENCH_DURATION_S (4)     measured seconds of each round
//   BENCH_JIT_WARMUP_S (3)   unmeasured seconds per server before the first round
//   BENCH_BASIN_NODE_ARGS    node flags for the Basin child, e.g.
//                            "--cpu-prof --cpu-prof-dir=/tmp/basin-prof"
//
// A benchmark that misses its target prints a warning; the exit code is still
// 0. It is 1 only when a benchmark could not run (a crash, a non-200, ...).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backupWrite } from './backup-write.js';
import type { BenchContext, BenchSettings } from './bench-context.js';
import { killAllChildrenNow, stopAllChildren } from './children.js';
import { cliStart } from './cli-start.js';
import { density } from './density.js';
import { forkNow } from './fork-now.js';
import { forkPitr } from './fork-pitr.js';
import { haHosts } from './ha-hosts.js';
import { idleWake } from './idle-wake.js';
import { localCreate } from './local-create.js';
import { localFailover } from './local-failover.js';
import { localIdleMemory } from './local-idle-memory.js';
import { localNetns } from './local-netns.js';
import { localPooler } from './local-pooler.js';
import { metricsScrape } from './metrics-scrape.js';
import { metricsSeries } from './metrics-series.js';
import { type BenchOutcome, heading, machineSummary, warn } from './report.js';
import { serviceGetVsBare } from './service-get.js';
import { severalHosts } from './several-hosts.js';
import { severalGet } from './several-get.js';
import { storeCreate } from './store-create.js';

interface Benchmark {
  name: string;
  run(ctx: BenchContext): Promise<BenchOutcome>;
}

const BENCHMARKS: readonly Benchmark[] = [
  { name: 'service-get', run: serviceGetVsBare },
  { name: 'several-get', run: severalGet },
  { name: 'local-create', run: localCreate },
  { name: 'store-create', run: storeCreate },
  { name: 'local-idle-memory', run: localIdleMemory },
  { name: 'idle-wake', run: idleWake },
  { name: 'local-pooler', run: localPooler },
  { name: 'local-netns', run: localNetns },
  { name: 'fork-now', run: forkNow },
  { name: 'fork-pitr', run: forkPitr },
  { name: 'backup-write', run: backupWrite },
  { name: 'local-failover', run: localFailover },
  { name: 'metrics-scrape', run: metricsScrape },
  { name: 'metrics-series', run: metricsSeries },
  { name: 'density', run: density },
  { name: 'several-hosts', run: severalHosts },
  { name: 'ha-hosts', run: haHosts },
  { name: 'cli-start', run: cliStart },
];

function settingsFromEnv(env: NodeJS.ProcessEnv): BenchSettings {
  const num = (name: string, fallback: number, min: number) => {
    const v = env[name];
    if (v === undefined || v === '') return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}`);
    return n;
  };
  return {
    connections: Math.round(num('BENCH_CONNECTIONS', 32, 1)),
    rounds: Math.round(num('BENCH_ROUNDS', 5, 1)),
    warmupMs: num('BENCH_WARMUP_S', 1, 0) * 1000,
    durationMs: num('BENCH_DURATION_S', 4, 0.1) * 1000,
    initialWarmupMs: num('BENCH_JIT_WARMUP_S', 3, 0) * 1000,
    basinNodeArgs: (env.BENCH_BASIN_NODE_ARGS ?? '').split(/\s+/).filter(Boolean),
  };
}

async function main(): Promise<number> {
  const only = process.argv.slice(2);
  const unknown = only.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length > 0) {
    console.error(
      `unknown benchmark ${unknown.join(', ')}; known: ${BENCHMARKS.map((b) => b.name).join(', ')}`,
    );
    return 2;
  }
  const selected = only.length > 0 ? BENCHMARKS.filter((b) => only.includes(b.name)) : BENCHMARKS;
  const settings = settingsFromEnv(process.env);
  const tmpDir = mkdtempSync(join(tmpdir(), 'basin-bench-'));
  const cleanup = async () => {
    await stopAllChildren();
    rmSync(tmpDir, { recursive: true, force: true });
  };
  let interrupted = false;
  process.once('SIGINT', () => {
    interrupted = true;
    console.error('\ninterrupted: stopping the servers');
    void cleanup().finally(() => process.exit(130));
  });
  process.once('SIGTERM', () => void cleanup().finally(() => process.exit(143)));
  process.once('exit', killAllChildrenNow);

  console.log(machineSummary());
  const started = Date.now();
  const outcomes: { name: string; outcome?: BenchOutcome; error?: unknown }[] = [];
  try {
    for (const b of selected) {
      try {
        outcomes.push({ name: b.name, outcome: await b.run({ settings, tmpDir }) });
      } catch (error) {
        outcomes.push({ name: b.name, error });
        if (interrupted) break;
        console.error(
          `\nbenchmark ${b.name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        );
      }
    }
  } finally {
    await cleanup();
  }

  heading(`summary (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  for (const { name, outcome } of outcomes) {
    if (!outcome) console.log(`${name}: FAILED (see above)`);
    else if (!outcome.metTarget) warn(`${name} missed its target`);
  }
  for (const { outcome } of outcomes) if (outcome) console.log(outcome.headline);
  return outcomes.some((o) => o.error !== undefined) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
