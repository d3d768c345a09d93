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
 * Whether any file under `dirs` belongs to `uid`: one left by a user of
 * that uid whose files were never swept (deleted by hand, or by another
 * installation), which a new user of the uid would inherit. As root.
 */
export async function ownsFiles(uid: number, dirs: string[]): Promise<boolean> {
  if (dirs.length === 0) return false;
  try {
    const out = await run(
      'find',
      ['-P', ...dirs, '-ignore_readdir_race', '-xdev', '-uid', String(uid), '-print', '-quit'],
      {
        timeoutMs: 120_000,
      },
    );
    return out.length > 0;
  } catch (err) {
    // Unreadable corners: what was found still counts.
    return err instanceof CommandError && err.output.includes('/');
  }
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
