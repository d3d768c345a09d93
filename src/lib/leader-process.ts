// A leader's name in the leadership lease, and fencing a leader of this host
// that lost its lease without letting go of it.
//
// The guard (engine/leadership.ts, mayAct) stops a leader from starting a
// step once its lease may have lapsed, and the store refuses its writes by
// term; but a step already under way (a clone and its rename, a spawn) is
// past the guard. A leader paused in one (SIGSTOP, a long stall) would carry
// it on when it resumes, beside its successor. So a new leader first kills
// the one it replaces when that one runs on its own host, before it acts:
// what the old one left half done is then exactly what a kill -9 leaves,
// which the driver's start adopts or cleans up. (A leader on another host
// cannot be killed from here: its host steps are bounded by its guard, and
// its store writes by the fence. docs/decisions.md, "Several processes".)
//
// The name is `<host>/<pid>/<start>`: the process's start time (clock ticks
// since boot) and the boot's id tell it from a later process given the same
// pid, so a successor never kills a stranger.

import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

const HOLDER = /^(.+)\/(\d+)\/(\d+)\.([0-9a-f]+)$/;

/** This process's name as a lease holder. */
export function leaderHolder(): string {
  return holderOf(process.pid);
}

/** The name of a process of this host as a lease holder. */
export function holderOf(pid: number): string {
  return `${hostname()}/${pid}/${startTicks(pid) ?? 0}.${bootId()}`;
}

/** What fencing a former holder did. */
export type Fenced =
  /** It ran on this host and was killed (and is gone). */
  | 'killed'
  /** No process of that name runs on this host any more. */
  | 'gone'
  /** It is not of this host (or not a name of this form): not ours to kill. */
  | 'elsewhere'
  /** It is this process (a lease it held before, in this process). */
  | 'self';

/**
 * Kills the process a lease names when it runs on this host, and waits
 * (5 s at most) until it has stopped running anything.
 */
export async function fenceHolder(holder: string): Promise<Fenced> {
  const m = HOLDER.exec(holder);
  if (!m || m[1] !== hostname() || m[4] !== bootId()) return 'elsewhere';
  const pid = Number(m[2]);
  if (pid === process.pid) return 'self';
  if (startTicks(pid) !== Number(m[3])) return 'gone';
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return 'gone';
  }
  // A killed process runs nothing once it is a zombie (nobody may reap it here).
  for (let i = 0; i < 250 && running(pid, Number(m[3])); i++) await sleep(20);
  return 'killed';
}

/** Field 22 of /proc/<pid>/stat, the start time; undefined when there is no such process. */
function startTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) S …": comm may hold spaces and parentheses; fields 3… follow the last ")".
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return undefined;
  }
}

function running(pid: number, start: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[19]) === start && fields[0] !== 'Z' && fields[0] !== 'X';
  } catch {
    return false;
  }
}

let boot: string | undefined;

/** The first eight hex digits of this boot's id (a pid and start time are unique within one boot). */
function bootId(): string {
  if (boot === undefined) {
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').replace(/-/g, '').slice(0, 8);
    } catch {
      boot = '0';
    }
  }
  return boot;
}
