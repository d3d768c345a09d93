// The hosts of an installation, their join tokens and the installation's
// secrets, on PostgreSQL: sqlite/host-repo.ts's statements.

import { AppError } from '../../domain/errors.js';
import type { Host, HostCapacity, HostToken, HostUsage } from '../../domain/hosts.js';
import { hostColumns, hostFromRow, placementFromRow, tokenFromRow } from '../host-rows.js';
import type { Placement } from '../../domain/hosts.js';
import type { HostRepo, HostTokenRepo, PlacementRepo, SecretRepo } from '../store.js';
import { C, changes, type PgContext, rows } from './queryable.js';

export class PgHostRepo implements HostRepo {
  constructor(private readonly ctx: PgContext) {}

  async get(id: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM hosts WHERE id = $1', [id]);
    return hostFromRow(row);
  }
  async findByName(name: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM hosts WHERE name = $1', [name]);
    return hostFromRow(row);
  }
  async list() {
    const all = await rows(this.ctx.db, `SELECT * FROM hosts ORDER BY name ${C}`);
    return all.map((r) => hostFromRow(r) as Host);
  }
  async insert(h: Host) {
    const added = await changes(
      this.ctx.db,
      `INSERT INTO hosts (id, name, address, agent_port, zone, capacity, usage, cert_sha256, joined_at, heartbeat_at, role)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
      hostColumns(h),
    );
    if (added === 0)
      throw new AppError('CONFLICT', `A host named ${h.name} is already registered.`);
  }
  async heartbeat(id: string, at: number, capacity: HostCapacity, usage: HostUsage) {
    const n = await changes(
      this.ctx.db,
      'UPDATE hosts SET heartbeat_at = $1, capacity = $2, usage = $3 WHERE id = $4',
      [at, JSON.stringify(capacity), JSON.stringify(usage), id],
    );
    return n > 0;
  }
  async remove(id: string) {
    return (await changes(this.ctx.db, 'DELETE FROM hosts WHERE id = $1', [id])) > 0;
  }
  async setDraining(id: string, draining: boolean) {
    const sql = 'UPDATE hosts SET draining = $1 WHERE id = $2';
    return (await changes(this.ctx.db, sql, [draining ? 1 : 0, id])) > 0;
  }
}

export class PgHostTokenRepo implements HostTokenRepo {
  constructor(private readonly ctx: PgContext) {}

  async insert(t: HostToken) {
    await this.ctx.db.query(
      'INSERT INTO host_tokens (id, secret_hash, created_at, expires_at, used_by) VALUES ($1, $2, $3, $4, $5)',
      [t.id, t.secretHash, t.createdAt, t.expiresAt, t.usedBy],
    );
  }
  async get(id: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM host_tokens WHERE id = $1', [id]);
    return tokenFromRow(row);
  }
  async use(id: string, hostId: string) {
    const n = await changes(
      this.ctx.db,
      'UPDATE host_tokens SET used_by = $1 WHERE id = $2 AND used_by IS NULL',
      [hostId, id],
    );
    return n > 0;
  }
}

export class PgSecretRepo implements SecretRepo {
  constructor(private readonly ctx: PgContext) {}

  async get(name: string) {
    const [row] = await rows(this.ctx.db, 'SELECT value FROM secrets WHERE name = $1', [name]);
    return row?.value as string | undefined;
  }
  async putIfAbsent(name: string, value: string) {
    await this.ctx.db.query(
      'INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING',
      [name, value],
    );
    return (await this.get(name)) as string;
  }
}

export class PgPlacementRepo implements PlacementRepo {
  constructor(private readonly ctx: PgContext) {}

  async get(resourceId: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM placements WHERE resource_id = $1', [
      resourceId,
    ]);
    return placementFromRow(row);
  }
  async list() {
    const all = await rows(this.ctx.db, `SELECT * FROM placements ORDER BY resource_id ${C}`);
    return all.map((r) => placementFromRow(r) as Placement);
  }
  async put(p: Placement) {
    await this.ctx.db.query(
      `INSERT INTO placements (resource_id, host_id, cpu_millis, memory_mb, moved_from)
       VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (resource_id) DO UPDATE SET host_id = excluded.host_id,
         cpu_millis = excluded.cpu_millis, memory_mb = excluded.memory_mb,
         moved_from = excluded.moved_from`,
      [p.resourceId, p.hostId, p.cpuMillis, p.memoryMb, p.movedFrom ?? null],
    );
  }
  async remove(resourceId: string) {
    await this.ctx.db.query('DELETE FROM placements WHERE resource_id = $1', [resourceId]);
  }
}
