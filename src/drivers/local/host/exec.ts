// Running the few external programs the local driver needs (initdb, openssl,
// cp, chown, rm, useradd, userdel). Always execFile, never a shell: arguments are passed as they are, so
// no path or host name can be interpreted as shell syntax. (The shell
// scripts, confine.ts's and the prelude's here, are constants that take
// their data as arguments.)

import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { isRoot, type OsUser } from './os-user.js';

export interface RunOptions {
  /**
   * Run as this OS user instead of Basin's own (a service's or the
   * template user), always with no_new_privs: see asUser.
   */
  as?: OsUser;
  cwd?: string;
  timeoutMs?: number;
  /** Kills the command (SIGTERM) when it aborts; the promise then rejects. */
  signal?: AbortSignal;
  /**
   * Kill the command when Basin dies (see asUser): for work in staging
   * that the next start removes, or on files a restarted Basin takes up
   * again (pg_basebackup, pg_rewind), which must never go on beside its
   * successor. Never for useradd & co.: killed, they would leave the
   * account files locked.
   */
  diesWithBasin?: boolean;
  /** What Basin, as root, does to the process before anything else: withPrelude. */
  prelude?: Prelude;
  /** Written to the command's standard input (closed after it). */
  input?: string;
}

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly output: string,
    /** How it ended: `exit 1`, `killed by SIGKILL`, `timed out`… */
    readonly ending: string,
    /** The exit status, when the command ran and exited with one. */
    readonly exitCode?: number,
    /** Its standard output alone (`output` has its errors first): what it found before failing. */
    readonly stdout = '',
  ) {
    super(`${command} failed (${ending})${output ? `: ${lastLines(output, 8)}` : ''}`);
    this.name = 'CommandError';
  }
}

/**
 * The environment of every child. Basin's own environment is never passed
 * on: it may hold credentials (BASIN_BOOTSTRAP_API_KEY…), and PostgreSQL
 * honours PG* variables that must not leak in from the operator's shell.
 */
export function childEnv(): NodeJS.ProcessEnv {
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
  };
}

/** A program and its arguments. */
export interface Command {
  file: string;
  args: string[];
}

/**
 * `file args…` run as `user` with no_new_privs (prctl(2)
 * PR_SET_NO_NEW_PRIVS): setuid and setgid bits and file capabilities then
 * raise nothing, at this exec or any later one in the process tree, so
 * nothing a tenant planted can lift a process of a service's user out of it
 * (docs/security.md, confine.ts). As root, setpriv switches every uid and
 * gid (real, effective, saved), drops the supplementary groups and empties
 * even the capability bounding set; before it, for a service's own user,
 * prlimit sets RLIMIT_NPROC, soft and hard (`user.nproc`: node-bounds.ts),
 * which the user's processes can lower, never raise (no CAP_SYS_RESOURCE).
 * Not root, `user` is Basin's own user, and only no_new_privs is set.
 */
export function asUser(
  user: OsUser,
  file: string,
  args: string[],
  options: { diesWithBasin?: boolean } = {},
): Command {
  if (user.netns !== undefined) {
    // Its network namespace is joined before anything else (confine.ts,
    // tenantCommand), which hands this function the user without it.
    throw new Error(`${file}: a tenant's program must be started through confine.ts`);
  }
  // A helper Basin waits for (a backup, a restore) is killed when Basin dies
  // (prctl PR_SET_PDEATHSIG, set after the uids change, so it holds): none
  // is left behind, and the next attempt starts afresh. Never a postmaster's.
  const dies = options.diesWithBasin ? ['--pdeathsig', 'KILL'] : [];
  if (!isRoot()) return { file: 'setpriv', args: ['--no-new-privs', ...dies, '--', file, ...args] };
  const setpriv = [
    `--reuid=${user.uid}`,
    `--regid=${user.gid}`,
    '--clear-groups',
    '--no-new-privs',
    '--bounding-set=-all',
    ...dies,
    '--',
    file,
    ...args,
  ];
  // prlimit sets its own limit, then execs: the same process goes on.
  return user.nproc === undefined
    ? { file: 'setpriv', args: setpriv }
    : { file: 'prlimit', args: [`--nproc=${user.nproc}`, '--', 'setpriv', ...setpriv] };
}

/**
 * What Basin, as root, does to a process it starts before the process
 * becomes anything else (a service's user, namespaces): it joins cgroups
 * (node-cgroups.ts) and gets an oom_score_adj (oom-scores.ts). The
 * process keeps its pid (a postmaster stays the one spawned), and
 * everything it starts inherits both.
 */
export interface Prelude {
  /** Cgroup directories to join; the start fails if one cannot be joined (exit 70, a FATAL line). */
  cgroups?: readonly string[];
  /** Cgroup directories joined where possible (a backup's CPU cap: backup-cgroup.ts). */
  tryCgroups?: readonly string[];
  /** The process's oom_score_adj; the start fails if the kernel refuses it. */
  oomScoreAdj?: number;
}

/**
 * `cmd`, started by a root shell that first does what `p` says to itself
 * (cgroup.procs, /proc/self/oom_score_adj), then execs it. The paths reach
 * the shell only as arguments. A failure fails the start with a FATAL
 * line that the start's error quotes (postmaster.ts, startFailure): a node
 * never runs outside its bounds unnoticed.
 */
export function withPrelude(p: Prelude, cmd: Command): Command {
  if (!p.cgroups?.length && !p.tryCgroups?.length && p.oomScoreAdj === undefined) return cmd;
  return {
    file: 'sh',
    args: [
      '-c', PRELUDE, 'basin-prelude', p.oomScoreAdj === undefined ? '' : String(p.oomScoreAdj),
      ...(p.cgroups ?? []), '--', ...(p.tryCgroups ?? []), '--', cmd.file, ...cmd.args,
    ],
  }; // prettier-ignore
}

const PRELUDE = `
oom=$1
shift
while [ "$1" != -- ]; do
  echo $$ >"$1/cgroup.procs" || { echo "FATAL: basin: could not join the cgroup $1" >&2; exit 70; }
  shift
done
shift
while [ "$1" != -- ]; do
  echo $$ 2>/dev/null >"$1/cgroup.procs"
  shift
done
shift
if [ -n "$oom" ]; then
  echo "$oom" >/proc/self/oom_score_adj || { echo "FATAL: basin: could not set oom_score_adj to $oom" >&2; exit 70; }
fi
exec "$@"
`;

/** Whether `tool` is an executable on the children's PATH. */
export function onPath(tool: string): boolean {
  return (childEnv().PATH ?? '').split(':').some((d) => {
    try {
      accessSync(join(d, tool), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Runs `file args…` and resolves with its stdout; rejects with a CommandError carrying its output. */
export function run(file: string, args: string[], options: RunOptions = {}): Promise<string> {
  const command = [file, ...args].join(' ');
  if (options.as?.netns !== undefined) {
    // Its network namespace must be joined first (confine.ts): refused
    // here rather than run in the host's network.
    return Promise.reject(
      new Error(`${command}: a tenant's program must be started through confine.ts`),
    );
  }
  const dies = options.diesWithBasin === true;
  const bare = options.as
    ? asUser(options.as, file, args, { diesWithBasin: dies })
    : dies
      ? { file: 'setpriv', args: ['--pdeathsig', 'KILL', '--', file, ...args] }
      : { file, args };
  const exec = options.prelude ? withPrelude(options.prelude, bare) : bare;
  return new Promise((resolve, reject) => {
    const child = execFile(
      exec.file,
      exec.args,
      {
        cwd: options.cwd,
        env: childEnv(),
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 4 * 1024 * 1024,
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (err, stdout, stderr) => {
        if (err) {
          const code = (err as NodeJS.ErrnoException).code;
          const ending =
            code === 'ENOENT'
              ? 'not found'
              : code === 'ABORT_ERR'
                ? 'aborted'
                : err.killed
                  ? 'timed out'
                  : err.signal
                    ? `killed by ${err.signal}`
                    : `exit ${String((err as { code?: unknown }).code ?? err.message)}`;
          const status = (err as { code?: unknown }).code;
          const exitCode = typeof status === 'number' ? status : undefined;
          reject(new CommandError(command, `${stderr}${stdout}`.trim(), ending, exitCode, stdout));
        } else {
          resolve(stdout);
        }
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/**
 * What a failed command said, for an error message: its last lines and how
 * it ended (`exit 1`, `killed by SIGKILL`, `timed out`), never its command
 * line (a prelude's script, a tenant's paths). Another error: its message.
 */
export function failureOf(err: unknown, lines = 4): string {
  if (!(err instanceof CommandError)) return err instanceof Error ? err.message : String(err);
  const said = lastLines(err.output, lines);
  return said ? `${said} (${err.ending})` : err.ending;
}

/** The last `n` non-empty lines of a text, joined with ' | ' to fit an error message. */
export function lastLines(text: string, n: number): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-n)
    .join(' | ');
}
