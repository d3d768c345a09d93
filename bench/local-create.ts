// Benchmark: how long `POST /services` takes to give a READY service on the
// local driver (polling GET, as a client would), against the floor of what it
// must do on this machine: copy the template cluster and start PostgreSQL on
// the copy. Target: Basin's median within 1.3x the floor's (issue 25).
//
// Basin runs as `node dist/main.js --driver local` on a fresh data directory. Its
// template is built in the background at start; one service is created and
// deleted first, so that neither the build nor cold caches are counted.
// Then, in alternating rounds: Basin creates a POSTGRES service (timed until
// GET says READY, then deleted, untimed), the floor copies the template with
// `cp -a` and `chown -R` (as the driver does) and starts the same postgres
// binary on the copy until postmaster.pid says 'ready' (timed, then stopped
// and removed, untimed); and the same for TIMESERIESDB against a floor that
// preloads timescaledb (its row is shown, the target is POSTGRES's). A
// `sync` (untimed) comes before each, and while Basin works, its files are
// watched to split its time into phases: until the clone is in place, until
// postgres is ready, until the API says READY.
//
// The floor runs as the template's owner (the `postgres` OS user). When Basin
// is root, each service runs as an OS user of its own, made for it and
// deleted with it (src/drivers/local/host/service-users.ts): making and removing
// such a user is Basin's work, not the floor's, and a deleted service's uid
// is not borrowed (the next service may get it, and Basin kills every process
// of a uid whose service it deletes). The chown -R costs the floor what the
// driver's chown to the service's user costs it.

import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { chown, mkdir, rm } from 'node:fs/promises';
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
import { freePort } from '../test/harness/postmaster.js';
import { type BenchOutcome, fixed, heading, median, percentile, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';

const TARGET = 1.3;
const execFileP = promisify(execFile);

/** The service bodies of the two rows; `addons: []` is POSTGRES, no addons TIMESERIESDB. */
const BODIES: Record<'POSTGRES' | 'TIMESERIESDB', Omit<ServiceBody, 'name'>> = {
  POSTGRES: { cpu_millis: 'shared', memory_gbs: 'shared', addons: [] },
  TIMESERIESDB: { cpu_millis: 'shared', memory_gbs: 'shared' },
};
type Kind = keyof typeof BODIES;

/** One timed creation: the total, and the parts spent on the POST, or on copying and chowning. */
interface Timing {
  ms: number;
  postMs?: number;
  /** When polling first saw the clone in place, and postgres ready (ms after the POST). */
  clonedMs?: number;
  pgReadyMs?: number;
  copyMs?: number;
  chownMs?: number;
}

/** What the floor runs: Basin's postgres binary (read from a running cluster) as the template's owner. */
interface Floor {
  postgres: string;
  uid: number;
  gid: number;
  template: string;
  /** The uid the warm-up service ran as: not the template's when services have OS users of their own. */
  serviceUid: number;
  /** A directory for the floor's copies, inside the benchmark's data directory. */
  root: string;
}

export async function localCreate(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_LOCAL_ROUNDS', 7, 1);
  const pollMs = envInt('BENCH_LOCAL_POLL_MS', 15, 1);
  const syncFirst = process.env.BENCH_LOCAL_SYNC !== '0';
  heading('POST /services to READY (local driver) vs copying the template + starting postgres');

  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    const started = Date.now();
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'local-create.log'),
      ctx.settings.basinNodeArgs,
    );
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
        `(template build + one TIMESERIESDB service); the floor runs ${floor.postgres} as ` +
        `the template's owner, uid ${floor.uid}` +
        (floor.serviceUid !== floor.uid
          ? ` (services run as OS users of their own, e.g. uid ${floor.serviceUid})`
          : '') +
        `; ` +
        `${rounds} rounds, GET polled every ${pollMs} ms` +
        (syncFirst ? ', a sync before each timed creation' : ''),
    );

    const series: Record<string, number[]> = {};
    const timings: Record<string, Timing[]> = {};
    const rows: string[][] = [];
    const record = (round: number, what: string, t: Timing) => {
      (series[what] ??= []).push(t.ms);
      (timings[what] ??= []).push(t);
      rows.push([
        String(round),
        what,
        fixed(t.ms, 0),
        fixed(t.postMs ?? NaN, 0),
        fixed(t.clonedMs ?? NaN, 0),
        fixed(t.pgReadyMs ?? NaN, 0),
        fixed(t.copyMs ?? NaN, 0),
        fixed(t.chownMs ?? NaN, 0),
      ]);
    };
    let n = 0;
    for (let round = 1; round <= rounds; round++) {
      for (const kind of ['POSTGRES', 'TIMESERIESDB'] as const) {
        // Untimed: what the previous side wrote and removed goes to disk first,
        // so that neither side pays for the other's writeback (on this kind
        // of machine, copying ~1000 files costs 3-10x more behind it).
        if (syncFirst) await execFileP('sync');
        record(round, `basin ${kind}`, await basinCreate(basin, kind, `bench-${++n}`, pollMs));
        const preload =
          kind === 'TIMESERIESDB' ? ['-c', 'shared_preload_libraries=timescaledb'] : [];
        if (syncFirst) await execFileP('sync');
        record(round, `floor ${kind}`, await startFloor(floor, ++n, preload));
      }
    }
    console.log('');
    table(['round', 'what', 'ms', 'POST', 'cloned at', 'pg ready at', 'cp -a', 'chown -R'], rows);

    const summary: string[][] = [];
    for (const [what, xs] of Object.entries(series)) {
      const sorted = [...xs].sort((a, b) => a - b);
      // The phases, each from the end of the one before: until the copy is
      // in place, until postgres is ready, until READY (the floor's ends there).
      const ts = timings[what] ?? [];
      const copied = ts.map((t) => t.clonedMs ?? (t.copyMs ?? NaN) + (t.chownMs ?? NaN));
      const up = ts.map((t) => t.pgReadyMs ?? t.ms);
      summary.push([
        what,
        fixed(median(xs), 0),
        fixed(percentile(sorted, 90), 0),
        fixed(sorted[0] ?? NaN, 0),
        fixed(sorted.at(-1) ?? NaN, 0),
        fixed(median(copied), 0),
        fixed(median(up.map((u, i) => u - (copied[i] as number))), 0),
        fixed(median(ts.map((t, i) => t.ms - (up[i] as number))), 0),
      ]);
    }
    console.log('');
    table(
      [
        'what',
        'median ms',
        'p90 ms',
        'min ms',
        'max ms',
        'to copied',
        '+ to pg ready',
        '+ to READY',
      ],
      summary,
    );
    const ratio = (kind: Kind) =>
      median(series[`basin ${kind}`] ?? []) / median(series[`floor ${kind}`] ?? []);
    console.log(
      [
        `\nbasin: POST to READY; polling (every ${pollMs} ms) also noted when the clone was in`,
        'place and when postgres was ready. floor POSTGRES: cp -a + chown -R of the template,',
        "then postgres with the template's settings until postmaster.pid says ready; floor",
        'TIMESERIESDB: the same with timescaledb preloaded (Basin also creates the extension).',
        'The last three columns are the medians of the phases, each from the end of the one',
        "before; Basin's first also holds the POST and making the service's OS user (if root).",
      ].join('\n'),
    );
    for (const kind of ['POSTGRES', 'TIMESERIESDB'] as const) {
      const floors = series[`floor ${kind}`] ?? [];
      const paired = (series[`basin ${kind}`] ?? []).map((b, i) => b / (floors[i] ?? NaN));
      console.log(
        `per-round ratios basin/floor ${kind}: ${paired.map((x) => x.toFixed(2)).join(' ')} ` +
          `(median ${median(paired).toFixed(2)})`,
      );
    }
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
): Promise<Timing> {
  const t0 = performance.now();
  const id = await basin.create({ name, ...BODIES[kind] });
  const postMs = performance.now() - t0;
  const pgdata = basin.pgdata(id);
  let clonedMs: number | undefined;
  let pgReadyMs: number | undefined;
  await basin.waitReady(id, pollMs, 60_000, () => {
    clonedMs ??= existsSync(join(pgdata, 'PG_VERSION')) ? performance.now() - t0 : undefined;
    pgReadyMs ??= postmasterPid(pgdata)?.status === 'ready' ? performance.now() - t0 : undefined;
  });
  const ms = performance.now() - t0;
  await basin.deleteAndWait(id);
  return { ms, postMs, clonedMs, pgReadyMs };
}

function floorOf(basin: LocalBasin, serviceId: string): Floor {
  const pm = postmasterPid(basin.pgdata(serviceId));
  if (!pm) throw new Error(`no postmaster.pid for service ${serviceId}`);
  const status = readFileSync(`/proc/${pm.pid}/status`, 'utf8');
  const id = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
  const template = basin.templatePgdata;
  const owner = statSync(template);
  if (owner.uid === 0) throw new Error(`the template ${template} belongs to root`);
  return {
    postgres: readlinkSync(`/proc/${pm.pid}/exe`),
    uid: owner.uid,
    gid: owner.gid,
    template,
    serviceUid: id('Uid'),
    root: join(basin.dataDir, 'bench-floor'),
  };
}

/**
 * The floor, timed: `cp -a` of the template, `chown -R` of the copy to the
 * user it runs as (the driver chowns each copy to the service's user), and
 * postgres on the copy, as that user, until it is ready. Then, untimed, an
 * immediate shutdown and the removal of the copy.
 */
async function startFloor(floor: Floor, n: number, extra: readonly string[]): Promise<Timing> {
  const dir = join(floor.root, String(n));
  const pgdata = join(dir, 'pgdata');
  const sockets = join(dir, 's');
  await mkdir(dir, { mode: 0o711 });
  await mkdir(sockets, { mode: 0o700 });
  await chown(sockets, floor.uid, floor.gid);
  const port = await freePort();
  const logFd = openSync(join(dir, 'postgres.log'), 'a', 0o600);
  let exited: Promise<number | string> | undefined;
  let pid: number | undefined;
  try {
    const t0 = performance.now();
    await execFileP('cp', ['-a', floor.template, pgdata]);
    const copyMs = performance.now() - t0;
    // As the driver does (node-files.ts): -P, never following a link.
    await execFileP('chown', ['-R', '-P', `${floor.uid}:${floor.gid}`, '--', pgdata]);
    const chownMs = performance.now() - t0 - copyMs;
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
    return { ms: performance.now() - t0, copyMs, chownMs };
  } finally {
    closeSync(logFd);
    if (pid !== undefined && exited) {
      signal(pid, 'SIGQUIT'); // immediate shutdown: the copy is removed anyway
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
