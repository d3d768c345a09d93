// Moving an installation from SQLite to PostgreSQL (`basin store migrate`):
// every table of the SQLite schema, row for row, into an empty PostgreSQL
// store, in one transaction. The two schemas are the same table for table
// and column for column (postgres/migrations.ts), so the copy reads the
// SQLite catalogue rather than a list that could forget a table added later.

import Database from 'better-sqlite3';
import pg from 'pg';
import { AppError } from '../domain/errors.js';
import { openPostgresStore } from './postgres/pg-store.js';
import { openSqliteStore } from './sqlite/sqlite-store.js';

/** Tables others refer to, first (foreign keys); the rest in catalogue order. */
const FIRST = ['projects', 'users'];
/** SQLite's own bookkeeping, no data: its read cache's change counts (sqlite/migrations.ts, 12). */
const LOCAL = ['read_changes'];
/** Tables whose ids a sequence gives on PostgreSQL: it goes on after the copied ones. */
const SERIAL = ['operations', 'events'];

export interface CopyResult {
  /** Rows copied, per table. */
  rows: Record<string, number>;
}

export async function copySqliteToPostgres(file: string, url: string): Promise<CopyResult> {
  // Brings the SQLite file to this Basin's schema first (as a start would),
  // and the PostgreSQL store to the same (openPostgresStore migrates).
  openSqliteStore(file).close();
  const target = await openPostgresStore(url);
  await target.end();
  const source = new Database(file, { readonly: true });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = (
      source
        .prepare(
          `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN (${LOCAL.map((t) => `'${t}'`).join(', ')}) ORDER BY rowid`,
        )
        .pluck()
        .all() as string[]
    ).sort((a, b) => rank(a) - rank(b));
    await client.query('BEGIN');
    // Nothing else writes meanwhile (the store's transaction lock, pg-store.ts).
    await client.query('SELECT pg_advisory_xact_lock($1)', [0x62617369_6e000002n]);
    for (const table of tables) {
      const found = await client.query(`SELECT count(*)::int AS n FROM ${table}`);
      const n = (found.rows[0] as { n: number }).n;
      if (n > 0) {
        throw new AppError(
          'CONFLICT',
          `The PostgreSQL store is not empty (its table ${table} has ${n} rows): basin store migrate copies only into an empty store. Give it a new database.`,
        );
      }
    }
    const rows: Record<string, number> = {};
    for (const table of tables) {
      const columns = source
        .prepare(`SELECT name FROM pragma_table_info(?) ORDER BY cid`)
        .pluck()
        .all(table) as string[];
      const list = columns.join(', ');
      const params = columns.map((_, i) => `$${i + 1}`).join(', ');
      const insert = `INSERT INTO ${table} (${list}) VALUES (${params})`;
      let count = 0;
      for (const row of source.prepare(`SELECT ${list} FROM ${table}`).raw().iterate()) {
        await client.query(insert, row as unknown[]);
        count++;
      }
      rows[table] = count;
    }
    for (const table of SERIAL) {
      await client.query(
        `SELECT setval(pg_get_serial_sequence('${table}', 'id'), coalesce(max(id), 0) + 1, false) FROM ${table}`,
      );
    }
    await client.query('COMMIT');
    return { rows };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    source.close();
    await client.end();
  }
}

function rank(table: string): number {
  const i = FIRST.indexOf(table);
  return i < 0 ? FIRST.length : i;
}
