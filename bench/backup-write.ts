// Benchmark: a service's write throughput while Basin takes a full backup of
// it, against the same without. pgbench's simple-update script (one UPDATE,
// one SELECT, one INSERT a transaction) over TLS, as a client of the
// service, for BENCH_BACKUP_SECONDS (5) at a time. Target: with a backup,
// at least 0.8 of the transactions per second without.
//
// The service is a shared POSTGRES one (a full backup of a shared service
// uses one process), initialised by pgbench at scale BENCH_BACKUP_SCALE
// (30: ~450 MB, so that a backup outlasts a run). Basin runs with
// `--backup-schedule 30s`: its reconciler queues a backup whenever the last
// one started 30 s ago (long enough for a backup and a run without one in
// between), and the backup runs as Basin runs every backup
// (src/drivers/local/backups/backups.ts: pgBackRest as the service's user,
// confined, below the database in priority, capped in CPU). Rounds
// alternate: a run while no backup runs, and a run that starts once a
// backup has started (so just after its checkpoint) and ends before it
// does (one that overlaps only partly is run again).

import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  type BenchService,
  firstBackup,
  readyService,
  serviceFiles,
  startForkBasin,
} from './fork-bench.js';
import { claimDataDir, type LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';

const TARGET = 0.8;
const PGBENCH = '/usr/lib/postgresql/15/bin/pgbench';
const execFileP = promisify(execFile);

export async function backupWrite(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_BACKUP_ROUNDS', 4, 1);
  const seconds = envInt('BENCH_BACKUP_SECONDS', 5, 1);
  const scale = envInt('BENCH_BACKUP_SCALE', 30, 1);
  heading('pgbench simple-update on a service while it is backed up vs while it is not');
  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    basin = await startForkBasin(
      dataDir,
      join(ctx.tmpDir, 'backup-write.log'),
      ctx.settings.basinNodeArgs,
      ['--backup-schedule', '30s', '--pitr-window', '1s'],
    );
    const svc = await readyService(basin, {
      name: 'bench-pgbench',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    await firstBackup(basin, svc.id);
    const init = Date.now();
    await pgbench(svc, ['-i', '-q', '-s', String(scale)]);
    const files = serviceFiles(basin, svc.id);
    const uids = [files.uid, ...(files.repoUid === undefined ? [] : [files.repoUid])];
    console.log(
      `service ${svc.id} initialised at scale ${scale} in ${((Date.now() - init) / 1000).toFixed(1)} s; ` +
        `${rounds} rounds of ${seconds} s with and without a backup, 4 clients`,
    );

    const without: number[] = [];
    const during: number[] = [];
    const rows: string[][] = [];
    const deadline = Date.now() + rounds * 120_000;
    let discarded = 0;
    while (without.length < rounds || during.length < rounds) {
      if (Date.now() > deadline) {
        throw new Error(
          `no ${rounds} runs of each kind in time (${discarded} overlapped a backup's start ` +
            'or end): if backups here take less than a run, raise BENCH_BACKUP_SCALE',
        );
      }
      const withBackup = during.length < without.length;
      // Wait for the state the run needs: a backup running, or none.
      while (backupRunning(uids) !== withBackup) await sleep(50);
      const tps = await run(svc, seconds);
      // A run counts only if the backup (or its absence) lasted all along.
      if (backupRunning(uids) !== withBackup) {
        discarded++;
        continue;
      }
      (withBackup ? during : without).push(tps);
      rows.push([
        String(rows.length + 1),
        withBackup ? 'during a backup' : 'no backup',
        fixed(tps),
      ]);
    }
    console.log('');
    table(['run', 'while', 'tps'], rows);
    const ratio = median(during) / median(without);
    const headline =
      `backup-write: pgbench ${fixed(median(during))} tps during a full backup, ` +
      `${fixed(median(without))} without: ratio ${ratio.toFixed(2)} (target >= ${TARGET})`;
    console.log(headline);
    const met = ratio >= TARGET;
    if (!met) warn(`A full backup takes the service below ${TARGET}x its write throughput.`);
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/** One pgbench run of simple-update; its transactions per second. */
async function run(svc: BenchService, seconds: number): Promise<number> {
  const out = await pgbench(svc, [
    '-b',
    'simple-update',
    '-c',
    '4',
    '-j',
    '2',
    '-T',
    String(seconds),
  ]);
  const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
  if (!m) throw new Error(`no tps in pgbench's output: ${out}`);
  return Number(m[1]);
}

async function pgbench(svc: BenchService, args: string[]): Promise<string> {
  const { stdout, stderr } = await execFileP(
    PGBENCH,
    [...args, '-h', '127.0.0.1', '-p', String(svc.port), '-U', 'tsdbadmin', 'tsdb'],
    {
      env: { PATH: '/usr/bin:/bin', PGPASSWORD: svc.password, PGSSLMODE: 'require' },
      maxBuffer: 16 * 1024 * 1024,
      timeout: 600_000,
    },
  );
  return `${stdout}${stderr}`;
}

/** Whether a `pgbackrest … backup` of the service's OS user (or its repository's) runs now. */
function backupRunning(uids: readonly number[]): boolean {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      if (!uids.includes(Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]))) continue;
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => /pgbackrest$/.test(a)) && argv.includes('backup')) return true;
    } catch {
      // Gone meanwhile.
    }
  }
  return false;
}
