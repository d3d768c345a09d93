// One Basin per data directory. Everything Basin stages there (templates,
// certificates, clones, restores) belongs to the Basin that runs; at start,
// anything staged is known to be a dead Basin's and is removed at once
// (drivers/local/leftovers.ts). That holds only if a second Basin on the same
// directory is refused, so the directory is locked for the life of the
// process.
//
// The lock is the kernel's: SQLite's exclusive lock (fcntl) on an empty
// database file, held by an open transaction that is never committed. The
// kernel drops it when the process ends in any way, kill -9 included, so
// there is no stale lock to judge by age or pid. SQLite also refuses a
// second connection of the same process, so two Basins built in one test
// process are refused as well.

import Database from 'better-sqlite3';
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export class DataDirInUseError extends Error {
  constructor(dataDir: string, holder: string | undefined) {
    super(
      `the data directory ${dataDir} is in use by another Basin` +
        `${holder ? ` (pid ${holder})` : ''}: stop it first, or give this one a data directory of its own (--data-dir)`,
    );
    this.name = 'DataDirInUseError';
  }
}

export interface DataDirLock {
  release(): void;
}

/** Takes the data directory's lock or throws DataDirInUseError; `dataDir` must exist. */
export function lockDataDir(dataDir: string): DataDirLock {
  const file = join(dataDir, 'basin.lock');
  const pidFile = join(dataDir, 'basin.pid');
  const db = new Database(file, { timeout: 0 });
  chmodSync(file, 0o600);
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
    throw new DataDirInUseError(dataDir, readHolder(pidFile));
  }
  // Only to name the holder in the refusal above; the lock is what counts.
  writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      rmSync(pidFile, { force: true });
      db.close();
    },
  };
}

function readHolder(pidFile: string): string | undefined {
  try {
    return /^\d+/.exec(readFileSync(pidFile, 'utf8'))?.[0];
  } catch {
    return undefined;
  }
}
