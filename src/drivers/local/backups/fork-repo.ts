// A fork's source in its parent's repository (fork-restore.ts says why it
// is copied rather than read in place): the chosen backup set and the WAL
// it needs, copied by root into a directory only root can enter, renamed
// into the fork's stanza directory once complete, then handed to the
// fork's user, who restores it with pgBackRest.
//
// The repository is the parent's OS user's, so its tenant can change it
// while Basin reads it: swap `backup/<id>` for a link to another service's
// backups right after Basin read its backup.info, say. So the repository
// is read through descriptors (safe-dir.ts, safe-copy.ts): backup.info is
// read from the very directory the backup set is then copied from, no
// link is followed anywhere on the way, and everything copied belongs to
// the parent's OS user (what its tenant could read anyway).

import { randomBytes } from 'node:crypto';
import { mkdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { DriverError, type ServiceSpec } from '../../driver.js';
import { helperCommand } from '../host/confine.js';
import { failureOf, run, withPrelude } from '../host/exec.js';
import { helperPrelude } from '../host/cgroups/node-cgroups.js';
import { chownTree, ensureOwnedDir, exists, mkdirIn, writeRootFile } from '../node/node-files.js';
import type { Recovery } from '../node/node-state.js';
import type { OsUser } from '../host/os-user.js';
import {
  backupInfoSystemId,
  backupProcesses,
  parseBackupInfo,
  type RepoBackup,
} from '../config/pgbackrest.js';
import { copyEntries } from '../host/files/safe-copy.js';
import { readBeneath, SafeDir } from '../host/files/safe-dir.js';
import { renderForkSourceConf } from './repository/repo-conf.js';
import type { Repositories } from './repository/repositories.js';
import { ensureClientIdentity } from './repository/sides.js';
import { UnsafeFileError } from '../host/files/safe-fs.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<
  DriverContext,
  | 'backups'
  | 'cgroups'
  | 'layout'
  | 'log'
  | 'networks'
  | 'oom'
  | 'pg'
  | 'privateTmp'
  | 'repositories'
  | 'users'
>;

/** What was copied out of the parent's repository: the backup as its backup.info listed it. */
export interface RepoSubset {
  backup: RepoBackup;
  /** The system identifier backup.info gives the parent's stanza (undefined: none given). */
  stanzaSystemId: string | undefined;
}

/**
 * What the copy from the parent gave: how the fork recovers, from which
 * backup or label file, and, for a restored backup, that backup as the
 * parent's backup.info listed it.
 */
export type Copied = {
  recovery: Recovery;
  backupLabel?: string;
  repo?: RepoSubset;
  /** Restored through the parent's repository server, nothing copied (repository/). */
  throughServer?: boolean;
  /** Its source configuration already written (a parent on the repository host: fork-remote.ts). */
  sourceConfWritten?: boolean;
};

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
  ctx: Ctx,
  forkId: string,
  parent: string,
  label: string,
  target: Extract<Recovery, { kind: 'repo' }>['target'],
  signal: AbortSignal,
): Promise<RepoSubset> {
  const consistentOnly = target === 'immediate';
  const { layout } = ctx;
  // Its local repository (its user's), or its repository user's (repository/).
  const { dir: repoDir, owner } = await ctx.backups.repositoryOf(parent, {
    uid: await parentOwner(ctx, parent),
  });
  const opened: SafeDir[] = [];
  const openDir = async (from: SafeDir, names: string[]) => {
    const dir = await from.dirPath(names);
    opened.push(dir);
    return dir;
  };
  const within = async (from: SafeDir, name: string, work: (dir: SafeDir) => Promise<void>) => {
    const dir = await from.dir(name);
    try {
      await work(dir);
    } finally {
      await dir.close();
    }
  };
  try {
    let repo: SafeDir;
    let backupDir: SafeDir;
    let info: string;
    try {
      repo = await SafeDir.open(repoDir, owner);
      opened.push(repo);
      backupDir = await openDir(repo, ['backup', parent]);
      info = await backupDir.readSmall('backup.info', 4 << 20);
    } catch (err) {
      throw unreadable(err, "Could not read the parent's backups");
    }
    const backup = chooseBackup(info, parent, label, target);
    const staging = join(layout.backupDir(forkId), `.source-${randomBytes(4).toString('hex')}`);
    await mkdirIn(staging, 0o700);
    const copy = async (from: SafeDir, rel: string, names: string[], vanishedOk = false) => {
      if (names.length === 0) return;
      await mkdir(join(staging, rel), { recursive: true, mode: 0o700 });
      await copyEntries(from, names, join(staging, rel), { owner, signal, vanishedOk });
    };
    try {
      // From the directory backup.info was just read from, whatever its name leads to now.
      await copy(backupDir, join('backup', parent), ['backup.info', 'backup.info.copy', label]);
      const archive = await openDir(repo, ['archive', parent]);
      const archiveRel = join('archive', parent);
      await copy(archive, archiveRel, ['archive.info', 'archive.info.copy']);
      const segment = (name: string) => /^[0-9A-F]{24}/.exec(name)?.[0];
      const wanted = (name: string) => {
        const seg = segment(name);
        if (seg === undefined) return false;
        return seg >= backup.walStart && (!consistentOnly || seg <= backup.walStop);
      };
      for (const db of await archive.names()) {
        if (!/^\d+-\d+$/.test(db)) continue;
        await within(archive, db, async (dbDir) => {
          const entries = await dbDir.names();
          await copy(
            dbDir,
            join(archiveRel, db),
            entries.filter((n) => /^[0-9A-F]{8}\.history/.test(n)),
          );
          for (const sub of entries.filter((n) => /^[0-9A-F]{16}$/.test(n))) {
            // A directory holds the segments of one timeline and log id.
            if (sub < backup.walStart.slice(0, 16)) continue;
            if (consistentOnly && sub > backup.walStop.slice(0, 16)) continue;
            // The parent archives meanwhile: a file renamed into place after
            // it was listed (pgBackRest writes aside first) is not needed.
            await within(dbDir, sub, async (subDir) =>
              copy(subDir, join(archiveRel, db, sub), (await subDir.names()).filter(wanted), true),
            );
          }
        });
      }
    } catch (err) {
      throw unreadable(err, "Could not copy the parent's backup");
    }
    await rename(staging, layout.forkSource(forkId).repo);
    return { backup, stanzaSystemId: backupInfoSystemId(info) };
  } finally {
    for (const dir of opened.reverse()) await dir.close();
  }
}

/**
 * The backup `label` as the parent's backup.info lists it; a target before
 * it ended fails for good: PostgreSQL would either refuse it or, with no
 * commit to stop at before the backup's end, open the backup's state as if
 * it were the target's.
 */
function chooseBackup(
  info: string,
  parent: string,
  label: string,
  target: Extract<Recovery, { kind: 'repo' }>['target'],
): RepoBackup {
  const backup = parseBackupInfo(info).find((b) => b.label === label);
  if (!backup) {
    throw new DriverError(`The backup ${label} of ${parent} no longer exists.`, false);
  }
  if (typeof target === 'object' && Date.parse(target.time) < Date.parse(backup.stoppedAt)) {
    throw new DriverError(
      `${target.time} is before the backup ${label} of ${parent} ended (${backup.stoppedAt}).`,
      false,
    );
  }
  return backup;
}

/**
 * Where the parent's repository has a server (repository/): the backup
 * `label` as its backup.info lists it (read by root, the repository
 * user's file or nothing: no tenant writes there), and the fork admitted
 * to the parent's server (its client certificate for the parent's stanza,
 * its namespace to the server's port) until it is open (fork-open.ts).
 * Nothing is copied: the fork restores, and fetches WAL, through the
 * server, as its own user.
 */
export async function admitToParentRepository(
  ctx: Ctx,
  forkId: string,
  forkUser: OsUser,
  parent: string,
  label: string,
  target: Extract<Recovery, { kind: 'repo' }>['target'],
): Promise<RepoSubset> {
  const repositories = ctx.repositories as Repositories;
  const repoUser = repositories.lookup(parent);
  if (!repoUser) throw new DriverError(`Its parent ${parent} has no repository.`, false);
  let info: string;
  try {
    info = await readBeneath(
      ctx.layout.repository(parent).repo,
      ['backup', parent, 'backup.info'],
      repoUser.uid,
      4 << 20,
    );
  } catch (err) {
    throw unreadable(err, "Could not read the parent's backups");
  }
  const backup = chooseBackup(info, parent, label, target);
  await ensureClientIdentity(ctx, forkId, forkUser);
  await ctx.networks.admitToHostPorts(parent, forkId, true);
  await repositories.authorize(parent, forkId, true);
  ctx.log.info({ serviceId: forkId, parent }, "admitted to its parent's repository server");
  return { backup, stanzaSystemId: backupInfoSystemId(info) };
}

/** The fork no longer reaches its parent's repository (it is open, or gone). */
export async function leaveParentRepository(
  ctx: Ctx,
  forkId: string,
  parent: string,
): Promise<void> {
  if (!ctx.repositories?.lookup(parent)) return;
  // A parent whose repository is not a server of this host's (on the
  // repository host: fork-remote.ts) admitted nothing here; its user may
  // still be in a passwd this host shares with the repository host.
  if (!(await exists(ctx.layout.repository(parent).dir))) return;
  // The port first: the kernel's refusal is at once, the server's reload a moment later.
  await ctx.networks.admitToHostPorts(parent, forkId, false);
  await ctx.repositories.authorize(parent, forkId, false);
}

/**
 * A failure to read the parent's repository: for good when something in
 * it is not what pgBackRest leaves (a link, a file of another uid, a
 * backup that backup.info lists and its directory does not hold: its
 * tenant's doing, which the next attempt would meet again; no expiry runs
 * meanwhile, under the parent's lock), else retryable.
 */
function unreadable(err: unknown, what: string): Error {
  if (err instanceof DriverError) return err;
  if ((err as Error).name === 'AbortError') return err as Error;
  const forGood =
    err instanceof UnsafeFileError || (err as NodeJS.ErrnoException).code === 'ENOENT';
  return new DriverError(`${what}: ${(err as Error).message}`, !forGood);
}

/** The uid of the parent's OS user, which owns its files (the shared one when services share one). */
export async function parentOwner(ctx: Ctx, parent: string): Promise<number> {
  const user = ctx.users.perService ? ctx.users.lookup(parent) : await ctx.users.ensure(parent);
  if (!user) throw new DriverError(`Its parent ${parent} does not exist (any more).`, false);
  return user.uid;
}

/** Hands the copied source to the fork's user and restores the backup from it, as that user. */
export async function restoreAsFork(
  ctx: Ctx,
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
  if (copied.sourceConfWritten) {
    // fork-remote.ts wrote it: the parent's server on the repository host.
  } else if (copied.throughServer) {
    // Through the parent's server: nothing of its repository was copied.
    const mine = layout.backupIdentity(spec.serviceId);
    await writeRootFile(
      src.conf,
      renderForkSourceConf({
        dirs: { spool: dirs.spool, lock: dirs.lock, log: dirs.log },
        repo: {
          host: (await ctx.networks.ensure(stanza)).hostAddress,
          cert: mine.clientCert,
          key: mine.clientKey,
          ca: mine.ca,
          config: layout.repository(stanza).serverConf,
        },
        processMax: backupProcesses(spec.size),
        stanza,
        pgPath: src.pg,
      }),
      user,
    );
  } else {
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
        // Where archive-get reads the identifier it looks the parent's WAL up
        // by: the parent's control file (fork-check.ts). The restore names
        // the fork's data directory itself.
        `pg1-path=${src.pg}`,
        '',
      ].join('\n'),
      user,
    );
  }
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
    // How it ended too (failureOf): a restore killed says no error of its own.
    throw new DriverError(
      `Restoring the backup ${copied.backupLabel} failed: ${failureOf(err)}`,
      true,
    );
  }
}
