// Benchmark: a PITR fork of a small service, from the request to READY,
// against the bare restore done by hand with the same tools: pgBackRest
// restoring the service's backup from its repository into an empty
// directory, as the service's OS user, to the same target time, then
// PostgreSQL recovering to it and promoting itself (until postmaster.pid
// says ready). Target: Basin's median within 2x the floor's.
//
// The parent is a shared POSTGRES service with a few rows on both sides of
// the target; its first backup (taken once it is READY) is what both sides
// restore. Basin does more than the floor: it makes the parent archive its
// WAL up to now first (a commit, a segment switch, the archiver), copies
// the backup and that WAL into the fork's own stanza (the fork's user may
// not read the parent's repository, docs/security.md), restores it as the
// fork's user, and then opens the fork (its own password, access rules,
// stanza and certificate). The first fork's rows are checked.

import { execFile } from 'node:child_process';
import { chown, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  firstBackup,
  readyFork,
  readyService,
  type BenchService,
  serviceFiles,
  sql,
  startForkBasin,
} from './fork-bench.js';
import { type BarePostgres, startBarePostgres } from './bare-postgres.js';
import { claimDataDir, type LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';

const TARGET = 2;
const execFileP = promisify(execFile);

export async function forkPitr(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_FORK_PITR_ROUNDS', 5, 1);
  heading('PITR fork of a small service to READY vs pgbackrest restore + recovery + promote');
  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    basin = await startForkBasin(
      dataDir,
      join(ctx.tmpDir, 'fork-pitr.log'),
      ctx.settings.basinNodeArgs,
    );
    const parent = await readyService(basin, {
      name: 'bench-parent',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    await firstBackup(basin, parent.id);
    await sql(parent, "CREATE TABLE t AS SELECT 'before' AS v");
    await sleep(1_000);
    const target = new Date().toISOString();
    await sleep(1_000);
    await sql(parent, "INSERT INTO t VALUES ('after')");
    const files = serviceFiles(basin, parent.id);
    console.log(`parent ${parent.id}, target ${target}; ${rounds} rounds`);

    const basinMs: number[] = [];
    const floorMs: number[] = [];
    const rows: string[][] = [];
    for (let round = 1; round <= rounds; round++) {
      await execFileP('sync');
      const fork = await readyFork(basin, parent.id, {
        fork_strategy: 'PITR',
        target_time: target,
        name: `bench-pitr-${round}`,
      });
      if (round === 1) await check(fork);
      await basin.deleteAndWait(fork.id, 60_000);
      await execFileP('sync');
      const f = await floor(files, parent.id, target, join(dataDir, `bench-floor-${round}`));
      basinMs.push(fork.ms);
      floorMs.push(f.ms);
      rows.push([
        String(round),
        fixed(fork.ms),
        fixed(fork.placedMs),
        fixed(fork.ms - fork.placedMs),
        fixed(f.ms),
        fixed(f.restoredMs),
        fixed(f.ms - f.restoredMs),
        (fork.ms / f.ms).toFixed(2),
      ]);
    }
    console.log('');
    table(
      ['round', 'basin PITR fork ms', 'of it: restored', 'then to READY',
        'bare ms', 'of it: restored', 'then recovered', 'ratio'], // prettier-ignore
      rows,
    );
    const ratio = median(basinMs) / median(floorMs);
    const headline =
      `fork-pitr: basin ${fixed(median(basinMs))} ms, bare restore ${fixed(median(floorMs))} ms: ` +
      `ratio ${ratio.toFixed(2)} (target <= ${TARGET})`;
    console.log(headline);
    const met = ratio <= TARGET;
    if (!met) warn(`A PITR fork takes more than ${TARGET}x the bare restore.`);
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/** The fork holds the row before the target, not the one after. */
async function check(fork: BenchService): Promise<void> {
  const got = (await sql(fork, 'SELECT v FROM t')).map((r) => r.v);
  if (JSON.stringify(got) !== '["before"]')
    throw new Error(`the fork holds ${JSON.stringify(got)}`);
}

/**
 * The bare restore, timed: pgbackrest restore of the parent's stanza (its
 * configuration, its repository) to `target` into `dir`, as the parent's
 * OS user, then postgres on it, as that user, with no client listener and
 * no archiving, until it has promoted itself. Stopped and removed, untimed.
 */
async function floor(
  files: ReturnType<typeof serviceFiles>,
  stanza: string,
  target: string,
  dir: string,
): Promise<{ ms: number; restoredMs: number }> {
  const pgdata = join(dir, 'pgdata');
  const sockets = join(dir, 's');
  for (const d of [dir, pgdata, sockets]) {
    await mkdir(d, { mode: 0o700 });
    await chown(d, files.uid, files.gid);
  }
  const as = { uid: files.uid, gid: files.gid };
  const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' };
  let pg: BarePostgres | undefined;
  try {
    const t0 = performance.now();
    await execFileP(
      'pgbackrest',
      [`--config=${files.conf}`, `--stanza=${stanza}`, `--pg1-path=${pgdata}`, '--type=time',
        `--target=${pgTime(target)}`, '--target-action=promote', '--log-level-stderr=error',
        'restore'], // prettier-ignore
      { ...as, env, cwd: dir },
    ).catch((err: { stderr?: string; stdout?: string }) => {
      throw new Error(`the bare restore failed: ${err.stderr ?? ''}${err.stdout ?? ''}`);
    });
    const restoredMs = performance.now() - t0;
    pg = startBarePostgres({ pgdata, sockets, ...as });
    await pg.ready(120_000);
    return { ms: performance.now() - t0, restoredMs };
  } finally {
    await pg?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/** recovery_target_time as PostgreSQL's check of it accepts it (no T, no Z). */
function pgTime(iso: string): string {
  return iso.replace('T', ' ').replace('Z', '+00');
}
