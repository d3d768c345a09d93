// The leadership lease on PostgreSQL (store.ts, LeadershipRepo): one row,
// times by the database's clock (clock_timestamp(), epoch ms), so that the
// processes' clocks never matter. Taking the lease holds the store's write
// lock: a fenced transaction (pg-store.ts) reads the term under the same
// lock, so each one commits wholly before a new term begins, or is refused.
// Candidates poll every 500 ms: a poll must never hold a lock the leader
// waits for (its renewal, its transactions) while the candidate is slow.

import pg from 'pg';
import type { Acquired, Lease, LeadershipRepo } from '../store.js';

const NOW_MS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

export function pgLeadership(pool: pg.Pool, writeLock: bigint): LeadershipRepo {
  return {
    async acquire(holder, leaseMs) {
      // Most polls find it held: a plain read, which locks nothing.
      const held = await pool.query<{ free: boolean }>(
        `SELECT expires_at < ${NOW_MS} AS free FROM leadership WHERE id = 1`,
      );
      if (held.rows[0] && !held.rows[0].free) return undefined;
      // Then, under the write lock, in one round trip (the simple protocol):
      // the locks are held for the statements alone, never while this
      // process, which may be slow (starting, loaded), sends the next one.
      const lease = Math.round(leaseMs);
      // `old` is the row as the statement found it: who held the lease.
      const results = (await pool.query(
        `BEGIN;
         SELECT pg_advisory_xact_lock(${writeLock});
         WITH old AS (SELECT holder FROM leadership WHERE id = 1)
         INSERT INTO leadership AS l (id, term, holder, expires_at) VALUES (1, 1, ${pg.escapeLiteral(holder)}, ${NOW_MS} + ${lease})
         ON CONFLICT (id) DO UPDATE SET term = l.term + 1, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
         WHERE l.expires_at < ${NOW_MS}
         RETURNING term, (SELECT holder FROM old) AS previous;
         COMMIT;`,
      )) as unknown as pg.QueryResult<Acquired>[];
      const row = results[2]?.rows[0];
      return row && { term: Number(row.term), previous: row.previous };
    },
    async renew(term, leaseMs) {
      const res = await pool.query(
        `UPDATE leadership SET expires_at = ${NOW_MS} + $1 WHERE id = 1 AND term = $2`,
        [leaseMs, term],
      );
      return (res.rowCount ?? 0) > 0;
    },
    async release(term) {
      await pool.query(
        `UPDATE leadership SET expires_at = ${NOW_MS} - 1, holder = NULL WHERE id = 1 AND term = $1`,
        [term],
      );
    },
    async current() {
      const res = await pool.query<{ term: number; holder: string | null; remaining: number }>(
        `SELECT term, holder, expires_at - ${NOW_MS} AS remaining FROM leadership`,
      );
      const row = res.rows[0];
      return row && ({ term: row.term, holder: row.holder, remainingMs: row.remaining } as Lease);
    },
  };
}
