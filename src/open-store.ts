// Opens the store a configuration points at. The server (basin.ts) and the
// `basin` administration command both come through here, so they always
// agree on where the store is and how it is opened.

import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { StoreConfig } from './config.js';
import { openSqliteStore } from './store/sqlite/sqlite-store.js';
import type { Store } from './store/store.js';

export interface OpenedStore {
  store: Store;
  /** The data directory did not exist and was made (private to Basin). */
  createdDataDir: boolean;
}

/**
 * Opens `<dataDir>/basin.db` (SQLite in WAL mode, so a server and the CLI can
 * both use it at once), making the data directory if it is missing. The
 * directory's mode is set with chmod, not through mkdir's umask-filtered
 * `mode`: it holds the store, keys and clusters, and only Basin may enter.
 */
export function openStore(config: StoreConfig): OpenedStore {
  const createdDataDir = !existsSync(config.dataDir);
  if (createdDataDir) {
    mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    chmodSync(config.dataDir, 0o700);
  }
  return { store: openSqliteStore(join(config.dataDir, 'basin.db')), createdDataDir };
}
