// Opens the store a configuration points at. The server (basin.ts) and the
// `basin` administration command both come through here, so they always
// agree on where the store is and how it is opened.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { StoreConfig } from './config.js';
import { makeDataDir } from './lib/data-dir.js';
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
 * directory's mode is set with chmod (lib/data-dir.ts), not through mkdir's
 * umask-filtered `mode`: it holds the store, keys and clusters.
 */
export function openStore(config: StoreConfig): OpenedStore {
  const createdDataDir = !existsSync(config.dataDir);
  if (createdDataDir) makeDataDir(config.dataDir);
  return { store: openSqliteStore(join(config.dataDir, 'basin.db')), createdDataDir };
}
