// The hosts of an installation, their join tokens and the installation's
// secrets, on SQLite (docs/decisions.md, "Several hosts").

import type Database from 'better-sqlite3';
import { AppError } from '../../domain/errors.js';
import type { Host, HostCapacity, HostToken, HostUsage } from '../../domain/hosts.js';
import type { Placement } from '../../domain/hosts.js';
import type { HostRepo, HostTokenRepo, PlacementRepo, SecretRepo } from '../store.js';
import { hostColumns, hostFromRow, placementFromRow, tokenFromRow } from '../host-rows.js';

export class SqliteHostRepo implements HostRepo {
  constructor(private readonly db: Database.Database) {}

  async get(id: string) {
    return hostFromRow(this.db.prepare('SELECT * FROM hosts WHERE id = ?').get(id));
  }
  async findByName(name: string) {
    return hostFromRow(this.db.prepare('SELECT * FROM hosts WHERE name = ?').get(name));
  }
  async list() {
    return this.db
      .prepare('SELECT * FROM hosts ORDER BY name')
      .all()
      .map((r) => hostFromRow(r) as Host);
  }
  async insert(h: Host) {
    const added = this.db
      .prepare(
        `INSERT INTO hosts (id, name, address, agent_port, zone, capacity, usage, cert_sha256, joined_at, heartbeat_at, role)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      )
      .run(...hostColumns(h)).changes;
    if (added === 0)
      throw new AppError('CONFLICT', `A host named ${h.name} is already registered.`);
  }
  async heartbeat(id: string, at: number, capacity: HostCapacity, usage: HostUsage) {
    return (
      this.db
        .prepare('UPDATE hosts SET heartbeat_at = ?, capacity = ?, usage = ? WHERE id = ?')
        .run(at, JSON.stringify(capacity), JSON.stringify(usage), id).changes > 0
    );
  }
  async remove(id: string) {
    return this.db.prepare('DELETE FROM hosts WHERE id = ?').run(id).changes > 0;
  }
  async setDraining(id: string, draining: boolean) {
    return (
      this.db.prepare('UPDATE hosts SET draining = ? WHERE id = ?').run(draining ? 1 : 0, id)
        .changes > 0
    );
  }
}

export class SqliteHostTokenRepo implements HostTokenRepo {
  constructor(private readonly db: Database.Database) {}

  async insert(t: HostToken) {
    this.db
      .prepare(
        'INSERT INTO host_tokens (id, secret_hash, created_at, expires_at, used_by) VALUES (?, ?, ?, ?, ?)',
      )
      .run(t.id, t.secretHash, t.createdAt, t.expiresAt, t.usedBy);
  }
  async get(id: string) {
    return tokenFromRow(this.db.prepare('SELECT * FROM host_tokens WHERE id = ?').get(id));
  }
  async use(id: string, hostId: string) {
    return (
      this.db
        .prepare('UPDATE host_tokens SET used_by = ? WHERE id = ? AND used_by IS NULL')
        .run(hostId, id).changes > 0
    );
  }
}

export class SqliteSecretRepo implements SecretRepo {
  constructor(private readonly db: Database.Database) {}

  async get(name: string) {
    return this.db.prepare('SELECT value FROM secrets WHERE name = ?').pluck().get(name) as
      string | undefined;
  }
  async putIfAbsent(name: string, value: string) {
    this.db
      .prepare('INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING')
      .run(name, value);
    return this.db.prepare('SELECT value FROM secrets WHERE name = ?').pluck().get(name) as string;
  }
}

export class SqlitePlacementRepo implements PlacementRepo {
  constructor(private readonly db: Database.Database) {}

  async get(resourceId: string) {
    return placementFromRow(
      this.db.prepare('SELECT * FROM placements WHERE resource_id = ?').get(resourceId),
    );
  }
  async list() {
    return this.db
      .prepare('SELECT * FROM placements ORDER BY resource_id')
      .all()
      .map((r) => placementFromRow(r) as Placement);
  }
  async put(p: Placement) {
    this.db
      .prepare(
        `INSERT INTO placements (resource_id, host_id, cpu_millis, memory_mb, moved_from)
         VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (resource_id) DO UPDATE SET host_id = excluded.host_id,
           cpu_millis = excluded.cpu_millis, memory_mb = excluded.memory_mb,
           moved_from = excluded.moved_from`,
      )
      .run(p.resourceId, p.hostId, p.cpuMillis, p.memoryMb, p.movedFrom ?? null);
  }
  async remove(resourceId: string) {
    this.db.prepare('DELETE FROM placements WHERE resource_id = ?').run(resourceId);
  }
}
