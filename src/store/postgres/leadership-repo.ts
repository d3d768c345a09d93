// The leadership lease on PostgreSQL (store.ts, LeadershipRepo): one row,
// times by the database's clock (clock_timestamp(), epoch ms), so that the
// processes' clocks never matter. Taking the lease holds the store's write
// lock: a fenced transaction (pg-store.ts) reads the term under the same
// lock, so each one commits wholly before a new term begins, or is refused.

import type pg from 'pg';
import type { Lease, LeadershipRepo } from '../store.js';

const NOW_MS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

export function pgLeadership(pool: pg.Pool, writeLock: bigint): LeadershipRepo {
  return {
    async acquire(holder, leaseMs) {
      const client = await pool.connect();
      let broken = false;
      const lost = () => (broken = true); // see pg-store.ts's run
      client.on('error', lost);
      try {
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock($1)', [writeLock]);
        const res = await client.query<{ term: number }>(
          `INSERT INTO leadership AS l (id, term, holder, expires_at) VALUES (1, 1, $1, ${NOW_MS} + $2)
           ON CONFLICT (id) DO UPDATE SET term = l.term + 1, holder = $1, expires_at = ${NOW_MS} + $2
           WHERE l.expires_at < ${NOW_MS}
           RETURNING term`,
          [holder, leaseMs],
        );
        await client.query('COMMIT');
        return res.rows[0]?.term;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => (broken = true));
        throw err;
      } finally {
        client.off('error', lost);
        client.release(broken);
      }
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
        `UPDATE leadership SET expires_at = ${NOW_MS} - 1 WHERE id = 1 AND term = $1`,
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
