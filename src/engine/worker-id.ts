// Who holds a lease. A worker id names the host and process that run an
// engine, so that a restarted Basin can tell its dead predecessor's leases
// (release them at once, resume the work) from those of another Basin that
// shares the store and is alive (leave them until they expire).

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

const WORKER_ID = /^(.+)\/(\d+)\/([0-9a-f]+)$/;

/** `<host>/<pid>/<nonce>`; the nonce tells engines of one process apart. */
export function newWorkerId(host = hostname(), pid = process.pid): string {
  return `${host}/${pid}/${randomBytes(4).toString('hex')}`;
}

export interface Self {
  host: string;
  pid: number;
  /** Whether a process runs on this host (injectable for tests). */
  runs(pid: number): boolean;
}

const SELF: Self = { host: hostname(), pid: process.pid, runs: processRuns };

/**
 * Whether `worker`, not this engine, is certainly dead: an engine of this host
 * whose process no longer runs, or an earlier engine with this process's pid
 * (one engine runs per process; a pid seen again on this host after a restart
 * is ours now). Workers of other hosts, and ids of another form, are never
 * judged dead here: their leases are taken only once they expire.
 */
export function isDeadWorker(worker: string, self: Self = SELF): boolean {
  const m = WORKER_ID.exec(worker);
  if (!m || m[1] !== self.host) return false;
  const pid = Number(m[2]);
  return pid === self.pid || !self.runs(pid);
}

/** Whether a process with this pid exists and has not exited (a zombie has). */
export function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists, as another user's process.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).charAt(0);
    return state !== 'Z' && state !== 'X';
  } catch (err) {
    // No /proc (not Linux): kill(0) answered already.
    return (err as NodeJS.ErrnoException).code !== 'ENOENT' || !existsProc();
  }
}

function existsProc(): boolean {
  try {
    readFileSync('/proc/self/stat');
    return true;
  } catch {
    return false;
  }
}
