// A service's stanza and its backups (pgbackrest.ts says how pgBackRest is
// set up), in a local repository (the service's user's) or in a
// repository of an OS user of its own, reached over TLS through its
// pgBackRest server (repository/). The stanza is made before the
// service's server first starts, so that archiving works from its first
// segment; backups run in the background, confined, niced and limited in
// CPU (backup-cgroup.ts): as the service's user, or as the repository's
// user through a server on the service's side; they are polled by the
// engine's backup operation; expiry keeps what the recovery window needs
// (engine/backups.ts decides which). Basin learns what backups exist from
// the stanza's backup.info, read as root from the repository: every
// directory on the way opened without following a link (safe-dir.ts), and
// a regular file owned by the repository's owner, or nothing.

import {
  backupCgroupPath,
  prepareBackupCgroup,
  removeBackupCgroup,
} from '../host/cgroups/backup-cgroup.js';
import { DriverError, type BackupProgress, type ServiceSpec } from '../../driver.js';
import { helperCommand } from '../host/confine.js';
import { failureOf, run, withPrelude, type Prelude } from '../host/exec.js';
import { helperPrelude } from '../host/cgroups/node-cgroups.js';
import { ensureOwnedDir, mkdirIn, writeRootFile } from '../node/node-files.js';
import type { OsUser } from '../host/os-user.js';
import {
  backupCheckpoint,
  backupProcesses,
  parseBackupInfo,
  renderStanzaConf,
  type RepoBackup,
} from '../config/pgbackrest.js';
import { inStorageRecovery } from '../storage/node-storage.js';
import { postmasterStatus } from '../node/postmaster.js';
import { existsBeneath, readBeneath } from '../host/files/safe-dir.js';
import { exists } from '../node/node-files.js';
import { clearUnmadeStanza } from './unmade-stanza.js';
import { KeyedLock } from '../keyed-lock.js';
import { REPOSITORY_BOUNDS } from '../host/cgroups/node-bounds.js';
import type { Repositories } from './repository/repositories.js';
import { ensureSides, type SidesContext, withServiceServer } from './repository/sides.js';
import type { Logger } from '../../../lib/logger.js';
import type { StorageWatch } from '../storage/storage-watch.js';
import { primaryNode } from '../primary-node.js';
import {
  ensureRemoteSide,
  isRemote,
  markStanza,
  recordedRemote,
  type RemoteIdentity,
  sourcePort,
  stanzaMade,
} from './repository/remote.js';
import { type SourceServer, startSourceServer } from './repository/source-server.js';
import {
  copyLocalRepository,
  dropMovedRepository,
  movePaths,
  moveStage,
} from './repository/move.js';

/**
 * What LocalBackups needs of the driver: DriverContext's fields, named here
 * because the context holds LocalBackups (context.ts).
 */
export interface BackupsContext extends SidesContext {
  repositories: Repositories | undefined;
  /** On a host of several: signs the credentials of a repository on the repository host (remote.ts). */
  remoteIdentity?: RemoteIdentity | undefined;
  storage: StorageWatch;
  log: Logger;
}

const backingUp = (): BackupProgress => ({ done: false, retryAfterMs: 500, reason: 'backing up' });

/**
 * Runs "$@" below the database in priority. `nice` alone does not: where
 * the kernel groups processes by session (autogroup, on by default in most
 * distributions), every session's group gets an equal share of the CPU
 * whatever its processes' nice values, and a backup in Basin's session took
 * as much CPU as the service's whole server (its session: postmaster.ts),
 * halving a busy service's throughput on two cores (bench/README.md,
 * backup-write). So the backup runs in a session of its own (setsid) whose
 * group it makes the lowest (nice 19 in /proc/self/autogroup; the kernel
 * takes one such change per 100 ms from unprivileged processes, hence the
 * retries; ignored where there is no autogroup), then nice and ionice.
 */
const LOW_PRIORITY =
  'if [ -w /proc/self/autogroup ]; then for i in 1 2 3 4 5; do ' +
  'echo 19 2>/dev/null >/proc/self/autogroup && break; sleep 0.1; done; fi; ' +
  'exec nice -n 10 ionice -c 2 -n 7 "$@"';

/** A backup runs at most this long; one that takes longer is killed and tried again. */
const BACKUP_TIMEOUT_MS = 12 * 3_600_000;
/** stanza-create, expire and info take well under a second; bounded all the same. */
const SHORT_MS = 120_000;
/**
 * stanza-create, before a new service's first start: a create waits on
 * it. One that hangs (a CI run at load saw a create sit in CONFIGURING
 * for its test's two minutes, its last line the repository server's
 * start) is killed sooner and the step tried again.
 */
const STANZA_MS = 30_000;

interface Running {
  since: number;
  done: Promise<void>;
  error?: Error;
  finished: boolean;
}

/** What a backup on the repository host reads the service through (its host's address is the hosts driver's to add). */
export interface SourceInfo {
  port: number;
  config: string;
  pgPath: string;
  socketDir: string;
  pgPort: number;
  processMax: number;
}

export class LocalBackups {
  private readonly running = new Map<string, Running>();
  private readonly sources = new Map<string, SourceServer>();
  private readonly stanzaLocks = new KeyedLock();

  constructor(private readonly ctx: BackupsContext) {}

  /**
   * The service's pgBackRest directories (its user's, 0700) and
   * configuration (root's, readable by the user's group alone: the server's
   * archiver reads it), made or brought up to date with the spec.
   */
  /**
   * A new service's repository server alone (its OS user, identity and
   * process), which needs nothing of the service's own user: a fork's
   * restore starts it while that user is made (fork-restore.ts), and
   * ensureConfig then finds it made. Nothing where the repository is
   * another host's or a local one.
   */
  async ensureServer(spec: ServiceSpec): Promise<void> {
    if (spec.repository ?? (await recordedRemote(this.ctx, spec.serviceId))) return;
    await (await this.serverOf(spec.serviceId))?.ensure(spec.serviceId);
  }

  async ensureConfig(spec: ServiceSpec, user: OsUser): Promise<void> {
    const { layout } = this.ctx;
    const id = spec.serviceId;
    const remote = spec.repository ?? (await recordedRemote(this.ctx, id));
    if (remote) {
      await ensureRemoteSide(this.ctx, { ...spec, repository: remote }, user);
      return;
    }
    if (await this.moveRepository(spec, user)) return;
    const repositories = await this.serverOf(id);
    if (repositories) {
      await ensureSides(this.ctx, repositories, spec, user);
      return;
    }
    await mkdirIn(layout.backupDir(id), 0o711);
    const dirs = layout.backupDirs(id);
    for (const dir of Object.values(dirs)) await ensureOwnedDir(dir, user);
    // The recorded primary's (after a failover, another node's).
    const primary = primaryNode(spec);
    const conf = renderStanzaConf({
      stanza: id,
      ...dirs,
      pgdata: layout.pgdata({ id, node: primary.index }),
      socketDir: layout.socketDir({ id, node: primary.index }),
      port: primary.port,
      processMax: backupProcesses(spec.size),
    });
    await writeRootFile(layout.backupConf(id), conf, user);
  }

  /**
   * Makes the service's stanza unless its backup.info is there (clearing
   * first what an interrupted stanza-create left: unmade-stanza.ts). Offline
   * (from pg_control) when its server does not run, as before a first
   * start; online otherwise.
   */
  ensureStanza(id: string, user: OsUser): Promise<void> {
    // One at a time per service: a service's converge and its backup both
    // make sure of it, and the clearing of a half-made stanza must not
    // take the other's stanza-create in progress for one.
    return this.stanzaLocks.run(id, () => this.ensureStanzaNow(id, user));
  }

  private async ensureStanzaNow(id: string, user: OsUser): Promise<void> {
    const { layout } = this.ctx;
    if (await isRemote(this.ctx, id)) {
      // Its backup.info is on the repository host: made once, then marked here.
      if (await stanzaMade(this.ctx, id)) return;
      const up = (await postmasterStatus(layout.pgdata({ id, node: 0 }))).up;
      await this.stanzaCreate(user, id, up);
      await markStanza(this.ctx, id);
      return;
    }
    const info = ['backup', id, 'backup.info'];
    const { dir, owner } = await this.repositoryOf(id, user);
    if (await existsBeneath(dir, info, owner).catch(() => false)) {
      return;
    }
    // What an interrupted attempt left would make stanza-create fail for good.
    const ownerUser = owner === user.uid ? user : this.ctx.repositories?.lookup(id);
    if (ownerUser) await clearUnmadeStanza(dir, id, ownerUser, this.ctx.privateTmp, this.ctx.log);
    const pm = await postmasterStatus(layout.pgdata({ id, node: 0 }));
    await this.stanzaCreate(user, id, pm.up);
  }

  /** Makes the stanza, said in Basin's log before and after (a hang shows where it is). */
  private async stanzaCreate(user: OsUser, id: string, online: boolean): Promise<void> {
    const t0 = performance.now();
    this.ctx.log.info({ serviceId: id }, "making the service's backup stanza");
    await this.pgbackrest(user, id, [...(online ? [] : ['--no-online']), 'stanza-create'], {
      timeoutMs: STANZA_MS,
    });
    const ms = Math.round(performance.now() - t0);
    this.ctx.log.info({ serviceId: id, ms }, "made the service's backup stanza");
  }

  /**
   * One step of a full backup that started at or after `since`: done with
   * it once backup.info lists it; otherwise it is started (in the
   * background) or still running. The server must run.
   */
  async backup(spec: ServiceSpec, user: OsUser, since: number): Promise<BackupProgress> {
    const id = spec.serviceId;
    const run = this.running.get(id);
    if (run && !run.finished) return backingUp();
    this.running.delete(id);
    const existing = await this.list(id, user);
    const found = existing.find((b) => Date.parse(b.startedAt) >= Math.floor(since / 1000) * 1000);
    if (found) {
      const { walStart: _s, walStop: _e, ...backup } = found;
      return { done: true, backup };
    }
    // The attempt that started the last backup failed: said once, then a new one.
    if (run?.error && run.since === since) throw run.error;
    const pm = await postmasterStatus(
      this.ctx.layout.pgdata({ id, node: primaryNode(spec).index }),
    );
    if (!pm.up || pm.state !== 'ready') {
      throw new DriverError(`Service ${id} is not running: it cannot be backed up now.`, true);
    }
    // In recovery for its storage it writes no WAL a backup could end on;
    // its backups wait until it is under its ceiling (storage/node-storage.ts).
    if (inStorageRecovery(this.ctx.storage, id)) {
      return {
        done: false,
        retryAfterMs: 60_000,
        reason: 'its storage is past its ceiling: it runs in recovery, and backups wait',
      };
    }
    await this.ensureConfig(spec, user);
    await this.ensureStanza(id, user);
    const started: Running = { since, finished: false, done: Promise.resolve() };
    // Niced, ioniced and capped in CPU: the database comes first (a backup
    // must not stall it).
    const checkpoint = backupCheckpoint(spec.size, existing.length === 0);
    const cgroup = await this.cgroup(id, backupProcesses(spec.size));
    const args = [checkpoint, '--type=full', 'backup'];
    const options = { timeoutMs: BACKUP_TIMEOUT_MS, nice: true, cgroup };
    started.done = (
      (await this.serverOf(id))
        ? this.backupThroughServer(id, user, args, options)
        : this.pgbackrest(user, id, args, options)
    )
      .then(
        () => undefined,
        (err: Error) => {
          started.error = new DriverError(`The backup failed: ${err.message}`, true);
        },
      )
      .finally(async () => {
        if (cgroup) await removeBackupCgroup(cgroup);
        started.finished = true;
      });
    this.running.set(id, started);
    this.ctx.log.info({ serviceId: id }, 'backing up');
    return backingUp();
  }

  /**
   * Expires the backups older than `oldestKept`, and the WAL only they
   * needed: pgBackRest keeps the newest n full backups and the WAL from the
   * oldest of them on. Nothing happens when the label is not there (gone
   * already, or never the service's).
   */
  async expire(id: string, user: OsUser, oldestKept: string): Promise<void> {
    const backups = await this.list(id, user);
    const i = backups.findIndex((b) => b.label === oldestKept);
    if (i <= 0) return;
    const keep = String(backups.length - i);
    const args = [`--repo1-retention-full=${keep}`, `--repo1-retention-archive=${keep}`, 'expire'];
    const repositories = await this.serverOf(id);
    const repoUser = repositories?.lookup(id);
    if (repositories && !repoUser) return; // its repository is gone: nothing to expire
    await (repoUser
      ? this.asRepository(repoUser, id, args, { timeoutMs: SHORT_MS })
      : this.pgbackrest(user, id, args, { timeoutMs: SHORT_MS }));
    this.ctx.log.info({ serviceId: id, oldestKept }, 'expired backups');
  }

  /**
   * The service's complete full backups, oldest first, from its stanza's
   * backup.info (owned by its user, else nothing); none before its first.
   */
  async list(id: string, user: OsUser): Promise<RepoBackup[]> {
    let text: string;
    try {
      const { dir, owner } = await this.repositoryOf(id, user);
      text = await readBeneath(dir, ['backup', id, 'backup.info'], owner, 4 * 1024 * 1024);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new DriverError(`Could not read the list of backups: ${(err as Error).message}`, true);
    }
    return parseBackupInfo(text);
  }

  /**
   * The repository servers when the service's repository has one: a
   * service that has one (repos/<id>) keeps it; with them on, every new
   * service gets one, and a service made before with a local repository
   * (backup/<id>/repo, in root's backup/<id>: no tenant can remove it)
   * keeps it until it is moved (moveRepository), on its next converge.
   */
  async serverOf(id: string): Promise<Repositories | undefined> {
    const { repositories, layout } = this.ctx;
    if (!repositories || (await isRemote(this.ctx, id))) return undefined;
    if ((await moveStage(layout, id, repositories.enabled)) === 'copy') return undefined;
    if (await exists(layout.repository(id).dir)) return repositories;
    if (!repositories.enabled) return undefined;
    return (await exists(layout.backupDirs(id).repo)) ? undefined : repositories;
  }

  /**
   * Whether the service's local repository is still to be moved into a
   * repository of its own user's (repository/move.ts), or the move to be
   * finished; not while a backup into it runs (the move waits for it).
   */
  async moveDue(id: string): Promise<boolean> {
    const { repositories, layout } = this.ctx;
    if (!repositories || this.backingUp(id)) return false;
    return (await moveStage(layout, id, repositories.enabled)) !== 'none';
  }

  /**
   * Whether the service's local repository is being copied into its
   * repository (a Basin killed in the move left it so): neither is there
   * to read until the move is finished.
   */
  async moveInFlight(id: string): Promise<boolean> {
    return exists(movePaths(this.ctx.layout, id).moving);
  }

  /**
   * Moves the service's local repository into a repository of its own
   * user's, with its backups and archived WAL, or finishes a move a killed
   * Basin left (repository/move.ts), and brings both sides up with the
   * service's repository server; true when it did (its side is then
   * written). Nothing while a backup into the local repository runs.
   */
  async moveRepository(spec: ServiceSpec, user: OsUser): Promise<boolean> {
    const { repositories, layout, log } = this.ctx;
    const id = spec.serviceId;
    if (!repositories || !(await this.moveDue(id))) return false;
    if ((await moveStage(layout, id, repositories.enabled)) === 'copy') {
      log.info({ serviceId: id }, "moving the service's backups into a repository of their own");
      await copyLocalRepository(layout, repositories, id, user);
    }
    await ensureSides(this.ctx, repositories, spec, user);
    await dropMovedRepository(layout, id);
    log.info({ serviceId: id }, "moved the service's backups into a repository of their own");
    return true;
  }

  /**
   * The service's backup source, for a backup on the repository host: its
   * side made, its stanza there, and its own pgBackRest server running (as
   * its user, in its namespace, at a backup's priority and in its CPU cap)
   * until closeSource, or for at most a backup's time. Returns what the
   * repository host's backup configuration names.
   */
  async openSource(spec: ServiceSpec, user: OsUser): Promise<SourceInfo> {
    const { layout } = this.ctx;
    const id = spec.serviceId;
    if (!spec.repository) {
      throw new DriverError(`Service ${id} has no repository on a repository host.`, false);
    }
    const primary = primaryNode(spec);
    const pm = await postmasterStatus(layout.pgdata({ id, node: primary.index }));
    if (!pm.up || pm.state !== 'ready') {
      throw new DriverError(`Service ${id} is not running: it cannot be backed up now.`, true);
    }
    await this.ensureConfig(spec, user);
    await this.ensureStanza(id, user);
    const info: SourceInfo = {
      port: sourcePort(spec),
      config: layout.backupConf(id),
      pgPath: layout.pgdata({ id, node: primary.index }),
      socketDir: layout.socketDir({ id, node: primary.index }),
      pgPort: primary.port,
      processMax: backupProcesses(spec.size),
    };
    return this.serveSource(id, info, user);
  }

  /**
   * The pgBackRest server of a backup source described by `info`, under the
   * resource `id` (a service, or a Patroni node: patroni/node-archive.ts),
   * started unless it runs; its configuration written before.
   */
  async serveSource(id: string, info: SourceInfo, user: OsUser): Promise<SourceInfo> {
    const open = this.sources.get(id);
    if (open && !open.exited()) return info;
    const cgroup = await this.cgroup(id, info.processMax);
    const prelude = await helperPrelude(this.ctx, id);
    this.sources.set(
      id,
      await startSourceServer(
        this.ctx,
        id,
        user,
        info.port,
        {
          ...prelude,
          ...(cgroup ? { tryCgroups: [cgroup] } : {}),
        },
        LOW_PRIORITY,
        BACKUP_TIMEOUT_MS,
        async () => {
          if (cgroup) await removeBackupCgroup(cgroup);
        },
      ),
    );
    this.ctx.log.info({ serviceId: id }, 'serving a backup on the repository host');
    return info;
  }

  /** Stops the service's backup source, if it runs. */
  closeSource(id: string): void {
    this.sources.get(id)?.stop();
    this.sources.delete(id);
  }

  /** Whether a backup started by this Basin still runs. */
  private backingUp(id: string): boolean {
    const run = this.running.get(id);
    return run !== undefined && !run.finished;
  }

  /**
   * The service's repository and the uid that owns its files: its
   * repository user's, or, for a local repository, its own user's.
   */
  async repositoryOf(id: string, user: { uid: number }): Promise<{ dir: string; owner: number }> {
    const { layout } = this.ctx;
    const repositories = await this.serverOf(id);
    if (!repositories) return { dir: layout.backupDirs(id).repo, owner: user.uid };
    const repoUser = repositories.lookup(id);
    // No user: no repository either; -1 is nobody (reads find nothing).
    return { dir: layout.repository(id).repo, owner: repoUser?.uid ?? -1 };
  }

  /** Waits for the service's running backup, if any, to end (it is being deleted; its processes are killed). */
  async settle(id: string): Promise<void> {
    await this.running.get(id)?.done;
    this.running.delete(id);
    // Left by a backup that Basin did not see end (it was killed meanwhile).
    const cgroup = backupCgroupPath(id);
    if (cgroup) await removeBackupCgroup(cgroup);
  }

  /** The CPU-limited cgroup of the service's backup (backup-cgroup.ts), made; undefined where there is none. */
  private async cgroup(id: string, processes: number): Promise<string | undefined> {
    const dir = backupCgroupPath(id);
    if (!dir) return undefined;
    try {
      await prepareBackupCgroup(dir, processes);
      return dir;
    } catch (err) {
      this.ctx.log.warn(
        { serviceId: id, err: (err as Error).message },
        'backing up without a CPU limit: its cgroup could not be made',
      );
      return undefined;
    }
  }

  /**
   * A backup where the repository has a server: the service's own
   * pgBackRest server runs for it (as its user, in its namespace, at the
   * backup's priority and in its CPU cap: it reads and compresses the
   * files), and the backup runs as the repository's user next to the
   * repository, reaching the data through that server.
   */
  private async backupThroughServer(
    id: string,
    user: OsUser,
    args: string[],
    options: { timeoutMs: number; nice: boolean; cgroup?: string | undefined },
  ): Promise<void> {
    const repoUser = this.ctx.repositories?.lookup(id);
    if (!repoUser) throw new DriverError(`The repository of ${id} is gone.`, true);
    const prelude = await helperPrelude(this.ctx, id);
    await withServiceServer(
      this.ctx,
      id,
      user,
      { ...prelude, ...(options.cgroup ? { tryCgroups: [options.cgroup] } : {}) },
      (file, all) => ['setsid', ['sh', '-c', LOW_PRIORITY, 'basin-backup', file, ...all]],
      () => this.asRepository(repoUser, id, args, options),
    );
  }

  /** Runs pgBackRest as the repository's user with its backup.conf, confined, in its cgroups. */
  private async asRepository(
    repoUser: OsUser,
    id: string,
    args: string[],
    options: { timeoutMs: number; nice?: boolean; cgroup?: string | undefined },
  ): Promise<void> {
    await this.pgbackrest(repoUser, id, args, {
      ...options,
      config: this.ctx.layout.repository(id).backupConf,
      prelude: {
        cgroups: await this.ctx.cgroups.ensure({ id, part: 'repo' }, REPOSITORY_BOUNDS),
        oomScoreAdj: this.ctx.oom.tenant,
      },
    });
  }

  /** Runs pgBackRest on the service's stanza, as its user, confined; rejects with its last lines. */
  private async pgbackrest(
    user: OsUser,
    id: string,
    args: string[],
    options: {
      timeoutMs: number;
      nice?: boolean;
      cgroup?: string | undefined;
      /** Another configuration than the service's (the repository's side). */
      config?: string;
      /** Other cgroups than the service's helpers' (the repository's). */
      prelude?: Prelude;
    },
  ): Promise<void> {
    const { layout, privateTmp, pg } = this.ctx;
    const config = options.config ?? layout.backupConf(id);
    const base = [`--config=${config}`, `--stanza=${id}`, ...args];
    const [file, all] = options.nice
      ? ['setsid', ['sh', '-c', LOW_PRIORITY, 'basin-backup', pg.pgbackrest, ...base]]
      : [pg.pgbackrest, base];
    const confined = helperCommand(user, file as string, all as string[], privateTmp);
    // Bounded in memory and processes with the service's other helpers; if
    // the move into its CPU cap fails, the backup still runs, with its
    // priority alone.
    const prelude = options.prelude ?? (await helperPrelude(this.ctx, id));
    const cmd = withPrelude(
      { ...prelude, ...(options.cgroup ? { tryCgroups: [options.cgroup] } : {}) },
      confined,
    );
    try {
      await run(cmd.file, cmd.args, { timeoutMs: options.timeoutMs });
    } catch (err) {
      throw new DriverError(`pgbackrest ${args.at(-1)} failed: ${failureOf(err)}`, true);
    }
  }
}
