// The leader's rounds of usage samples, shared through the store
// (Store.usage; engine/shared-usage.ts): only the leader runs the driver,
// yet every process answers a service's metrics, its series and Prometheus
// alike. The leader writes each round as one row of `usage_rounds`
// (migrations.ts, USAGE_TABLE: unlogged, a cache rather than state) in a
// fenced transaction, drops the rounds older than the series' raw retention
// (a day), and NOTIFYs USAGE_CHANNEL on commit; each process reads the rows
// after the last it took, on every notification and after its listening
// connection came back (read-mirror.ts), in the order of their times.

import { RAW_RETENTION_S } from '../../domain/series/series-store.js';
import type { UsageRound, UsageRounds } from '../store.js';
import { USAGE_CHANNEL } from './migrations.js';
import type { Queryable } from './queryable.js';

/** Rounds read per query: a day of 10 s rounds is 8640. */
const PAGE = 500;

export function pgUsageRounds(deps: {
  /** A transaction of the store (serial, fenced when the store is), with its connection. */
  write: (fn: (db: Queryable) => Promise<void>) => Promise<unknown>;
  read: Queryable;
  /** Calls `on` at each notification of USAGE_CHANNEL (and after a lost one). */
  onPublished: (on: () => void) => void;
}): UsageRounds {
  return {
    publish: (round) =>
      deps
        .write(async (db) => {
          await db.query(
            'INSERT INTO usage_rounds (at, body) VALUES ($1, $2) ON CONFLICT (at) DO NOTHING',
            [Math.round(round.at), JSON.stringify(round)],
          );
          await db.query('DELETE FROM usage_rounds WHERE at < $1', [
            round.at - RAW_RETENTION_S * 1000,
          ]);
          await db.query(`SELECT pg_notify('${USAGE_CHANNEL}', '')`);
        })
        .then(() => undefined),
    async follow(on) {
      let last = -1;
      let running: Promise<void> | undefined;
      let again = false;
      const pull = async () => {
        for (;;) {
          const page = await deps.read.query<{ at: number; body: string }>(
            'SELECT at, body FROM usage_rounds WHERE at > $1 ORDER BY at LIMIT $2',
            [last, PAGE],
          );
          for (const row of page.rows) {
            last = row.at;
            on(JSON.parse(row.body) as UsageRound);
          }
          if (page.rows.length < PAGE) return;
        }
      };
      // One read at a time; a notification meanwhile asks for one more.
      const schedule = (): Promise<void> => {
        if (running) {
          again = true;
          return running;
        }
        const run = pull();
        running = run
          .catch(() => undefined) // the next notification (or reconnection) reads again
          .finally(() => {
            running = undefined;
            if (again) {
              again = false;
              void schedule();
            }
          });
        return run;
      };
      // Listening first (read-mirror.ts already listens), then the kept rounds.
      deps.onPublished(() => void schedule());
      await schedule();
    },
  };
}
