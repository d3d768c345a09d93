// A CPU bandwidth limit for backups, where the host has cgroup v1's cpu
// controller (as this project's development VM does). Nice values and the
// niced autogroup (backups.ts) only rank a backup below the database when
// both want a CPU; in the gaps between a busy service's commits (each
// waits for its WAL fsync) the backup still runs flat out, compressing,
// checksumming and writing its repository, which its service pays for in
// CPU and in the disk its commits fsync to. Capped at a quarter of a CPU
// per backup process, that cost is bounded whatever the host's load; the
// backup takes longer instead. (In the backup-write benchmark the cap alone
// was lost in the noise: the larger cost was the checkpoint's fsyncs,
// which conf.ts's backend_flush_after removed. bench/README.md.)
//
// Every backup runs in a cgroup of its own, <cpu>/basin-backups/<service
// id>, with that quota; their parent has the smallest CPU weight (shares 2:
// a backup takes a CPU from nobody who wants it; inside a cgroup the
// kernel's autogroup no longer applies, so this weight takes the place of
// the niced autogroup). Basin, as root, puts the backup's first process
// there before it becomes the service's user, so everything the backup
// starts inherits it; the service's user cannot leave it (cgroup files are
// root's). The cgroup is removed once the backup has ended. Elsewhere
// (cgroup v2, no cpu controller, not root) backups run with their priority
// alone: bounding them under cgroup v2 (cpu.max) is left to a host that
// has it.

import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { existsSync, readdirSync, rmdirSync } from 'node:fs';

/** Where cgroup v1 mounts its cpu controller. */
export const CGROUP_V1_CPU = '/sys/fs/cgroup/cpu';
/** CPU time a backup may use per process it runs, per period (25 ms of 100 ms: a quarter of a CPU). */
export const BACKUP_CPU_QUOTA_US = 25_000;
const PERIOD_US = 100_000;
const PARENT = 'basin-backups';

/** The cgroup a backup of `serviceId` runs in, or undefined where there is none to make. */
export function backupCgroupPath(
  serviceId: string,
  root: string = CGROUP_V1_CPU,
): string | undefined {
  if (process.getuid?.() !== 0 || !existsSync(join(root, 'cpu.cfs_quota_us'))) return undefined;
  return join(root, PARENT, serviceId);
}

/**
 * Makes (or updates) the backup's cgroup: at most `processes` quarters of a
 * CPU, below everything else in weight.
 */
export async function prepareBackupCgroup(dir: string, processes: number): Promise<void> {
  const parent = join(dir, '..');
  await mkdir(parent, { recursive: true });
  await writeFile(join(parent, 'cpu.shares'), '2');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
  await writeFile(
    join(dir, 'cpu.cfs_quota_us'),
    String(BACKUP_CPU_QUOTA_US * Math.max(1, processes)),
  );
}

/** Removes the backup's cgroup once its processes are gone (it cannot go before; then it stays for the next). */
export async function removeBackupCgroup(dir: string): Promise<void> {
  await rmdir(dir).catch(() => {});
}

/**
 * Removes the backup cgroups left by the services whose pgBackRest
 * directories lie in `backupsDir` (one per service id), e.g. after Basin was
 * killed during a backup: only empty ones go, so a backup running now keeps
 * its own. Synchronous (a directory listing and a few rmdirs), so that the
 * benchmarks' exit handlers can call it too.
 */
export function removeLeftBackupCgroups(backupsDir: string): void {
  let ids: string[];
  try {
    ids = readdirSync(backupsDir);
  } catch {
    return;
  }
  for (const id of ids) {
    const dir = backupCgroupPath(id);
    try {
      if (dir) rmdirSync(dir);
    } catch {
      // Not there, or a backup runs in it.
    }
  }
}
