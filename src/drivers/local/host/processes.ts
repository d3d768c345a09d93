// What /proc says about PostgreSQL processes. Signals alone cannot tell a
// live process from a zombie (kill(pid, 0) succeeds on both), and this
// host's init does not reap orphans: a postmaster that outlived the Basin
// that started it stays a zombie after it exits. So liveness is read from
// /proc/<pid>/stat, and a process is attributed to a cluster by where it
// runs: the postmaster chdirs into its data directory and every child it
// forks inherits that working directory (children rewrite their command
// line into "postgres: …", so the cmdline cannot identify them).

import { readdir, readFile, readlink } from 'node:fs/promises';

/** The one-letter state of a process ("R", "S", "Z"…), or undefined when it does not exist. */
export async function procState(pid: number): Promise<string | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) S …": comm may contain spaces and parentheses; the state
    // follows the last ")".
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

/** A process that exists and has not exited (zombies "Z" and dead "X" have). */
export async function isLive(pid: number): Promise<boolean> {
  const state = await procState(pid);
  return state !== undefined && state !== 'Z' && state !== 'X';
}

export async function procCmdline(pid: number): Promise<string[]> {
  try {
    // NUL-separated arguments, with a trailing NUL.
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return raw.replace(/\0$/, '').split('\0');
  } catch {
    return [];
  }
}

export async function procCwd(pid: number): Promise<string | undefined> {
  try {
    return await readlink(`/proc/${pid}/cwd`);
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a live postmaster started as `postgres -D <pgdata>`. */
export async function isPostmasterOf(pid: number, pgdata: string): Promise<boolean> {
  if (!(await isLive(pid))) return false;
  const argv = await procCmdline(pid);
  const d = argv.indexOf('-D');
  return /(^|\/)postgres$/.test(argv[0] ?? '') && d >= 0 && argv[d + 1] === pgdata;
}

/** Every live process working in `pgdata`: a postmaster and its children, or orphans of a dead one. */
export async function clusterProcesses(pgdata: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    if ((await procCwd(pid)) === pgdata && (await isLive(pid))) pids.push(pid);
  }
  return pids;
}

/**
 * Every live process working in or on one of `dirs`: its working directory
 * lies inside one, or an argument names a path inside one (`postgres -D
 * <dir>/pgdata`, `pg_basebackup -D …`).
 */
export async function processesUnder(dirs: readonly string[]): Promise<number[]> {
  if (dirs.length === 0) return [];
  const inside = (p: string | undefined) =>
    p !== undefined && dirs.some((d) => p === d || p.startsWith(`${d}/`));
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    const working = inside(await procCwd(pid)) || (await procCmdline(pid)).some(inside);
    if (working && (await isLive(pid))) pids.push(pid);
  }
  return pids;
}

/** Sends `signal` to each pid, ignoring the ones that are already gone. */
export function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Gone meanwhile: that is what we wanted.
    }
  }
}

/**
 * Live processes of an OS user: any of their user ids (real, effective,
 * saved, filesystem) is `uid`. Used for a service's own OS user, whose
 * processes are its cluster's and whatever its tsdbadmin started with COPY
 * … TO PROGRAM, wherever they run.
 */
export async function processesOfUser(uid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let status: string;
    try {
      status = await readFile(`/proc/${name}/status`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const state = /^State:\s+(\S)/m.exec(status)?.[1];
    if (state === undefined || state === 'Z' || state === 'X') continue;
    const uids = (/^Uid:\s+(.*)$/m.exec(status)?.[1] ?? '').trim().split(/\s+/).map(Number);
    if (uids.includes(uid)) pids.push(Number(name));
  }
  return pids;
}
