// Benchmark: a NOW fork of a service holding about 1 GB, from the request
// to READY (polling GET, as a client would), against the floor of copying
// that service's data directory with `cp -a`. Target: Basin's median within
// 1.5x the floor's.
//
// The parent is a shared POSTGRES service filled with one table of ~1 KB
// rows (md5 text, which PostgreSQL neither toasts nor compresses) up to
// BENCH_FORK_NOW_MB (1024). Then, in rounds: a `sync` (untimed), Basin forks
// it with NOW (timed until READY, then the fork is deleted, untimed: that
// also stops the fork's first backup), a `sync`, and `cp -a` of the
// parent's data directory into the same file system (timed, then removed),
// the floor the target is judged on. Its pg_wal holds up to max_wal_size
// (1 GB) of recycled segments, which a NOW fork does not copy (it needs
// only the WAL of its own backup), so a second, stricter floor copies
// every entry but pg_wal, and its ratio is shown beside.
// Basin's copy is a low-level backup copied with cp --reflink=auto
// (src/drivers/local/backups/now-copy.ts), then a recovery to its end, a promotion,
// and the fork's own password, stanza and certificate; on a copy-on-write
// file system both copies share blocks, here (ext4) they copy bytes.

import { execFile } from 'node:child_process';
import { cp, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect, readyFork, readyService, serviceFiles, startForkBasin } from './fork-bench.js';
import { claimDataDir, type LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';

const TARGET = 1.5;
const execFileP = promisify(execFile);

export async function forkNow(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_FORK_NOW_ROUNDS', 3, 1);
  const sizeMb = envInt('BENCH_FORK_NOW_MB', 1024, 1);
  heading(`NOW fork of a ~${sizeMb} MB service to READY vs cp -a of its data directory`);
  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    // A `shared` service may hold 25x its memory share (--storage-allowance):
    // a parent past a few GB would be stopped as over its allowance, so the
    // allowance is raised to three times the fill (data, WAL, its fork).
    const allowanceGb = Math.ceil((sizeMb * 3) / 1024);
    // BENCH_FORK_NOW_PROFILE=<dir>: Basin's log (at debug: each step of each
    // operation) and each timed fork's PostgreSQL log are kept there, to
    // profile a fork step by step (bench/README.md, fork-now).
    const profile = process.env.BENCH_FORK_NOW_PROFILE;
    if (profile) await mkdir(profile, { recursive: true });
    basin = await startForkBasin(
      dataDir,
      join(profile ?? ctx.tmpDir, 'fork-now.log'),
      ctx.settings.basinNodeArgs,
      [
        '--backup-schedule', '1d', '--pitr-window', '1d', '--storage-allowance', `${allowanceGb}GB`,
        ...(profile ? ['--log-level', 'debug'] : []),
      ], // prettier-ignore
    );
    const parent = await readyService(basin, {
      name: 'bench-parent',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    const filled = Date.now();
    const c = await connect(parent);
    try {
      // ~1,050 bytes a row on disk (header, pointer, 960 characters).
      await c.query(
        `CREATE TABLE big AS SELECT g, repeat(md5(g::text), 30) AS pad
           FROM generate_series(1, ${Math.round((sizeMb * 1024 * 1024) / 1050)}) g`,
      );
      // Untimed: autovacuum would otherwise visit the new table during the
      // rounds, setting hint bits and the visibility map on every page and
      // so dirtying the whole table for each fork's checkpoint.
      await c.query('VACUUM (ANALYZE) big');
    } finally {
      await c.end();
    }
    const { pgdata } = serviceFiles(basin, parent.id);
    // Untimed: one fork first. Its backup's immediate checkpoint writes out
    // what the fill left dirty, and the checkpoint recycles the fill's WAL,
    // so every timed round copies the same settled data directory.
    const warm = await readyFork(basin, parent.id, { fork_strategy: 'NOW', name: 'bench-warm' });
    await basin.deleteAndWait(warm.id, 120_000);
    // A file the running parent removes meanwhile (archive_status) makes du
    // exit 1; what it printed still counts.
    const du = (dir: string) =>
      execFileP('du', ['-sm', dir])
        .catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }))
        .then((r) => r.stdout.split('\t')[0] || '?');
    console.log(
      `parent ${parent.id} filled in ${((Date.now() - filled) / 1000).toFixed(1)} s ` +
        `(first fork ${fixed(warm.ms)} ms, untimed): its data directory holds ` +
        `${await du(pgdata)} MB, ${await du(join(pgdata, 'pg_wal'))} MB of it WAL; ${rounds} rounds`,
    );

    const basinMs: number[] = [];
    const placedMs: number[] = [];
    const floorMs: number[] = [];
    const dataMs: number[] = [];
    const rows: string[][] = [];
    const floorDir = join(dataDir, 'bench-floor');
    for (let round = 1; round <= rounds; round++) {
      await execFileP('sync');
      const fork = await readyFork(basin, parent.id, {
        fork_strategy: 'NOW',
        name: `bench-now-${round}`,
      });
      if (profile) {
        console.log(`round ${round}: fork ${fork.id}`);
        await cp(join(serviceFiles(basin, fork.id).pgdata, 'log'), join(profile, fork.id), {
          recursive: true,
        });
      }
      await basin.deleteAndWait(fork.id, 120_000);
      const f = await timedCopy(pgdata, floorDir, true);
      const d = await timedCopy(pgdata, floorDir, false);
      basinMs.push(fork.ms);
      placedMs.push(fork.placedMs);
      floorMs.push(f);
      dataMs.push(d);
      rows.push([
        String(round),
        fixed(fork.ms),
        fixed(fork.placedMs),
        fixed(fork.ms - fork.placedMs),
        fixed(f),
        fixed(d),
        (fork.ms / f).toFixed(2),
        (fork.ms / d).toFixed(2),
      ]);
    }
    console.log('');
    table(
      ['round', 'basin NOW fork ms', 'of it: copied', 'then to READY', 'cp -a ms',
        'cp -a but pg_wal ms', 'ratio', 'ratio but pg_wal'], // prettier-ignore
      rows,
    );
    const ratio = median(basinMs) / median(floorMs);
    const strict = median(basinMs) / median(dataMs);
    const headline =
      `fork-now (~${sizeMb} MB): basin ${fixed(median(basinMs))} ms ` +
      `(copied in ${fixed(median(placedMs))}), cp -a ` +
      `${fixed(median(floorMs))} ms: ratio ${ratio.toFixed(2)} (target <= ${TARGET}); ` +
      `against cp -a of all but pg_wal (${fixed(median(dataMs))} ms): ${strict.toFixed(2)}`;
    console.log(headline);
    const met = ratio <= TARGET;
    if (!met) warn(`A NOW fork takes more than ${TARGET}x cp -a of the data directory.`);
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/**
 * `cp -a` of `pgdata` (`withWal`), or of all its entries but pg_wal, into
 * `dest`, after a `sync`; timed, then removed (untimed).
 */
async function timedCopy(pgdata: string, dest: string, withWal: boolean): Promise<number> {
  // The parent runs: a file it removes while cp walks (a WAL segment's
  // archive_status, once archived: a big parent archives for minutes
  // after it is filled) fails that copy, which is then made again.
  for (let attempt = 1; ; attempt++) {
    const entries = withWal ? [] : (await readdir(pgdata)).filter((n) => n !== 'pg_wal');
    await execFileP('sync');
    const t0 = performance.now();
    try {
      if (withWal) {
        await execFileP('cp', ['-a', pgdata, dest]);
      } else {
        await mkdir(dest, { mode: 0o700 });
        await execFileP('cp', ['-a', ...entries.map((n) => join(pgdata, n)), dest]);
      }
      return performance.now() - t0;
    } catch (err) {
      if (attempt >= 5 || !/No such file or directory/.test((err as Error).message)) throw err;
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  }
}
