// A fork's source in its parent's repository (fork-restore.ts says why it
// is copied rather than read in place): the chosen backup set and the WAL
// it needs, copied by root into a directory only root can enter, renamed
// into the fork's stanza directory once complete, then handed to the
// fork's user, who restores it with pgBackRest.

import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { DriverError, type ServiceSpec } from '../driver.js';
import { helperCommand } from './confine.js';
import { CommandError, lastLines, run, withPrelude } from './exec.js';
import { helperPrelude } from './node-cgroups.js';
import type { Copied } from './fork-restore.js';
import type { DriverContext } from './local-driver.js';
import { chownTree, copyInto, ensureOwnedDir, mkdirIn, writeRootFile } from './node-files.js';
import type { Recovery } from './node-state.js';
import type { OsUser } from './os-user.js';
import { backupProcesses, parseBackupInfo, type RepoBackup } from './pgbackrest.js';
import { readSmallFile } from './safe-fs.js';

/**
 * Copies from the parent's repository what restoring `label` to `target`
 * needs: the stanza's info files, the backup set, the timeline history
 * files, and the WAL from the backup's start, to its end ('immediate':
 * just consistent) or to the newest archived (a point in time). Into a
 * staging directory of root's, handed to the fork's user once complete.
 * A target before the backup ended fails for good: PostgreSQL would
 * either refuse it or, with no commit to stop at before the backup's end,
 * open the backup's state as if it were the target's.
 */
export async function copyRepoSubset(
  ctx: DriverContext,
  forkId: string,
  parent: string,
  label: string,
  target: Extract<Recovery, { kind: 'repo' }>['target'],
  signal: AbortSignal,
): Promise<void> {
  const consistentOnly = target === 'immediate';
  const { layout } = ctx;
  const from = layout.backupDirs(parent).repo;
  const parentUser = ctx.users.perService
    ? ctx.users.lookup(parent)
    : await ctx.users.ensure(parent);
  if (!parentUser) throw new DriverError(`Its parent ${parent} does not exist (any more).`, false);
  let backups: RepoBackup[];
  try {
    backups = parseBackupInfo(
      await readSmallFile(layout.backupInfo(parent), { owner: parentUser.uid, maxBytes: 4 << 20 }),
    );
  } catch (err) {
    throw new DriverError(`Could not read the parent's backups: ${(err as Error).message}`, true);
  }
  const backup = backups.find((b) => b.label === label);
  if (!backup) {
    throw new DriverError(`The backup ${label} of ${parent} no longer exists.`, false);
  }
  if (typeof target === 'object' && Date.parse(target.time) < Date.parse(backup.stoppedAt)) {
    throw new DriverError(
      `${target.time} is before the backup ${label} of ${parent} ended (${backup.stoppedAt}).`,
      false,
    );
  }
  const staging = join(layout.backupDir(forkId), `.source-${randomBytes(4).toString('hex')}`);
  await mkdirIn(staging, 0o700);
  const backupDir = join('backup', parent);
  const archiveDir = join('archive', parent);
  const copy = async (rel: string, names: string[]) => {
    if (names.length === 0) return;
    await mkdir(join(staging, rel), { recursive: true, mode: 0o700 });
    await copyInto(
      names.map((n) => join(from, rel, n)),
      join(staging, rel),
      { signal },
    );
  };
  await copy(backupDir, ['backup.info', 'backup.info.copy', label]);
  await copy(archiveDir, ['archive.info', 'archive.info.copy']);
  const segment = (name: string) => /^[0-9A-F]{24}/.exec(name)?.[0];
  const wanted = (name: string) => {
    const seg = segment(name);
    if (seg === undefined) return false;
    return seg >= backup.walStart && (!consistentOnly || seg <= backup.walStop);
  };
  for (const db of await list(join(from, archiveDir))) {
    if (!/^\d+-\d+$/.test(db)) continue;
    const dbDir = join(archiveDir, db);
    const entries = await list(join(from, dbDir));
    await copy(
      dbDir,
      entries.filter((n) => /^[0-9A-F]{8}\.history/.test(n)),
    );
    for (const sub of entries.filter((n) => /^[0-9A-F]{16}$/.test(n))) {
      // A directory holds the segments of one timeline and log id.
      if (sub < backup.walStart.slice(0, 16)) continue;
      if (consistentOnly && sub > backup.walStop.slice(0, 16)) continue;
      await copy(join(dbDir, sub), (await list(join(from, dbDir, sub))).filter(wanted));
    }
  }
  await rename(staging, layout.forkSource(forkId).repo);
}

/** The names in a directory of the parent's repository; none when it is not there. */
async function list(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/** Hands the copied source to the fork's user and restores the backup from it, as that user. */
export async function restoreAsFork(
  ctx: DriverContext,
  spec: ServiceSpec,
  user: OsUser,
  copied: Copied,
  pgdata: string,
  signal: AbortSignal,
): Promise<void> {
  const { layout } = ctx;
  const src = layout.forkSource(spec.serviceId);
  const dirs = layout.backupDirs(spec.serviceId);
  const stanza = (copied.recovery as Extract<Recovery, { kind: 'repo' }>).stanza;
  await chownTree([src.repo], user);
  await writeRootFile(
    src.conf,
    [
      "# Written by Basin: the parent's backup this fork restores, while it recovers.",
      '[global]',
      `repo1-path=${src.repo}`,
      `spool-path=${dirs.spool}`,
      `lock-path=${dirs.lock}`,
      `log-path=${dirs.log}`,
      'log-level-console=warn',
      'log-level-stderr=off',
      'log-level-file=warn',
      `process-max=${backupProcesses(spec.size)}`,
      '',
      `[${stanza}]`,
      `pg1-path=${layout.pgdata({ id: spec.serviceId, node: 0 })}`,
      '',
    ].join('\n'),
    user,
  );
  await ensureOwnedDir(pgdata, user);
  // --type=none: Basin writes the recovery settings itself (conf.ts).
  const cmd = helperCommand(
    user,
    ctx.pg.pgbackrest,
    [
      `--config=${src.conf}`,
      `--stanza=${stanza}`,
      `--pg1-path=${pgdata}`,
      `--set=${copied.backupLabel}`,
      '--type=none',
      'restore',
    ],
    ctx.privateTmp,
  );
  const bounded = withPrelude(await helperPrelude(ctx, spec.serviceId), cmd);
  try {
    await run(bounded.file, bounded.args, { timeoutMs: 6 * 3_600_000, signal });
  } catch (err) {
    const output = err instanceof CommandError ? lastLines(err.output, 4) : (err as Error).message;
    throw new DriverError(`Restoring the backup ${copied.backupLabel} failed: ${output}`, true);
  }
}
