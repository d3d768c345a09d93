// One unprivileged OS user per service (docs/security.md).
//
// A service's tsdbadmin has CREATEROLE, and in PostgreSQL 15 that lets it
// grant itself pg_execute_server_program, pg_read_server_files and
// pg_write_server_files: it can run any program, and read and write any
// file, as the OS user its cluster runs as. So that this reaches nothing but
// the service's own files, each service's clusters run as a user of its
// own, `basin-<service id>`, made with useradd on the first apply with a uid
// never given before (uids.ts), and removed by the delete once its
// processes are gone and every file it owned is removed.
// Only root can do that; Basin not running as root runs every cluster as
// itself, and says at start that services are not isolated.
//
// The user's comment names the service and this installation (a random tag
// kept in <dataDir>/local/installation): Basin only ever uses, or deletes, a
// user that it made for that very service, never one that merely has the
// name. Every step can be repeated: a user that exists is used, a user that
// is gone is not an error.
//
// The same class makes each service's repository user, `basin-r-<id>`
// (kind 'repository'), from the same uids: the OS user its pgBackRest
// repository and repository server run as, which no tenant is
// (repository/repositories.ts).

import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, link, readFile, rm, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../../lib/logger.js';
import { DriverError } from '../../driver.js';
import { tenantCommand } from './confine.js';
import { HostCheckError } from '../errors.js';
import { CommandError, onPath, run } from './exec.js';
import type { Layout } from '../layout.js';
import { groupExists, readPasswd, type OsUser, type PasswdEntry } from './os-user.js';
import { processesOfUser, signalAll } from './processes.js';
import { idIsFree, ownedFiles, ownsFiles, type AllocateUid, type UidRange } from './uids.js';

export const USER_PREFIX = 'basin-';
/** A repository user's: `basin-r-` never is a service's (ids have no `-`). */
const REPOSITORY_PREFIX = 'basin-r-';
/** The longest user name useradd accepts on Debian (and utmp can hold). */
const NAME_MAX = 32;

/** Whose OS user: a service's (or read replica set's), or a service's repository's. */
export type UserKind = 'service' | 'repository';

/**
 * The OS user name of a service: `basin-<id>` (ids are lowercase
 * alphanumerics). An id too long for that is shortened and made unique
 * again with a hash; the user's comment keeps the whole id.
 */
export function serviceUserName(id: string): string {
  return userName(USER_PREFIX, id);
}

/** The OS user name of a service's repository: `basin-r-<id>`, shortened as a service's. */
export function repositoryUserName(id: string): string {
  return userName(REPOSITORY_PREFIX, id);
}

function userName(prefix: string, id: string): string {
  const plain = prefix + id;
  if (plain.length <= NAME_MAX) return plain;
  const h = createHash('sha256').update(id).digest('hex').slice(0, 8);
  return `${prefix}${id.slice(0, NAME_MAX - prefix.length - h.length - 1)}-${h}`;
}

const COMMENT = /^Basin (service|repository) ([a-z0-9]+) installation ([0-9a-f]{16})$/;
const comment = (kind: UserKind, id: string, installation: string) =>
  `Basin ${kind} ${id} installation ${installation}`;

/**
 * The host's directories where every user may write (Debian's, and POSIX
 * message queues'): a deleted service's files are looked for there, and in
 * Basin's data directory.
 */
const SHARED_WRITABLE_DIRS = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock', '/dev/mqueue'];
const sharedWritableDirs = () => SHARED_WRITABLE_DIRS.filter((d) => existsSync(d));

/** The installation's tag, made once (a random 16 hex digits), kept in the layout. */
export async function ensureInstallation(layout: Layout): Promise<string> {
  const read = async () => {
    const text = (await readFile(layout.installationFile, 'utf8')).trim();
    if (!/^[0-9a-f]{16}$/.test(text)) {
      throw new Error(`${layout.installationFile} does not hold an installation tag`);
    }
    return text;
  };
  try {
    return await read();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  // Written aside and linked into place: a racing start keeps the first tag.
  const tmp = `${layout.installationFile}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, `${randomBytes(8).toString('hex')}\n`, { mode: 0o600 });
  try {
    await chmod(tmp, 0o600);
    await link(tmp, layout.installationFile);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await rm(tmp, { force: true });
  }
  return read();
}

/** Throws a HostCheckError unless the programs that make and remove users are there. */
export function checkUserTools(): void {
  const missing = ['useradd', 'userdel', 'groupdel', 'getent'].filter((t) => !onPath(t));
  if (missing.length > 0) {
    throw new HostCheckError(
      `Basin runs as root and gives every service an OS user of its own, but ${missing.join(', ')} ` +
        'cannot be found: install the passwd package (run: sudo scripts/setup-host.sh).',
    );
  }
}

/**
 * The OS users this installation made for its services and their
 * repositories (for tools and tests that clean up), or of one `kind`.
 */
export function installationUsers(installation: string, kind?: UserKind): PasswdEntry[] {
  return readPasswd().filter((p) => {
    const m = COMMENT.exec(p.comment);
    return (
      m !== null &&
      m[3] === installation &&
      (kind === undefined || m[1] === kind) &&
      p.name.startsWith(USER_PREFIX)
    );
  });
}

/** The id a user of installationUsers was made for. */
export function installationUserId(user: PasswdEntry): string | undefined {
  return COMMENT.exec(user.comment)?.[2];
}

export interface ServiceUsersOptions {
  /** One OS user per service (needs root); otherwise every cluster runs as `shared`. */
  perService: boolean;
  /** Services' users (the default), or their repositories' (no network namespace of their own). */
  kind?: UserKind;
  layout: Layout;
  /** The template user: every cluster's user when not perService. */
  shared: OsUser;
  /** This installation's tag (ensureInstallation). */
  installation: string;
  /** The uids new users get… */
  uidRange: UidRange;
  /** …handed out upward, never twice (uids.ts). */
  allocateUid: AllocateUid;
  /** RLIMIT_NPROC of every process Basin starts as a service's user (node-bounds.ts). */
  nproc?: number;
  /**
   * The services' network namespaces, when they have them
   * (network/service-networks.ts): a user is handed out with its own
   * (OsUser.netns), made first by ensure, so that nothing runs as it
   * anywhere else.
   */
  networks?: {
    ensure(id: string): Promise<{ path: string }>;
    pathOf(id: string): string | undefined;
  };
  log: Logger;
}

export class ServiceUsers {
  /** useradd and userdel one at a time: they lock /etc/passwd, and give up rather than wait. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: ServiceUsersOptions) {}

  get perService(): boolean {
    return this.o.perService;
  }

  private get kind(): UserKind {
    return this.o.kind ?? 'service';
  }

  private nameOf(id: string): string {
    return this.kind === 'service' ? serviceUserName(id) : repositoryUserName(id);
  }

  /**
   * The OS user the service's clusters run as, created when missing, with
   * its network namespace (made when missing too) when services have them.
   */
  async ensure(id: string): Promise<OsUser> {
    if (!this.o.perService) return this.o.shared;
    const user = this.find(id, true) ?? (await this.make(id));
    const networks = this.o.networks;
    return networks?.pathOf(id) === undefined
      ? user
      : { ...user, netns: (await networks.ensure(id)).path };
  }

  private make(id: string): Promise<OsUser> {
    return this.serially(async () => {
      let nameTaken = false;
      let uid: number | undefined;
      for (let attempt = 0; ; attempt++) {
        const made = this.find(id, true);
        if (made) return made;
        const name = this.nameOf(id);
        // A user is only made for an installation that is still there: not
        // for a data directory removed under a running driver.
        if (!existsSync(this.o.layout.installationFile)) {
          throw new DriverError(`${this.o.layout.installationFile} is gone.`, true);
        }
        uid ??= await this.freeUid();
        // The user's own group gets the same id (-U with the system group
        // range narrowed to it); -l keeps it out of lastlog and faillog,
        // which are sparse files indexed by uid.
        const only = (key: string) => ['-K', `${key}_MIN=${uid}`, '-K', `${key}_MAX=${uid}`];
        try {
          await run('useradd', [
            '--system', '--no-create-home', '--home-dir', '/nonexistent',
            '--shell', '/usr/sbin/nologin', '--user-group', '--no-log-init',
            '--uid', String(uid), ...only('SYS_UID'), ...only('SYS_GID'),
            '--comment', comment(this.kind, id, this.o.installation), name,
          ]); // prettier-ignore
          this.o.log.info(
            { serviceId: id, osUser: name, uid },
            `created the ${this.kind}'s OS user`,
          );
        } catch (err) {
          if (attempt < 40 && passwdBusy(err)) {
            await sleep(25 + Math.floor(Math.random() * 50));
            continue;
          }
          // 4: the uid or the gid was taken meanwhile (another program made
          // a user or group): the next one.
          if (err instanceof CommandError && err.exitCode === 4 && attempt < 40) {
            uid = undefined;
            continue;
          }
          // 9: the name is taken. By the user, made meanwhile by another
          // process: found at the next turn. By a group alone, left by a
          // useradd that died half-way: it has no member and the user's name.
          if (err instanceof CommandError && err.exitCode === 9 && !nameTaken) {
            nameTaken = true;
            if (!this.find(id, true) && groupExists(name)) {
              this.o.log.warn({ osUser: name }, 'removing a group left without its user');
              await run('groupdel', [name]).catch(() => {});
            }
            continue;
          }
          throw new DriverError(
            `Could not create the OS user ${name} for the ${this.kind}: ${(err as Error).message}`,
            true,
          );
        }
      }
    });
  }

  /**
   * A uid (and group id) for a new user: the allocator's next candidates,
   * skipping any that the host uses. Permanent error once the range is
   * used up: only the operator can widen it.
   */
  private async freeUid(): Promise<number> {
    const { min, max } = this.o.uidRange;
    for (;;) {
      const n = await this.o.allocateUid();
      if (n > max) {
        throw new DriverError(
          `Every uid of the service user range ${min}-${max} has been given out (uids of deleted ` +
            'services are never given again): an operator must widen --service-uid-range ' +
            '(BASIN_SERVICE_UID_RANGE) upward.',
          false,
        );
      }
      if (n >= min && (await idIsFree(n)) && !(await ownsFiles(n, sharedWritableDirs()))) {
        return n;
      }
      this.o.log.debug({ uid: n }, 'uid in use on this host; trying the next one');
    }
  }

  /**
   * The service's own OS user if it exists (and was made by this
   * installation for this service); undefined otherwise, and always when
   * services share one user.
   */
  lookup(id: string): OsUser | undefined {
    const user = this.o.perService ? this.find(id, false) : undefined;
    const netns = this.o.networks?.pathOf(id);
    return user && netns !== undefined ? { ...user, netns } : user;
  }

  /**
   * Kills every process of the service's user (SIGKILL), wherever it runs:
   * its clusters', and whatever its tsdbadmin started. Returns how many
   * there were; 0 means none is left (zombies aside: they hold nothing).
   * `kill -1` run as the user itself reaches processes forked meanwhile.
   */
  async killAll(user: OsUser): Promise<number> {
    if (!this.isOwnUser(user)) return 0;
    const pids = await processesOfUser(user.uid);
    if (pids.length === 0) return 0;
    signalAll(pids, 'SIGKILL');
    // In its network namespace like every process of the user (none ever
    // runs in the host's): where that is gone already, root's SIGKILLs do.
    if (user.netns === undefined || existsSync(user.netns)) {
      const kill = tenantCommand(user, 'kill', ['-s', 'KILL', '--', '-1']);
      await run(kill.file, kill.args, { timeoutMs: 10_000 }).catch(() => {});
    }
    return pids.length;
  }

  /**
   * SIGKILL to every process of the service's user at once, without
   * looking for them first (`kill -1` run as the user): the storage stop,
   * which must end a writer within milliseconds (a scan of /proc takes
   * a tenth of a second on a busy host). killAll then confirms.
   */
  async killAllNow(user: OsUser): Promise<void> {
    if (!this.isOwnUser(user)) return;
    // In its network namespace, as killAll's.
    if (user.netns !== undefined && !existsSync(user.netns)) return;
    const kill = tenantCommand(user, 'kill', ['-s', 'KILL', '--', '-1']);
    await run(kill.file, kill.args, { timeoutMs: 10_000 }).catch(() => {});
  }

  /**
   * Removes every file the user owns in the host's world-writable
   * directories (/tmp, /var/tmp, /dev/shm, /run/lock, /dev/mqueue) and in
   * Basin's data directory, whatever their modes (a 0311 directory its
   * owner cannot read is no hiding place from root), and its System V IPC
   * objects: nothing it planted (a setuid copy of a shell…) may outlive it.
   * Run as root, after killAll found no process of the user left, so
   * nothing of its own creates files meanwhile (deleteService checks again
   * afterwards). Its files are found where it could have written
   * (ownedFiles: not in other users' private directories), then each one
   * found is removed by find again: it does not follow symbolic links
   * (-P), stays on each file's file system (-xdev), and -delete walks
   * depth first, removing each entry relative to a descriptor of its
   * directory.
   */
  async removeLeftovers(user: OsUser): Promise<void> {
    if (!this.isOwnUser(user)) return;
    const dirs = [...sharedWritableDirs(), this.o.layout.dataDir];
    try {
      const found = await ownedFiles(user.uid, dirs);
      // (In batches: a tenant may have left many files in /tmp itself.)
      for (let i = 0; i < found.length; i += 500) {
        const some = found.slice(i, i + 500);
        await run(
          'find',
          ['-P', ...some, '-ignore_readdir_race', '-xdev', '-uid', String(user.uid), '-delete'],
          { timeoutMs: 600_000 },
        );
      }
    } catch (err) {
      // Files removed meanwhile, or a directory of the user's holding
      // another user's files (kept, with it): said, and the delete goes on.
      this.o.log.warn(
        { osUser: user.name, err: (err as Error).message },
        "some files of a deleted service's OS user could not be removed",
      );
    }
    const args: string[] = [];
    for (const [table, flag] of [
      ['shm', '-m'],
      ['sem', '-s'],
      ['msg', '-q'],
    ] as const) {
      for (const id of await ipcObjectsOf(table, user.uid)) args.push(flag, id);
    }
    if (args.length > 0) await run('ipcrm', args).catch(() => {});
  }

  /** Deletes the service's OS user and its group; nothing when they are gone already. */
  async remove(id: string): Promise<void> {
    const user = this.lookup(id);
    if (!user) return;
    await this.serially(async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          // -f: zombies (this host's init may not reap them) must not keep
          // the user; live processes were killed before (killAll).
          await run('userdel', ['-f', user.name]);
          break;
        } catch (err) {
          if (err instanceof CommandError && err.exitCode === 6) break; // gone already
          if (attempt < 40 && passwdBusy(err)) {
            await sleep(25 + Math.floor(Math.random() * 50));
            continue;
          }
          throw new DriverError(
            `Could not delete the OS user ${user.name}: ${(err as Error).message}`,
            true,
          );
        }
      }
      // userdel removes the user's own group (USERGROUPS_ENAB); where it does not:
      if (groupExists(user.name)) {
        await run('groupdel', [user.name]).catch((err: unknown) => {
          if (!(err instanceof CommandError && err.exitCode === 6)) throw err;
        });
      }
    });
    this.o.log.info({ serviceId: id, osUser: user.name }, `deleted the ${this.kind}'s OS user`);
  }

  /** A user of this installation for this very service; another user of that name is refused. */
  private find(id: string, strict: boolean): OsUser | undefined {
    const name = this.nameOf(id);
    const e = readPasswd().find((p) => p.name === name);
    if (!e) return undefined;
    if (e.comment !== comment(this.kind, id, this.o.installation) || e.uid === 0) {
      if (!strict) return undefined;
      throw new DriverError(
        `The OS user ${name} exists but was not made by this Basin installation for ${this.kind} ` +
          `${id}; Basin will not run anything as it. Remove it (userdel) or move it aside.`,
        false,
      );
    }
    return {
      name: e.name,
      uid: e.uid,
      gid: e.gid,
      ...(this.o.nproc === undefined ? {} : { nproc: this.o.nproc }),
    };
  }

  /** A service's own user: never root, Basin itself or the shared user (whose kill -1 would hit every cluster). */
  private isOwnUser(user: OsUser): boolean {
    return (
      this.o.perService &&
      user.uid > 0 &&
      user.uid !== this.o.shared.uid &&
      user.uid !== process.getuid?.()
    );
  }

  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => {});
    return next;
  }
}

/** useradd/userdel could not lock the password files (another one is at work). */
function passwdBusy(err: unknown): boolean {
  return err instanceof CommandError && /cannot lock|try again later/i.test(err.output);
}

/** Ids of the System V IPC objects (`table`: shm, sem or msg) that `uid` owns. */
async function ipcObjectsOf(table: 'shm' | 'sem' | 'msg', uid: number): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(`/proc/sysvipc/${table}`, 'utf8');
  } catch {
    return [];
  }
  const [header = '', ...rows] = text.split('\n');
  const cols = header.trim().split(/\s+/);
  const idCol = 1; // key, then the id (shmid, semid, msqid)
  const uidCol = cols.indexOf('uid');
  if (uidCol < 0) return [];
  return rows
    .map((r) => r.trim().split(/\s+/))
    .filter((r) => r.length > uidCol && Number(r[uidCol]) === uid)
    .map((r) => r[idCol] as string);
}
