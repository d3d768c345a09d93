// The uids of the services' OS users. Each service's user gets a uid from a
// range of its own (by default far above Debian's system and login users),
// handed out upward and never twice: Basin records the highest it gave in
// its store (basin.ts), so a deleted service's uid never comes back. Files
// its user left anywhere, and that the delete did not find, can then never
// belong to another service (docs/security.md). A candidate that anything
// on the host already uses is skipped.

import { readFileSync } from 'node:fs';
import { CommandError, run } from './exec.js';
import { processesOfUser } from './processes.js';

export interface UidRange {
  min: number;
  max: number;
}

/** The default: far above Debian's system (100-999) and login (1000-60000) users. */
export const DEFAULT_UID_RANGE: UidRange = { min: 2_000_000, max: 2_999_999 };

/**
 * The next candidate uid: greater than every one it returned before, ever,
 * and at least the range's start. basin.ts keeps the mark in the store.
 */
export type AllocateUid = () => Promise<number>;

/**
 * Counts up in memory from the range's start: for tests and tools that run
 * the driver without a store. A restarted process gives the same uids again.
 */
export function memoryUidAllocator(range: UidRange): AllocateUid {
  let next = range.min;
  return async () => next++;
}

/**
 * Whether `n` can be a new user's uid and group id: no user or group has it
 * (asked through NSS, so LDAP & co. count), no process runs with it (one
 * left by a user deleted outside Basin), and it is not a subordinate id
 * (/etc/subuid, /etc/subgid) given to some user's containers.
 */
export async function idIsFree(n: number): Promise<boolean> {
  if (inSubordinateRange('/etc/subuid', n) || inSubordinateRange('/etc/subgid', n)) return false;
  if ((await processesOfUser(n)).length > 0) return false;
  for (const db of ['passwd', 'group']) {
    try {
      await run('getent', [db, String(n)], { timeoutMs: 10_000 });
      return false; // found
    } catch (err) {
      // 2: no such entry. Anything else: not known to be free.
      if (!(err instanceof CommandError && err.exitCode === 2)) return false;
    }
  }
  return true;
}

/**
 * find's arguments for the files under `dirs` that belong to `uid`, as
 * root, without following symbolic links (-P) or leaving each directory's
 * file system (-xdev). Only where the user could have written is looked
 * in: a directory of another user's (not root's) that neither its group
 * nor anyone may write to is not entered (its owner's alone: another
 * service's data, the template, a repository), so that the walk costs
 * the shared directories' and Basin's own directories' entries, not every
 * service's files (the data directory of 2,000 services holds millions;
 * and tests keep their installations in /tmp). What it cannot see:
 * a file the user put in another tenant's directory while that tenant
 * let it, closed since by that tenant; its uid is never given again and
 * no_new_privs ignores its setuid bit (docs/security.md).
 */
export function ownedFilesArgs(uid: number, dirs: string[], first = false): string[] {
  const u = String(uid);
  return [
    '-P',
    ...dirs,
    '-ignore_readdir_race',
    '-xdev',
    ...['(', '-type', 'd', '!', '-uid', '0', '!', '-uid', u],
    ...['!', '-perm', '-0002', '!', '-perm', '-0020', '-prune', ')'],
    // NUL-separated: a tenant's file name may hold a newline.
    ...['-o', '(', '-uid', u, '-print0', ...(first ? ['-quit'] : []), ')'],
  ];
}

/**
 * Whether any file under `dirs` belongs to `uid` (ownedFilesArgs): one
 * left by a user of that uid whose files were never swept (deleted by
 * hand, or by another installation), which a new user of the uid would
 * inherit. As root.
 */
export async function ownsFiles(uid: number, dirs: string[]): Promise<boolean> {
  return (await ownedFiles(uid, dirs, true)).length > 0;
}

/**
 * The files under `dirs` that belong to `uid` (ownedFilesArgs), topmost
 * only: a directory of the user's stands for what is in it. `first`: stop
 * at the first one found.
 */
export async function ownedFiles(uid: number, dirs: string[], first = false): Promise<string[]> {
  if (dirs.length === 0) return [];
  let out: string;
  try {
    out = await run('find', ownedFilesArgs(uid, dirs, first), { timeoutMs: 120_000 });
  } catch (err) {
    // Unreadable corners: what was found still counts (its standard output
    // alone: an error message before a NUL-separated path would hide it).
    if (!(err instanceof CommandError)) throw err;
    out = err.stdout;
  }
  const found = out.split('\0').filter((l) => l.startsWith('/'));
  // find prints a directory before what is in it, and all of that next:
  // what lies under the last top found is that top's.
  const tops: string[] = [];
  for (const path of found) {
    const last = tops[tops.length - 1];
    if (last === undefined || !path.startsWith(`${last}/`)) tops.push(path);
  }
  return tops;
}

/** Whether `n` lies in a range of a subordinate id file (`name:start:count` lines). */
function inSubordinateRange(file: string, n: number): boolean {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  return text.split('\n').some((line) => {
    const [, start, count] = line.split(':');
    const s = Number(start);
    const c = Number(count);
    return (
      start !== '' &&
      count !== '' &&
      Number.isInteger(s) &&
      Number.isInteger(c) &&
      n >= s &&
      n < s + c
    );
  });
}
