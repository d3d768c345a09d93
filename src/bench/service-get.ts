// Benchmark: requests per second of GET /v1/projects/{p}/services/{s} with a
// Bearer key, against a bare node:http server answering the same JSON, side
// by side in one run. Target: Basin at least 0.6 of the bare server.
//
// Each server runs in its own child process; the load generator runs here.
// The two are measured in alternating rounds (bare, basin, bare, basin, ...)
// on fresh keep-alive connections, and the medians are compared, so that a
// noisy moment of the machine hits both sides alike.

import { mkdtempSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { startChild } from './children.js';
import { type LoadResult, runLoad } from './load.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './run.js';

const TARGET = 0.6;

/** The table's measured columns: title, value, decimals. */
const COLUMNS: [string, (r: LoadResult) => number | undefined, number][] = [
  ['req/s', (r) => r.rps, 0],
  ['p50 ms', (r) => r.latencyMs.p50, 2],
  ['p99 ms', (r) => r.latencyMs.p99, 2],
  ['server cpu', (r) => r.cpu.watched[0], 2],
  ['cpu µs/req', (r) => ((r.cpu.watched[0] ?? NaN) / r.rps) * 1e6, 0],
  ['loadgen cpu', (r) => r.cpu.self, 2],
  ['machine cpu', (r) => r.cpu.machine, 2],
];
const API_KEY = 'bench-bootstrap-key-0123456789';

export async function serviceGetVsBare(ctx: BenchContext): Promise<BenchOutcome> {
  const s = ctx.settings;
  heading('GET /v1/projects/{p}/services/{s} (Bearer auth) vs bare node:http, same JSON');

  const basin = startChild(
    './basin-server.js',
    { BENCH_DATA_DIR: mkdtempSync(join(ctx.tmpDir, 'basin-')), BENCH_API_KEY: API_KEY },
    s.basinNodeArgs,
  );
  const bare = startChild('./bare-server.js');
  try {
    const ready = await basin.message<{ port: number; projectId: string; serviceId: string }>(
      'ready',
    );
    const path = `/v1/projects/${ready.projectId}/services/${ready.serviceId}`;
    const headers = { Authorization: `Bearer ${API_KEY}`, Accept: 'application/json' };

    const res = await fetch(`http://127.0.0.1:${ready.port}${path}`, { headers });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${body}`);
    if ((JSON.parse(body) as { status?: string }).status !== 'READY') {
      throw new Error(`the service is not READY: ${body}`);
    }
    bare.send({ type: 'body', body });
    const bareReady = await bare.message<{ port: number }>('ready');

    const targets = {
      bare: { port: bareReady.port, pid: bare.pid },
      basin: { port: ready.port, pid: basin.pid },
    };
    const load = async (name: keyof typeof targets, warmupMs: number, durationMs: number) => {
      const t = targets[name];
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
      check(name, r, ready.serviceId);
      return r;
    };

    console.log(
      `service ${ready.serviceId}, body ${Buffer.byteLength(body)} bytes; ` +
        `${s.connections} keep-alive connections, 1 request in flight each; ` +
        `${s.rounds} rounds of ${s.warmupMs / 1000} s warmup + ${s.durationMs / 1000} s measured ` +
        `per server, after ${s.initialWarmupMs / 1000} s of JIT warmup each`,
    );
    await load('bare', 0, s.initialWarmupMs);
    await load('basin', 0, s.initialWarmupMs);

    const rows: string[][] = [];
    const results: Record<keyof typeof targets, LoadResult[]> = { bare: [], basin: [] };
    for (let round = 1; round <= s.rounds; round++) {
      for (const name of ['bare', 'basin'] as const) {
        const r = await load(name, s.warmupMs, s.durationMs);
        results[name].push(r);
        rows.push([String(round), name, ...COLUMNS.map(([, pick, d]) => fixed(pick(r) ?? NaN, d))]);
      }
    }
    const mid = (name: keyof typeof targets, pick: (r: LoadResult) => number | undefined) =>
      median(results[name].map(pick).filter((v): v is number => v !== undefined));
    for (const name of ['bare', 'basin'] as const) {
      rows.push(['median', name, ...COLUMNS.map(([, pick, d]) => fixed(mid(name, pick), d))]);
    }
    console.log('');
    table(['round', 'server', ...COLUMNS.map(([title]) => title)], rows);

    const ratio = mid('basin', (r) => r.rps) / mid('bare', (r) => r.rps);
    const perRound = results.basin.map((r, i) => r.rps / (results.bare[i] as LoadResult).rps);
    console.log(
      `\ncpu columns: cores busy during the measured window, of ${cpus().length}; ` +
        `machine = everything, including the kernel's loopback networking and other programs`,
    );
    console.log(`per-round ratios: ${perRound.map((x) => x.toFixed(2)).join(' ')}`);
    const others = median(
      [...results.bare, ...results.basin]
        .map((r) => (r.cpu.machine ?? NaN) - (r.cpu.watched[0] ?? NaN) - r.cpu.self)
        .filter(Number.isFinite),
    );
    if (others > 0.6) {
      warn(
        `${others.toFixed(2)} cores went to neither server nor load generator (kernel networking ` +
          `and other programs): the machine was busy, so the figures are noisy.`,
      );
    }
    const bareCpu = mid('bare', (r) => r.cpu.watched[0]);
    if (bareCpu < 0.9) {
      warn(
        `the bare server used only ${bareCpu.toFixed(2)} of a core: it was held back by the load ` +
          `generator or by other programs, not by its own work, so the ratio flatters Basin.`,
      );
    }
    const cost = (name: keyof typeof targets) =>
      mid(name, (r) => ((r.cpu.watched[0] ?? NaN) / r.rps) * 1e6);
    if (Number.isFinite(cost('basin')) && Number.isFinite(cost('bare'))) {
      console.log(
        `server cpu per request: basin ${cost('basin').toFixed(0)} µs, bare ${cost('bare').toFixed(0)} µs ` +
          `(bare/basin ${(cost('bare') / cost('basin')).toFixed(2)}: the ratio to expect when ` +
          `each server has a core to itself)`,
      );
    }
    const headline = `ratio basin/bare: ${ratio.toFixed(2)} (target >= ${TARGET})`;
    console.log(headline);
    if (ratio < TARGET) warn(`Basin is below the target of ${TARGET} of the bare server.`);
    return { headline, metTarget: ratio >= TARGET };
  } finally {
    await Promise.all([basin.stop(), bare.stop()]);
  }
}

function check(name: string, r: LoadResult, serviceId: string): void {
  if (r.non200.size > 0) {
    const counts = [...r.non200].map(([status, n]) => `${n} x ${status}`).join(', ');
    throw new Error(`${name}: non-200 responses: ${counts}`);
  }
  if (r.sampleBody === undefined) throw new Error(`${name}: no response at all`);
  const got = (JSON.parse(r.sampleBody) as { service_id?: string }).service_id;
  if (got !== serviceId) throw new Error(`${name}: answered service ${got}, not ${serviceId}`);
}
