// The leadership lease on SQLite (store.ts, LeadershipRepo). A SQLite store
// has one Basin (the data directory's lock), which leads without a lease
// (src/leader/): this is here so that both stores keep one contract, tested
// by the same suite. Times are SQLite's clock, in epoch ms.

import type Database from 'better-sqlite3';
import type { Lease, LeadershipRepo } from '../store.js';

const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;

/**
 * `write` runs a statement in the store's transaction queue: a statement on
 * the writer while a transaction is open would join it.
 */
export function sqliteLeadership(
  db: Database.Database,
  write: <T>(fn: () => T) => Promise<T>,
): LeadershipRepo {
  return {
    acquire: (holder, leaseMs) =>
      write(() => {
        const old = db.prepare('SELECT holder FROM leadership WHERE id = 1').get() as
          { holder: string | null } | undefined;
        const row = db
          .prepare(
            `INSERT INTO leadership (id, term, holder, expires_at) VALUES (1, 1, ?, ${NOW_MS} + ?)
             ON CONFLICT (id) DO UPDATE SET term = term + 1, holder = excluded.holder,
               expires_at = excluded.expires_at
             WHERE expires_at < ${NOW_MS}
             RETURNING term`,
          )
          .get(holder, leaseMs) as { term: number } | undefined;
        return row && { term: row.term, previous: old?.holder ?? null };
      }),
    renew: (term, leaseMs) =>
      write(
        () =>
          db
            .prepare(`UPDATE leadership SET expires_at = ${NOW_MS} + ? WHERE id = 1 AND term = ?`)
            .run(leaseMs, term).changes > 0,
      ),
    release: async (term) => {
      await write(() =>
        db
          .prepare(
            `UPDATE leadership SET expires_at = ${NOW_MS} - 1, holder = NULL WHERE id = 1 AND term = ?`,
          )
          .run(term),
      );
    },
    current: async () => {
      const row = db
        .prepare(`SELECT term, holder, expires_at - ${NOW_MS} AS remaining FROM leadership`)
        .get() as { term: number; holder: string | null; remaining: number } | undefined;
      return row && ({ term: row.term, holder: row.holder, remainingMs: row.remaining } as Lease);
    },
  };
}

/** The term that leads now, read in a write transaction (Store.fenced). */
export function sqliteTerm(db: Database.Database): number | undefined {
  const row = db.prepare('SELECT term FROM leadership WHERE id = 1').get() as
    { term: number } | undefined;
  return row?.term;
}
