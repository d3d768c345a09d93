// How every process of a service's OS user is started (docs/security.md).
//
// A service's tsdbadmin runs whatever it likes as the service's OS user
// (PostgreSQL 15's CREATEROLE lets it grant itself pg_execute_server_program).
// Two things keep that from reaching further:
//
// - no_new_privs. Every process run as a service's user (its postmaster, and
//   so every backend and every `COPY … TO PROGRAM`; initdb; `kill -1`) starts
//   under `setpriv --no-new-privs`, with an empty capability bounding set:
//   the kernel then ignores setuid/setgid bits and file capabilities at
//   every exec in that process tree (prctl(2) PR_SET_NO_NEW_PRIVS). A setuid
//   copy of a shell, whoever's it is, runs with the caller's uid.
// - A mount namespace of its own for each postmaster, where the host allows
//   it: private, size-limited tmpfs on /tmp, /var/tmp, /dev/shm and
//   /run/lock (the host's world-writable directories), an IPC namespace
//   (System V IPC and POSIX message queues), and a /proc that shows only
//   the user's own processes (hidepid=invisible). What a tenant leaves there
//   lives and dies with its server, and no other tenant sees it.
//
// - A network namespace of its own for each service's (or read replica
//   set's) OS user, where services have them (network/service-networks.ts):
//   every process of that user, whatever starts it (its postmaster,
//   PgBouncer, the helpers Basin runs as it: pgBackRest, pg_basebackup,
//   pg_rewind, the `kill -1` of a delete), joins it before anything else,
//   so none ever runs in the host's network (a tenant can trace any process
//   of its own uid: one left in the host's network would be a way back).
//   The user carries it (OsUser.netns); asUser refuses such a user, so that
//   the only way to start one of its processes is tenantCommand here.
//
// The postmaster must stay the process Node spawned (its pid is what
// postmaster.pid holds and what a restarted Basin adopts), so nothing forks
// on the way: nsenter and unshare (without --fork), sh, setpriv and
// postgres each exec the next one in the same process. Paths reach the
// shell only as positional arguments, never inside the script's text.

import { readFile, readlink } from 'node:fs/promises';
import { statSync } from 'node:fs';
import type { Logger } from '../../../lib/logger.js';
import { HostCheckError } from '../errors.js';
import { asUser, type Command, onPath, run } from './exec.js';
import { isRoot, type OsUser } from './os-user.js';
import { isLive } from './processes.js';

/** The host's directories that every user may write to (Debian), made private per service. */
export const PRIVATE_DIRS = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];

/** A service server's private directories, when the host allows them (detectPrivateTmp). */
export interface PrivateTmp {
  /** The mount points made private: those of PRIVATE_DIRS that exist on the host. */
  dirs: string[];
  /** The size of each private tmpfs, in MiB. */
  sizeMb: number;
  /** Whether /proc is mounted afresh with hidepid=invisible. */
  hideProcesses: boolean;
  /**
   * The driver's root (<dataDir>/local). When it lies under one of `dirs`
   * (a data directory in /tmp), it is bound back into place over the
   * private tmpfs, or PostgreSQL would lose its own files.
   */
  keep: string;
}

export type PrivateTmpMode = 'auto' | 'on' | 'off';

/**
 * The script run by `sh -c` inside the new namespaces. Its arguments: the
 * tmpfs size, the directory to keep visible, whether to hide other users'
 * processes, the mount points, `--`, then the command it execs. Everything
 * it mounts is private to the namespace (unshare --propagation private);
 * /dev/mqueue, where the host has it, shows the namespace's own queues.
 * The directories it makes on the way to `keep` are 0711 (umask 066):
 * crossed, not listed. The descriptor of `keep` is closed before the exec:
 * it must not reach the server, whose user could list `keep` through it.
 * The other services' network namespaces, which the copy of the host's
 * mounts holds in /run/netns, are unmounted there: the server's mount
 * namespace would otherwise keep them alive after their services' delete
 * (its own network was joined before, by nsenter). `ip netns` makes
 * /run/netns a mount point of its own, so one lazy unmount of it detaches
 * them all; one umount per namespace (a process each) is the fallback:
 * with a namespace per service, that cost every confined start a process
 * per service on the host (seconds on a busy host with a few dozen).
 */
const SCRIPT = `
fail() { echo "FATAL: basin: $*" >&2; exit 70; }
umask 066
size=$1 keep=$2 hide=$3
shift 3
exec 3<"$keep" || fail "cannot open $keep"
while [ "$1" != -- ]; do
  mount -t tmpfs -o "size=$size,mode=1777,nosuid,nodev" basin-private "$1" || fail "could not mount a private $1"
  case "$keep" in
    "$1"/*)
      mkdir -p "$keep" && mount --no-canonicalize --bind /proc/self/fd/3 "$keep" ||
        fail "could not keep $keep visible under the private $1" ;;
  esac
  shift
done
shift
exec 3<&-
if [ -d /dev/mqueue ]; then
  mount -t mqueue -o nosuid,nodev,noexec basin-mqueue /dev/mqueue || fail "could not mount a private /dev/mqueue"
fi
umount -l /run/netns 2>/dev/null ||
  for ns in /run/netns/*; do
    [ -e "$ns" ] && umount -l "$ns" 2>/dev/null
  done
if [ "$hide" = yes ]; then
  mount -t proc -o hidepid=invisible,nosuid,nodev,noexec basin-proc /proc || fail "could not mount a private /proc"
fi
exec "$@"
`;

/** `command` started in namespaces of its own with the private directories of `p` (as root). */
export function inPrivateTmp(p: PrivateTmp, command: Command): Command {
  return {
    file: 'unshare',
    args: [
      '--mount', '--ipc', '--propagation', 'private', '--',
      'sh', '-c', SCRIPT, 'basin-confine',
      `${p.sizeMb}m`, p.keep, p.hideProcesses ? 'yes' : 'no', ...p.dirs, '--',
      command.file, ...command.args,
    ],
  }; // prettier-ignore
}

/** `command` run in the network namespace whose file is `path` (as root: nsenter execs it in place). */
export function inNetns(path: string, command: Command): Command {
  return { file: 'nsenter', args: [`--net=${path}`, '--', command.file, ...command.args] };
}

/**
 * The one way a process of a tenant's OS user starts: in the user's
 * network namespace (when it has one), first; then in a mount and IPC
 * namespace of its own with private /tmp & co. (when `privateTmp`); then
 * as the user, with no_new_privs and an empty bounding set (asUser).
 */
export function tenantCommand(
  user: OsUser,
  file: string,
  args: string[],
  how: { privateTmp?: PrivateTmp | undefined; diesWithBasin?: boolean } = {},
): Command {
  const { netns, ...bare } = user;
  let cmd = asUser(bare, file, args, { diesWithBasin: how.diesWithBasin === true });
  if (how.privateTmp && isRoot()) cmd = inPrivateTmp(how.privateTmp, cmd);
  return netns === undefined ? cmd : inNetns(netns, cmd);
}

/**
 * How a postmaster (or PgBouncer) of `user` is started: in its network
 * namespace, with no_new_privs, and in its own namespaces when
 * `privateTmp` is given.
 */
export function postmasterCommand(
  user: OsUser,
  postgres: string,
  args: string[],
  privateTmp: PrivateTmp | undefined,
  options: { diesWithBasin?: boolean } = {},
): Command {
  return tenantCommand(user, postgres, args, { privateTmp, ...options });
}

/**
 * How Basin runs a helper program as a service's user (pgBackRest's
 * backups, restores and expiry): confined as its postmaster is, with
 * no_new_privs and in namespaces of its own with private /tmp & co., and
 * killed if Basin dies (the next attempt starts it again). Its namespaces
 * are not the postmaster's: what it shares with the server lies in the
 * service's own directories under the driver's root, which stays visible.
 */
export function helperCommand(
  user: OsUser,
  file: string,
  args: string[],
  privateTmp: PrivateTmp | undefined,
): Command {
  return tenantCommand(user, file, args, { privateTmp, diesWithBasin: true });
}

/**
 * Whether this host gives servers private directories: tried once, at
 * start, by running the very script the servers run (with `true` as the
 * program). Without /proc's hidepid=invisible (Linux before 5.8) the rest
 * is still used. 'off' never tries; 'on' throws a HostCheckError when it
 * does not work; 'auto' warns once and falls back to the shared
 * directories, which the delete of a service sweeps (service-users.ts).
 */
export async function detectPrivateTmp(
  mode: PrivateTmpMode,
  base: Omit<PrivateTmp, 'dirs' | 'hideProcesses'>,
  log: Logger,
): Promise<PrivateTmp | undefined> {
  if (mode === 'off' || !isRoot()) return undefined;
  const dirs = PRIVATE_DIRS.filter((d) => {
    try {
      return statSync(d).isDirectory();
    } catch {
      return false;
    }
  });
  let lastError = '';
  for (const hideProcesses of [true, false]) {
    const p: PrivateTmp = { ...base, dirs, hideProcesses };
    const probe = inPrivateTmp({ ...p, sizeMb: 1 }, { file: 'true', args: [] });
    try {
      await run(probe.file, probe.args, { timeoutMs: 10_000 });
      return p;
    } catch (err) {
      lastError = (err as Error).message;
    }
  }
  const why =
    'this host does not let Basin give each service a private /tmp, /var/tmp, /dev/shm and ' +
    `/run/lock (a mount namespace: ${lastError})`;
  if (mode === 'on') {
    throw new HostCheckError(
      `${why}. Run Basin where it may create mount namespaces (as root, with CAP_SYS_ADMIN), ` +
        'or set --service-private-tmp auto or off.',
    );
  }
  log.warn(
    { err: lastError },
    `WARNING: ${why}. Services share the host's world-writable directories; what a deleted ` +
      "service's OS user left there is removed when it is deleted (docs/security.md).",
  );
  return undefined;
}

/**
 * Whether the process `pid` runs as this driver starts servers: with
 * no_new_privs, in its network namespace when it has one (`inNetwork`),
 * and, when `privateTmp`, in a mount namespace other than Basin's. A
 * server started by an older Basin is not; one that exited meanwhile
 * counts as confined (there is nothing left to confine).
 */
export async function isConfined(
  pid: number,
  privateTmp: boolean,
  inNetwork: (pid: number) => Promise<boolean> = async () => true,
): Promise<boolean> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    if (!/^NoNewPrivs:\s+1$/m.test(status)) return false;
    if (!(await inNetwork(pid)) && (await isLive(pid))) return false;
    if (!privateTmp) return true;
    const [theirs, ours] = await Promise.all([
      readlink(`/proc/${pid}/ns/mnt`),
      readlink('/proc/self/ns/mnt'),
    ]);
    return theirs !== ours;
  } catch {
    return true;
  }
}

/** Throws a HostCheckError unless the programs that confine servers are there. */
export function checkConfineTools(): void {
  const missing = ['setpriv', 'unshare'].filter((t) => !onPath(t));
  if (missing.length > 0) {
    throw new HostCheckError(
      `${missing.join(' and ')} cannot be found; Basin starts every service's processes with them: ` +
        'install util-linux (run: sudo scripts/setup-host.sh).',
    );
  }
}
