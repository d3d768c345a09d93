// Benchmark: how long `POST /services` takes to give a READY service on the
// local driver (polling GET, as a client would), against the floor of what it
// must do on this machine: copy the template cluster and start PostgreSQL on
// the copy. Target: Basin's median within 2.5x the floor's.
//
// Basin runs in a child (local-server.ts) on a fresh data directory. Its
// template is built in the background at start; one service is created and
// deleted first, so that neither the build nor cold caches are counted.
// Then, in alternating rounds: Basin creates a POSTGRES service (timed until
// GET says READY, then deleted, untimed), the floor copies the template with
// `cp -a` (as the driver does) and starts the same postgres binary on the
// copy, as the same OS user, until postmaster.pid says 'ready' (timed, then
// stopped and removed, untimed); and the same for TIMESERIESDB against a floor
// that preloads timescaledb (its row is shown, the target is POSTGRES's).

import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { chown, mkdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  claimDataDir,
  LocalBasin,
  postmasterPid,
  releaseDataDir,
  type ServiceBody,
} from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, percentile, table, warn } from './report.js';
import type { BenchContext } from './run.js';

const TARGET = 2.5;
const execFileP = promisify(execFile);

/** The service bodies of the two rows; `addons: []` is POSTGRES, no addons TIMESERIESDB. */
const BODIES: Record<'POSTGRES' | 'TIMESERIESDB', Omit<ServiceBody, 'name'>> = {
  POSTGRES: { cpu_millis: 'shared', memory_gbs: 'shared', addons: [] },
  TIMESERIESDB: { cpu_millis: 'shared', memory_gbs: 'shared' },
};
type Kind = keyof typeof BODIES;

/** The postgres binary and OS user Basin's clusters run with, read from a running one. */
interface Floor {
  postgres: string;
  uid: number;
  gid: number;
  template: string;
  /** A directory for the floor's copies, inside the benchmark's data directory. */
  root: string;
}

export async function localCreate(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_LOCAL_ROUNDS', 7, 1);
  const pollMs = envInt('BENCH_LOCAL_POLL_MS', 15, 1);
  heading('POST /services to READY (local driver) vs copying the template + starting postgres');

  const dataDir = claimDataDir(ctx, 'local-create-');
  let basin: LocalBasin | undefined;
  try {
    const started = Date.now();
    basin = await LocalBasin.start(dataDir, ctx.settings.basinNodeArgs);
    // Warm-up: waits out the template build, loads timescaledb once, and
    // shows which binary and OS user the clusters run with.
    const warm = await basin.create({ name: 'bench-warmup' });
    await basin.waitReady(warm, pollMs, 180_000);
    const floor = floorOf(basin, warm);
    await basin.deleteAndWait(warm);
    await mkdir(floor.root, { mode: 0o711 });
    await startFloor(floor, 0, ['-c', 'shared_preload_libraries=timescaledb']);
    console.log(
      `basin started and warmed up in ${((Date.now() - started) / 1000).toFixed(1)} s ` +
        `(template build + one TIMESERIESDB service); clusters run ${floor.postgres} as uid ${floor.uid}; ` +
        `${rounds} rounds, GET polled every ${pollMs} ms`,
    );

    const series: Record<string, number[]> = {};
    const rows: string[][] = [];
    const record = (round: number, what: string, ms: number) => {
      (series[what] ??= []).push(ms);
      rows.push([String(round), what, fixed(ms, 0)]);
    };
    let n = 0;
    for (let round = 1; round <= rounds; round++) {
      for (const kind of ['POSTGRES', 'TIMESERIESDB'] as const) {
        record(round, `basin ${kind}`, await basinCreate(basin, kind, `bench-${++n}`, pollMs));
        const preload = kind === 'TIMESERIESDB' ? ['-c', 'shared_preload_libraries=timescaledb'] : [];
        record(round, `floor ${kind}`, await startFloor(floor, ++n, preload));
      }
    }
    console.log('');
    table(['round', 'what', 'ms'], rows);

    const summary: string[][] = [];
    for (const [what, xs] of Object.entries(series)) {
      const sorted = [...xs].sort((a, b) => a - b);
      summary.push([
        what,
        fixed(median(xs), 0),
        fixed(percentile(sorted, 90), 0),
        fixed(sorted[0] ?? NaN, 0),
        fixed(sorted.at(-1) ?? NaN, 0),
      ]);
    }
    console.log('');
    table(['what', 'median ms', 'p90 ms', 'min ms', 'max ms'], summary);
    const ratio = (kind: Kind) =>
      median(series[`basin ${kind}`] ?? []) / median(series[`floor ${kind}`] ?? []);
    console.log(
      `\nfloor POSTGRES: cp -a of the template + postgres with the template's settings until ` +
        `postmaster.pid says ready; floor TIMESERIESDB: the same with timescaledb preloaded ` +
        `(Basin also creates the extension).`,
    );
    console.log(`ratio basin/floor TIMESERIESDB: ${ratio('TIMESERIESDB').toFixed(2)} (no target)`);
    const r = ratio('POSTGRES');
    const headline =
      `create-to-READY POSTGRES: basin ${fixed(median(series['basin POSTGRES'] ?? []), 0)} ms, ` +
      `floor ${fixed(median(series['floor POSTGRES'] ?? []), 0)} ms: ratio ${r.toFixed(2)} ` +
      `(target <= ${TARGET})`;
    console.log(headline);
    const met = r <= TARGET;
    if (!met) warn(`Basin's create-to-READY is more than ${TARGET}x the floor.`);
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/** Creates a service, polls until READY (timed), then deletes it (untimed). */
async function basinCreate(
  basin: LocalBasin,
  kind: Kind,
  name: string,
  pollMs: number,
): Promise<number> {
  const t0 = performance.now();
  const id = await basin.create({ name, ...BODIES[kind] });
  await basin.waitReady(id, pollMs, 60_000);
  const ms = performance.now() - t0;
  await basin.deleteAndWait(id);
  return ms;
}

function floorOf(basin: LocalBasin, serviceId: string): Floor {
  const pm = postmasterPid(basin.pgdata(serviceId));
  if (!pm) throw new Error(`no postmaster.pid for service ${serviceId}`);
  const status = readFileSync(`/proc/${pm.pid}/status`, 'utf8');
  const id = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
  const template = basin.templatePgdata;
  const owner = statSync(template);
  const floor = {
    postgres: readlinkSync(`/proc/${pm.pid}/exe`),
    uid: id('Uid'),
    gid: id('Gid'),
    template,
    root: join(basin.dataDir, 'bench-floor'),
  };
  if (owner.uid !== floor.uid) {
    throw new Error(`the template belongs to uid ${owner.uid}, the clusters run as ${floor.uid}`);
  }
  return floor;
}

/**
 * The floor, timed: `cp -a` of the template (it keeps the owner, the OS user
 * the clusters run as) and postgres on the copy, as that user, until it is
 * ready. Then, untimed, a fast shutdown and the removal of the copy.
 */
async function startFloor(floor: Floor, n: number, extra: readonly string[]): Promise<number> {
  const dir = join(floor.root, String(n));
  const pgdata = join(dir, 'pgdata');
  const sockets = join(dir, 's');
  await mkdir(sockets, { recursive: true, mode: 0o700 });
  await chown(sockets, floor.uid, floor.gid);
  const port = await freePort();
  const logFd = openSync(join(dir, 'postgres.log'), 'a', 0o600);
  let exited: Promise<number | string> | undefined;
  let pid: number | undefined;
  try {
    const t0 = performance.now();
    await execFileP('cp', ['-a', floor.template, pgdata]);
    const child = spawn(
      floor.postgres,
      ['-D', pgdata, '-c', `port=${port}`, '-c', 'listen_addresses=127.0.0.1',
        '-c', `unix_socket_directories=${sockets}`, ...extra], // prettier-ignore
      {
        cwd: pgdata,
        detached: true,
        stdio: ['ignore', logFd, logFd],
        env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
        uid: floor.uid,
        gid: floor.gid,
      },
    );
    let gone: number | string | undefined;
    exited = new Promise((resolve) => {
      child.once('exit', (code, sig) => resolve((gone = code ?? sig ?? '?')));
      child.once('error', (err) => resolve((gone = err.message)));
    });
    pid = child.pid;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const pm = postmasterPid(pgdata);
      if (pm && pm.pid === pid && pm.status === 'ready') break;
      if (gone !== undefined || Date.now() > deadline) {
        const log = readFileSync(join(dir, 'postgres.log'), 'utf8').trim().split('\n').slice(-3);
        throw new Error(
          `floor postgres ${gone !== undefined ? `exited (${gone})` : 'not ready in 30 s'}: ${log.join(' | ')}`,
        );
      }
      await sleep(5);
    }
    return performance.now() - t0;
  } finally {
    closeSync(logFd);
    if (pid !== undefined && exited) {
      signal(pid, 'SIGINT'); // fast shutdown
      const result = await Promise.race([exited, sleep(10_000, 'timeout' as const)]);
      if (result === 'timeout') signal(pid, 'SIGKILL');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

/** A TCP port nobody listens on right now (the kernel picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

function envInt(name: string, fallback: number, min: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be a whole number >= ${min}`);
  return n;
}
