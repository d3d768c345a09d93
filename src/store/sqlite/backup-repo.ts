import type Database from 'better-sqlite3';
import type { Backup } from '../../domain/backups.js';
import type { BackupRepo } from '../store.js';

/** BackupRepo on the `backups` table; times are RFC 3339 text, which sorts as time does. */
export class SqliteBackupRepo implements BackupRepo {
  constructor(private readonly db: Database.Database) {}

  async listByService(serviceId: string): Promise<Backup[]> {
    const rows = this.db
      .prepare(
        `SELECT service_id, label, started_at, stopped_at FROM backups
         WHERE service_id = ? ORDER BY started_at, label`,
      )
      .all(serviceId) as Record<string, string>[];
    return rows.map((r) => ({
      serviceId: r.service_id as string,
      label: r.label as string,
      startedAt: r.started_at as string,
      stoppedAt: r.stopped_at as string,
    }));
  }

  async insert(b: Backup): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO backups (service_id, label, started_at, stopped_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (service_id, label) DO NOTHING`,
      )
      .run(b.serviceId, b.label, b.startedAt, b.stoppedAt);
  }

  async deleteOlderThan(serviceId: string, label: string): Promise<void> {
    this.db
      .prepare(
        `DELETE FROM backups WHERE service_id = ? AND started_at <
           (SELECT started_at FROM backups WHERE service_id = ? AND label = ?)`,
      )
      .run(serviceId, serviceId, label);
  }

  async deleteForService(serviceId: string): Promise<void> {
    this.db.prepare('DELETE FROM backups WHERE service_id = ?').run(serviceId);
  }
}
