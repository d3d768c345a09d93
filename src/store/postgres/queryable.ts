import type pg from 'pg';
import type { MirroredTable } from './migrations.js';

/** A pool (reads outside a transaction) or a transaction's client. */
export type Queryable = Pick<pg.Pool, 'query'>;

/** Where the repositories run, and whom they tell which mirrored table they wrote. */
export interface PgContext {
  db: Queryable;
  /** Called by every write to a table the read view mirrors (read-mirror.ts). */
  touched(table: MirroredTable): void;
}

export const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Epoch milliseconds as a BIGINT takes them: whole. A caller's time may
 * have a fraction (a wait of 12.5 ms added to now), which SQLite keeps and
 * PostgreSQL refuses (22P02).
 */
export const ms = (n: number) => Math.round(n);

/** The rows of a query, typed loosely: each repository reads its own columns. */
export async function rows(
  db: Queryable,
  text: string,
  values: unknown[] = [],
): Promise<Record<string, unknown>[]> {
  return (await db.query(text, values)).rows as Record<string, unknown>[];
}

/** Rows changed by a write. */
export async function changes(db: Queryable, text: string, values: unknown[] = []) {
  return (await db.query(text, values)).rowCount ?? 0;
}

/**
 * Text sorts byte-wise, as in SQLite, whatever the database's collation:
 * the order of lists must not depend on how the PostgreSQL was initdb'd.
 */
export const C = 'COLLATE "C"';
export const BY_TIME = `created_at ${C}, id ${C}`;
