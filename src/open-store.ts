// Opens the store a configuration points at. The server (basin.ts) and the
// `basin` administration command both come through here, so they always
// agree on where the store is and how it is opened. Each store is loaded
// when chosen (`pg` or better-sqlite3, not both): a `basin` command that
// opens none, and a server on the other one, load neither (docs/architecture.md §6).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { StoreConfig } from './config.js';
import { makeDataDir } from './lib/data-dir.js';
import type { CopyResult } from './store/copy-store.js';
import { describe } from './store/postgres/describe-url.js';
import type { Store } from './store/store.js';

export interface OpenedStore {
  store: Store;
  /** The data directory did not exist and was made (private to Basin). */
  createdDataDir: boolean;
}

/**
 * Opens the PostgreSQL store at `storeUrl` when one is given, otherwise
 * `<dataDir>/basin.db` (SQLite in WAL mode, so a server and the CLI can both
 * use it at once); either way makes the data directory if it is missing
 * (keys and clusters live there). The directory's mode is set with chmod
 * (lib/data-dir.ts), not through mkdir's umask-filtered `mode`.
 */
export async function openStore(config: StoreConfig): Promise<OpenedStore> {
  const createdDataDir = !existsSync(config.dataDir);
  if (createdDataDir) makeDataDir(config.dataDir);
  const store =
    config.storeUrl !== null
      ? await (await import('./store/postgres/pg-store.js')).openPostgresStore(config.storeUrl)
      : (await import('./store/sqlite/sqlite-store.js')).openSqliteStore(
          join(config.dataDir, 'basin.db'),
        );
  return { store, createdDataDir };
}

/** Where the store is, for messages: never a password. */
export function storeWhere(config: StoreConfig): string {
  return config.storeUrl !== null
    ? `at PostgreSQL ${describe(config.storeUrl)}`
    : `in ${config.dataDir}`;
}

/**
 * Copies the SQLite store of `dataDir` into the empty PostgreSQL store at
 * `url` (`basin store migrate`). The data directory is locked meanwhile, as
 * a running Basin locks it: a Basin that runs there must be stopped first.
 */
export async function migrateStore(dataDir: string, url: string): Promise<CopyResult> {
  const file = join(dataDir, 'basin.db');
  if (!existsSync(file)) throw new Error(`There is no store to move: ${file} does not exist.`);
  const [{ copySqliteToPostgres }, { lockDataDir }] = await Promise.all([
    import('./store/copy-store.js'),
    import('./lib/data-dir-lock.js'),
  ]);
  const lock = lockDataDir(dataDir);
  try {
    return await copySqliteToPostgres(file, url);
  } finally {
    lock.release();
  }
}
