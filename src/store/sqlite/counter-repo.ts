import type Database from 'better-sqlite3';
import type { CounterRepo } from '../store.js';

/** CounterRepo on the `counters` table: one upsert, so a value is never handed out twice. */
export class SqliteCounterRepo implements CounterRepo {
  private readonly bump;

  constructor(db: Database.Database) {
    this.bump = db
      .prepare(
        `INSERT INTO counters (name, value) VALUES (?, ?)
         ON CONFLICT (name) DO UPDATE SET value = max(value + 1, excluded.value)
         RETURNING value`,
      )
      .pluck();
  }

  async next(name: string, floor: number): Promise<number> {
    return this.bump.get(name, floor) as number;
  }
}
