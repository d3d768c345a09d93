// Benchmark: many services on one host (issue 25, density). Targets: at least
// 2 creates/s sustained with backups on, at most 50 MB of disk per empty
// service (its data, WAL, archive and first backup), API p99 under 50 ms for
// GET one and for list while creates and backups run.
//
// Basin runs as shipped (`node dist/main.js --driver local`, root, service
// networks and repository servers on) with `--idle-suspend-after`; it
// creates BENCH_DENSITY_N `shared` POSTGRES services, BENCH_DENSITY_INFLIGHT
// at a time, each until READY, while one client calls GET one (a random
// service made so far) and list (GET /services) one after the other: their
// latencies are the API's under load. The create rate counts from the first
// POST until every service is READY, and again until each first full backup
// is in its repository (a backup directory `…F` appears): "with backups on".
// Then, with every service left idle:
// - memory: PSS (/proc/<pid>/smaps_rollup) of every process of the
//   installation's service users (PostgreSQL, pgBackRest servers), summed,
//   per service: once right after the creates (running) and once after all
//   have suspended;
// - disk: `du` of the installation's local/ directory, split into data
//   (pgdata without pg_wal), WAL (pg_wal), archive and backups (the
//   repositories' archive/ and backup/), and the rest (the template,
//   spool, logs…), per service;
// - wake: BENCH_DENSITY_WAKES suspended services, connect → first query
//   answered (TLS verify-full), p50/p99.
// Everything is removed at the end (the harness's clean-up of the
// installation: processes, users, cgroups, networks, directories).
//
// Settings: BENCH_DENSITY_N (60), BENCH_DENSITY_INFLIGHT (4),
// BENCH_DENSITY_WAKES (10), BENCH_DENSITY_DIR (a directory to run in, e.g. an
// XFS volume with reflinks; the run's temporary directory by default),
// BENCH_DENSITY_PORTS (61000-64999 when N needs more ports than the
// installation's block), BENCH_DENSITY_NETWORK (a service network for more
// services than the installation's /24 holds, e.g. 198.19.192.0/18),
// BENCH_DENSITY_FLAGS (more flags for Basin, e.g. "--engine-slots 8").

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { InstallationPaths } from '../test/harness/installation-paths.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';
import {
  installationOf,
  claimDataDir,
  LocalBasin,
  postmasterPid,
  releaseDataDir,
} from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, percentile, table, warn } from './report.js';

const TARGET_RATE = 2;
const TARGET_DISK_MB = 50;
const TARGET_P99_MS = 50;
const IDLE = '20s';

interface Made {
  id: string;
  password: string;
  port: number;
}

export async function density(ctx: BenchContext): Promise<BenchOutcome> {
  const n = envInt('BENCH_DENSITY_N', 60);
  const inflight = envInt('BENCH_DENSITY_INFLIGHT', 4);
  const wakes = Math.min(n, envInt('BENCH_DENSITY_WAKES', 10));
  heading(`density: ${n} shared services on one host, ${inflight} creates at a time`);
  const base = process.env.BENCH_DENSITY_DIR;
  const runDir = base ? mkdtempSync(join(base, 'basin-density-')) : undefined;
  const here: BenchContext = runDir ? { ...ctx, tmpDir: runDir } : ctx;
  const dataDir = await claimDataDir(here);
  const inst = installationOf(dataDir);
  const flags = ['--idle-suspend-after', IDLE];
  if (n > inst.portRange.max - inst.portRange.min - 2) {
    flags.push('--port-range', process.env.BENCH_DENSITY_PORTS ?? '61000-64999');
  }
  flags.push(...(process.env.BENCH_DENSITY_FLAGS ?? '').split(/\s+/).filter(Boolean));
  if (process.env.BENCH_DENSITY_NETWORK) {
    flags.push('--service-network', process.env.BENCH_DENSITY_NETWORK);
  }
  const usedBefore = usedKb(dataDir);
  let basin: LocalBasin | undefined;
  try {
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'density.log'),
      ctx.settings.basinNodeArgs,
      flags,
    );
    const b = basin;
    const local = join(b.dataDir, 'local');
    // The template is built in the background: the first create waits for it.
    const made: Made[] = [];
    const loads: number[] = [];
    const getMs: number[] = [];
    const listMs: number[] = [];
    let creating = true;
    const prober = (async () => {
      while (creating) {
        const pick = made[Math.floor(Math.random() * made.length)];
        if (!pick) {
          await sleep(100);
          continue;
        }
        let t = performance.now();
        await b.get(pick.id);
        getMs.push(performance.now() - t);
        t = performance.now();
        const res = await b.request('GET', '');
        if (res.status !== 200) throw new Error(`list answered ${res.status}: ${res.text}`);
        listMs.push(performance.now() - t);
        await sleep(20);
      }
    })();
    const first = await b.createWithPassword(body(0));
    await b.waitReady(first.id, 100, 300_000);
    made.push(first);
    const began = performance.now();
    let next = 1;
    const worker = async () => {
      while (next < n) {
        const i = next++;
        const m = await b.createWithPassword(body(i));
        await b.waitReady(m.id, 200, 600_000);
        made.push(m);
        if (made.length % 10 === 0) {
          loads.push(loadavg()[0] as number);
          console.log(
            `  ${made.length}/${n} READY at ${fixed((performance.now() - began) / 1000, 1)} s, ` +
              `load ${fixed(loads.at(-1) as number, 2)}`,
          );
        }
      }
    };
    await Promise.all(Array.from({ length: inflight }, worker));
    const readyS = (performance.now() - began) / 1000;
    // Until every first backup is stored; the prober keeps running meanwhile.
    const deadline = Date.now() + 30 * 60_000;
    while (fullBackups(local) < n && Date.now() < deadline) await sleep(500);
    const backedUpS = (performance.now() - began) / 1000;
    const backups = fullBackups(local);
    creating = false;
    await prober;
    const rate = (n - 1) / readyS;
    const rateBackedUp = (n - 1) / backedUpS;

    // Services created early may have suspended already (idle longer than
    // IDLE while the rest were made): count the ones whose postmaster runs.
    const awake = made.filter((m) => postmasterPid(b.pgdata(m.id)) !== undefined).length;
    const running = await servicePss(inst.serviceUids);
    const diskRunning = diskSplit(local);
    // Until all have suspended (their postmasters gone, the API says so).
    const sleepDeadline = Date.now() + 10 * 60_000;
    for (;;) {
      const asleep = (await Promise.all(made.map((m) => b.get(m.id)))).filter(
        (s) => (s as { idle?: { state?: string } } | undefined)?.idle?.state === 'suspended',
      ).length;
      if (asleep === made.length) break;
      if (Date.now() > sleepDeadline) throw new Error(`${asleep}/${n} suspended after 10 min`);
      await sleep(2_000);
    }
    const suspended = await servicePss(inst.serviceUids);
    // A running service's PSS: what the awake ones held beyond what each
    // suspended one still holds (its repository server).
    const perAwakeKb =
      awake > 0 ? (running.pssKb - (suspended.pssKb / n) * (n - awake)) / awake : NaN;
    const disk = diskSplit(local);
    // du counts a reflinked block in every file that shares it: what the
    // file system really gave the run is its used space, before and after
    // (others writing to it meanwhile count too).
    const fsKb = usedKb(dataDir) - usedBefore;

    const ca = readFileSync(new InstallationPaths(b.dataDir).caCert(), 'utf8');
    const wakeMs: number[] = [];
    for (const m of made.slice(0, wakes)) wakeMs.push(await firstQuery(m, ca));

    const s = (xs: number[]) => [...xs].sort((x, y) => x - y);
    const [g, l, w] = [s(getMs), s(listMs), s(wakeMs)];
    const mb = (kb: number) => fixed(kb / 1024 / n, 1);
    console.log(`\ndisk per service (du of ${local}, MB; the template counted once, in rest):`);
    table(
      ['when', 'data', 'WAL', 'archive', 'backups', 'rest', 'total'],
      [
        ['running', ...diskCells(diskRunning, n)],
        ['suspended', ...diskCells(disk, n)],
      ],
    );
    console.log(
      `file system's used space grew by ${mb(fsKb)} MB per service (reflinks shared once)`,
    );
    console.log(`\nmemory of the services' processes (PSS, MB per service):`);
    table(
      ['when', 'services awake', 'processes', 'pss MB/service'],
      [
        ['after the creates', String(awake), String(running.processes), mb(running.pssKb)],
        ['all suspended', '0', String(suspended.processes), mb(suspended.pssKb)],
      ],
    );
    console.log(`an awake service: ${fixed(perAwakeKb / 1024, 1)} MB (PSS)`);
    const diskMb = Math.min(disk.totalKb, fsKb) / 1024 / n;
    const p99 = Math.max(percentile(g, 99), percentile(l, 99));
    console.log(
      `\ncreates: ${n - 1} READY in ${fixed(readyS, 1)} s (${fixed(rate, 2)}/s), ` +
        `${backups} first backups stored after ${fixed(backedUpS, 1)} s (${fixed(rateBackedUp, 2)}/s); ` +
        `GET one p50 ${fixed(percentile(g, 50), 1)} / p99 ${fixed(percentile(g, 99), 1)} ms ` +
        `(${g.length}), list p50 ${fixed(percentile(l, 50), 1)} / p99 ${fixed(percentile(l, 99), 1)} ms ` +
        `(${l.length}); wake p50 ${fixed(percentile(w, 50))} / p99 ${fixed(percentile(w, 99))} ms ` +
        `(${w.length}); load median ${fixed(median(loads), 2)}`,
    );
    const headline =
      `density (${n}): ${fixed(rateBackedUp, 2)} creates/s with backups (${fixed(rate, 2)}/s to READY; ` +
      `target ≥ ${TARGET_RATE}), ${fixed(diskMb, 1)} MB disk/service (du ${mb(disk.totalKb)}; ≤ ${TARGET_DISK_MB}), ` +
      `PSS ${fixed(perAwakeKb / 1024, 1)} MB awake / ${mb(suspended.pssKb)} MB suspended, ` +
      `API p99 GET ${fixed(percentile(g, 99), 1)} / list ${fixed(percentile(l, 99), 1)} ms ` +
      `(< ${TARGET_P99_MS}), wake p50 ${fixed(percentile(w, 50))} / p99 ${fixed(percentile(w, 99))} ms ` +
      `(load ${fixed(median(loads), 2)})`;
    console.log(headline);
    const met = rateBackedUp >= TARGET_RATE && diskMb <= TARGET_DISK_MB && p99 < TARGET_P99_MS;
    if (!met) warn('density: a target is not met (above).');
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
    if (runDir) rmSync(runDir, { recursive: true, force: true });
  }
}

function body(i: number) {
  return {
    name: `bench-density-${i}`,
    cpu_millis: 'shared',
    memory_gbs: 'shared',
    addons: [],
  };
}

/** Connect → first query answered, TLS verify-full as `localhost` (waking it when suspended). */
async function firstQuery(m: Made, ca: string): Promise<number> {
  const began = performance.now();
  const client = new pg.Client({
    host: '127.0.0.1',
    port: m.port,
    user: 'tsdbadmin',
    database: 'tsdb',
    password: m.password,
    ssl: { ca, servername: 'localhost', rejectUnauthorized: true },
    connectionTimeoutMillis: 60_000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return performance.now() - began;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The used space of the file system `path` is on, in KiB. */
function usedKb(path: string): number {
  const s = statfsSync(join(path, '..'));
  return ((s.blocks - s.bfree) * s.bsize) / 1024;
}

/** Full backups stored in the installation's repositories (pgBackRest names them `<date>-<time>F`). */
function fullBackups(local: string): number {
  let count = 0;
  for (const top of ['repos', 'backup']) {
    for (const id of ls(join(local, top))) {
      for (const stanza of ls(join(local, top, id, 'repo', 'backup'))) {
        count += ls(join(local, top, id, 'repo', 'backup', stanza)).some((f) => /F$/.test(f))
          ? 1
          : 0;
      }
    }
  }
  return count;
}

function ls(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

interface Disk {
  dataKb: number;
  walKb: number;
  archiveKb: number;
  backupsKb: number;
  totalKb: number;
}

/** `du` of the parts, in KiB: what the file system allocated (reflinked blocks count in each). */
function diskSplit(local: string): Disk {
  const du = (pattern: string): number => {
    const out = execFileSync('sh', ['-c', `du -sck ${pattern} 2>/dev/null | tail -1`], {
      encoding: 'utf8',
    });
    return Number(out.split(/\s/)[0]) || 0;
  };
  const q = local.replace(/'/g, `'\\''`);
  const pgdata = du(`'${q}'/instances/*/*/pgdata`);
  const walKb = du(`'${q}'/instances/*/*/pgdata/pg_wal`);
  const archiveKb = du(`'${q}'/repos/*/repo/archive '${q}'/backup/*/repo/archive`);
  const backupsKb = du(`'${q}'/repos/*/repo/backup '${q}'/backup/*/repo/backup`);
  return { dataKb: pgdata - walKb, walKb, archiveKb, backupsKb, totalKb: du(`'${q}'`) };
}

function diskCells(d: Disk, n: number): string[] {
  const rest = d.totalKb - d.dataKb - d.walKb - d.archiveKb - d.backupsKb;
  return [d.dataKb, d.walKb, d.archiveKb, d.backupsKb, rest, d.totalKb].map((kb) =>
    fixed(kb / 1024 / n, 1),
  );
}

/** The summed PSS of every process whose real uid is in `uids` (the services' and repositories' users). */
async function servicePss(uids: {
  min: number;
  max: number;
}): Promise<{ processes: number; pssKb: number }> {
  let processes = 0;
  let pssKb = 0;
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = await readFile(`/proc/${name}/status`, 'utf8');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      if (!(uid >= uids.min && uid <= uids.max)) continue;
      const rollup = await readFile(`/proc/${name}/smaps_rollup`, 'utf8');
      pssKb += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
      processes++;
    } catch {
      // Exited meanwhile.
    }
  }
  return { processes, pssKb };
}
