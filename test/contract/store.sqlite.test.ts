// The store contract (store-contract.ts) against the embedded SQLite store.

import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { tempDir } from '../helpers.js';
import { storeContract } from './store-contract.js';

storeContract('sqlite', {
  async open(t) {
    const file = join(tempDir(t), 'basin.db');
    const store = openSqliteStore(file);
    t.after(() => store.close());
    return {
      store,
      async insertRawOperation(row) {
        const db = new Database(file);
        try {
          const res = db
            .prepare(
              `INSERT INTO operations (kind, resource_kind, resource_id, project_id, state, payload,
                 run_after, created_at, updated_at)
               VALUES (?, ?, ?, ?, 'pending', ?, 0, '1970-01-01T00:00:00.000Z', '1970-01-01T00:00:00.000Z')`,
            )
            .run(row.kind, row.resourceKind, row.resourceId, row.projectId, row.payload);
          return Number(res.lastInsertRowid);
        } finally {
          db.close();
        }
      },
    };
  },
});
