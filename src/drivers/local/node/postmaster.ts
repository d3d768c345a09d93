// Starting, observing and stopping one PostgreSQL server (a "postmaster").
//
// The postmaster is spawned directly by Node, not through pg_ctl: pg_ctl
// would leave it a grandchild that nobody reaps on this host, and an
// unreaped (zombie) postmaster still looks alive to PostgreSQL's own lock
// file check. Spawned `detached` (its own session) with its output in a file,
// it keeps running when Basin exits; while Basin runs, Node reaps it.
//
// Whether it runs is read from postmaster.pid, which PostgreSQL writes in
// the data directory (https://www.postgresql.org/docs/15/server-start.html):
// line 1 the pid, line 8 the status ("starting", "ready", "stopping",
// "standby"), checked against /proc so that a stale file, a recycled pid or
// a zombie is never taken for a running server.

import { spawn } from 'node:child_process';
import { closeSync, fchmodSync, openSync } from 'node:fs';
import { readdir, readFile, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { postmasterCommand, type PrivateTmp } from '../host/confine.js';
import { childEnv, type Prelude, withPrelude } from '../host/exec.js';
import type { OsUser } from '../host/os-user.js';
import { clusterProcesses, isPostmasterOf, signalAll } from '../host/processes.js';
import { type SafeDir, withSafeDir } from '../host/files/safe-dir.js';
import { readSmallFile } from '../host/files/safe-fs.js';

export type PostmasterStatus =
  | { up: false }
  | { up: true; pid: number; state: 'starting' | 'ready' | 'stopping' | 'standby' | 'unknown' };

/** What postmaster.pid and /proc say about the server of `pgdata`. */
export async function postmasterStatus(pgdata: string): Promise<PostmasterStatus> {
  let text: string;
  try {
    // The service's user can put anything there: a few lines of a regular file, or nothing.
    text = await readSmallFile(join(pgdata, 'postmaster.pid'), { maxBytes: 4096 });
  } catch {
    return { up: false };
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !(await isPostmasterOf(pid, pgdata))) {
    return { up: false };
  }
  const raw = (lines[7] ?? '').trim();
  const state =
    raw === 'starting' || raw === 'ready' || raw === 'stopping' || raw === 'standby'
      ? raw
      : 'unknown';
  return { up: true, pid, state };
}

/** The port a running server listens on, as its postmaster.pid says (line 4). */
export async function postmasterPort(pgdata: string): Promise<number | undefined> {
  try {
    const text = await readSmallFile(join(pgdata, 'postmaster.pid'), { maxBytes: 4096 });
    const port = Number(text.split('\n')[3]);
    return Number.isInteger(port) && port > 0 && port < 65536 ? port : undefined;
  } catch {
    return undefined;
  }
}

/** How a postmaster this process spawned ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Spawned {
  pid: number;
  /** Set when the process has exited (Node reaped it). */
  exit?: Exit;
}

/** Postmasters this process started, by data directory, to report how a failed start ended. */
export type SpawnedServers = Map<string, { proc: Spawned; sawReady: boolean }>;

/** Startup output beyond this is dropped at the next start, so the file never grows without bound. */
const STARTUP_LOG_MAX = 1024 * 1024;

/**
 * Starts `postgres -D pgdata` as `user`, detached, its output appended to
 * `logFile`: with no_new_privs, and in namespaces of its own with private
 * /tmp & co. when `privateTmp` is given (confine.ts). The spawned process
 * becomes the postmaster itself (each step execs the next), so its pid is
 * the one postmaster.pid holds; with `prelude`, it first joins its node's
 * cgroups (node-cgroups.ts) and gets its oom_score_adj (oom-scores.ts),
 * with `env` besides the children's usual environment. The caller must
 * have made sure no server or leftover process of this data directory
 * runs (see prepareStart).
 */
export async function spawnPostmaster(options: {
  pgBin: string;
  pgdata: string;
  logFile: string;
  user: OsUser;
  privateTmp?: PrivateTmp;
  /** Killed when Basin dies (a template's set-up server); a service's outlives Basin. */
  diesWithBasin?: boolean;
  /** What Basin, as root, does first: the node's cgroups, its oom_score_adj. */
  prelude?: Prelude;
  /** More environment (PostgreSQL's PG_OOM_ADJUST_FILE and PG_OOM_ADJUST_VALUE). */
  env?: Record<string, string>;
}): Promise<Spawned> {
  const { pgBin, pgdata, logFile, user } = options;
  try {
    if ((await stat(logFile)).size > STARTUP_LOG_MAX) await truncate(logFile, 0);
  } catch {
    // No log yet.
  }
  const cmd = postmasterCommand(user, join(pgBin, 'postgres'), ['-D', pgdata], options.privateTmp, {
    diesWithBasin: options.diesWithBasin === true,
  });
  return spawnTenantDaemon(
    options.prelude ? withPrelude(options.prelude, cmd) : cmd,
    pgdata,
    logFile,
    options.env,
  );
}

/**
 * Starts a tenant's daemon (a postmaster, a PgBouncer), already wrapped as
 * the service's OS user and confined (confine.ts), detached from Basin so
 * that it outlives a restart, with its output appended to `logFile`
 * (root's record: 0600 whatever an older file had, open's mode applying
 * only to a new one), and `env` added to the children's environment. The
 * returned record learns the exit while Basin runs.
 */
export function spawnTenantDaemon(
  cmd: { file: string; args: string[] },
  cwd: string,
  logFile: string,
  env: Record<string, string> = {},
): Spawned {
  const fd = openSync(logFile, 'a', 0o600);
  try {
    fchmodSync(fd, 0o600);
    const child = spawn(cmd.file, cmd.args, {
      cwd,
      detached: true,
      stdio: ['ignore', fd, fd],
      env: { ...childEnv(), ...env },
    });
    const spawned: Spawned = { pid: child.pid ?? -1 };
    child.on('exit', (code, signal) => (spawned.exit = { code, signal }));
    child.on('error', () => (spawned.exit ??= { code: null, signal: null }));
    child.unref();
    if (child.pid === undefined) spawned.exit = { code: null, signal: null };
    return spawned;
  } finally {
    closeSync(fd);
  }
}

/**
 * Before starting a server whose postmaster is gone: kill what is left of
 * the old one (children orphaned by a postmaster killed with SIGKILL keep the
 * shared memory attached, and PostgreSQL must not start beside them), then
 * remove its lock files: postmaster.pid and the socket's .s.PGSQL.<port>.lock.
 * PostgreSQL removes stale ones itself, but it tests the pid in them with
 * kill(pid, 0), which succeeds on a zombie, and a postmaster that outlived
 * the Basin that spawned it stays a zombie here once it dies.
 * Returns false while leftovers are still exiting.
 */
export async function prepareStart(pgdata: string, socketDir: string): Promise<boolean> {
  const leftovers = await clusterProcesses(pgdata);
  if (leftovers.length > 0) {
    signalAll(leftovers, 'SIGKILL');
    return false;
  }
  await rm(join(pgdata, 'postmaster.pid'), { force: true });
  let names: string[] = [];
  try {
    names = await readdir(socketDir);
  } catch {
    // No socket directory yet.
  }
  for (const name of names.filter((n) => n.startsWith('.s.PGSQL.'))) {
    await rm(join(socketDir, name), { force: true });
  }
  return true;
}

/**
 * Why a server did not start, for an error message: the errors of its
 * startup output and the last FATAL/PANIC of its newest JSON log (what
 * happens after the log collector started, such as a busy port or a lock
 * file, is only there). The JSON log is read only if it belongs to `owner`
 * (the cluster's OS user): the message goes to the service's owner, and a
 * link to another service's log must not show it.
 */
export async function startFailure(
  logFile: string,
  logDir: string,
  owner: number,
): Promise<string> {
  const parts: string[] = [];
  try {
    const startup = (await readFile(logFile, 'utf8')).split('\n');
    parts.push(...startup.filter((l) => /(FATAL|PANIC|ERROR):/.test(l)).slice(-3));
  } catch {
    // No startup output.
  }
  try {
    const lines = (await withSafeDir(logDir, owner, newestLogTail)).split('\n');
    for (const line of lines.slice(-50)) {
      try {
        const e = JSON.parse(line) as { error_severity?: string; message?: string };
        if (e.error_severity === 'FATAL' || e.error_severity === 'PANIC') {
          parts.push(`${e.error_severity}: ${e.message ?? ''}`);
        }
      } catch {
        // Not a complete JSON line.
      }
    }
  } catch {
    // No logs yet.
  }
  return parts.slice(-3).join(' | ');
}

/**
 * The last 64 KiB of the newest JSON log in `dir` (opened without following
 * a link, as every file in it: safe-dir.ts), of its owner's; '' without one.
 */
async function newestLogTail(dir: SafeDir): Promise<string> {
  const newest = (await dir.names(10_000))
    .filter((f) => f.endsWith('.json'))
    .sort()
    .at(-1);
  if (newest === undefined) return '';
  const fh = await dir.file(newest);
  try {
    const size = (await fh.stat()).size;
    const len = Math.min(size, 64 * 1024);
    const buf = Buffer.alloc(len);
    const { bytesRead } = await fh.read(buf, 0, len, size - len);
    return buf.toString('utf8', 0, bytesRead);
  } finally {
    await fh.close();
  }
}

export type StopMode = 'fast' | 'immediate';

/**
 * Stops servers step by step without blocking: each call sends at most one
 * signal and says how long to wait before calling again.
 * - fast (SIGINT): disconnects clients, writes a shutdown checkpoint; the
 *   next start needs no recovery. Used for stop, restart and resize.
 * - immediate (SIGQUIT): exits at once; the next start replays WAL. Used
 *   when fast takes too long, and for delete (the data is going away).
 * - SIGKILL to every process of the cluster when even that hangs.
 * https://www.postgresql.org/docs/15/server-shutdown.html
 */
export class Stopper {
  private readonly stops = new Map<string, { pid: number; since: number; sent: NodeJS.Signals }>();

  constructor(
    private readonly fastTimeoutMs = 30_000,
    private readonly immediateTimeoutMs = 10_000,
  ) {}

  /** One step of stopping the postmaster `pid` of `pgdata`; returns ms to wait. */
  async step(pgdata: string, pid: number, mode: StopMode, now = Date.now()): Promise<number> {
    const cur = this.stops.get(pgdata);
    if (!cur || cur.pid !== pid) {
      const sent = mode === 'fast' ? 'SIGINT' : 'SIGQUIT';
      signalAll([pid], sent);
      this.stops.set(pgdata, { pid, since: now, sent });
      return 100;
    }
    const elapsed = now - cur.since;
    if (cur.sent === 'SIGINT' && (mode === 'immediate' || elapsed > this.fastTimeoutMs)) {
      signalAll([pid], 'SIGQUIT');
      this.stops.set(pgdata, { pid, since: now, sent: 'SIGQUIT' });
    } else if (cur.sent === 'SIGQUIT' && elapsed > this.immediateTimeoutMs) {
      signalAll([pid, ...(await clusterProcesses(pgdata))], 'SIGKILL');
      cur.sent = 'SIGKILL';
    }
    return Math.min(1000, 100 + Math.floor(elapsed / 10));
  }

  /**
   * Records that the driver stopped the server of `pgdata` by other means
   * (the storage stop kills its processes outright): busy, so that it is
   * taken for no death; nothing is signalled here.
   */
  killed(pgdata: string, now = Date.now()): void {
    if (!this.stops.has(pgdata)) this.stops.set(pgdata, { pid: 0, since: now, sent: 'SIGKILL' });
  }

  /** Whether a stop of this very postmaster is under way. */
  stopping(pgdata: string, pid: number): boolean {
    return this.stops.get(pgdata)?.pid === pid;
  }

  /** Whether the driver is stopping (or has stopped, to start again) the server of `pgdata`. */
  busy(pgdata: string): boolean {
    return this.stops.has(pgdata);
  }

  forget(pgdata: string): void {
    this.stops.delete(pgdata);
  }
}
