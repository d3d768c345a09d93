import type Database from 'better-sqlite3';
import type {
  NewOperation,
  Operation,
  OperationRepo,
  OperationState,
  ResourceKind,
} from '../store.js';

/**
 * The durable operation queue. With SQLite a single Basin process runs the
 * engine, so claiming is a plain UPDATE inside the caller's transaction; the
 * lease still matters, because a crashed process leaves its claims behind and
 * they must become claimable again once the lease runs out.
 */
export class SqliteOperationRepo implements OperationRepo {
  constructor(private readonly db: Database.Database) {}

  async enqueue(op: NewOperation, now: number): Promise<Operation> {
    const at = new Date(now).toISOString();
    const res = this.db
      .prepare(
        `INSERT INTO operations (kind, resource_kind, resource_id, state, payload, run_after, created_at, updated_at)
         VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)`,
      )
      .run(op.kind, op.resourceKind, op.resourceId, JSON.stringify(op.payload ?? {}), now, at, at);
    return (await this.get(Number(res.lastInsertRowid))) as Operation;
  }

  async claim(worker: string, now: number, leaseMs: number, limit: number): Promise<Operation[]> {
    // The oldest pending operation of each resource, if it is due and unleased
    // (or its lease ran out): a resource's operations run one at a time, in order.
    const rows = this.db
      .prepare(
        `SELECT o.* FROM operations o
         WHERE o.state = 'pending' AND o.run_after <= ?
           AND (o.locked_by IS NULL OR o.lease_expires_at < ?)
           AND o.id = (SELECT min(id) FROM operations p
                       WHERE p.state = 'pending' AND p.resource_kind = o.resource_kind
                         AND p.resource_id = o.resource_id)
         ORDER BY o.run_after, o.id LIMIT ?`,
      )
      .all(now, now, limit);
    const lease = this.db.prepare(
      'UPDATE operations SET locked_by = ?, lease_expires_at = ?, updated_at = ? WHERE id = ?',
    );
    const at = new Date(now).toISOString();
    return rows.map((r) => {
      const op = toOperation(r);
      lease.run(worker, now + leaseMs, at, op.id);
      return { ...op, lockedBy: worker, leaseExpiresAt: now + leaseMs };
    });
  }

  async release(
    id: number,
    runAfter: number,
    error: string | null,
    attempts: number,
  ): Promise<void> {
    this.db
      .prepare(
        `UPDATE operations SET locked_by = NULL, lease_expires_at = NULL, run_after = ?, last_error = ?,
           attempts = ?, updated_at = ? WHERE id = ?`,
      )
      .run(runAfter, error, attempts, new Date().toISOString(), id);
  }

  async finish(id: number, state: Exclude<OperationState, 'pending'>, error: string | null) {
    this.db
      .prepare(
        `UPDATE operations SET state = ?, last_error = coalesce(?, last_error), locked_by = NULL,
           lease_expires_at = NULL, updated_at = ? WHERE id = ?`,
      )
      .run(state, error, new Date().toISOString(), id);
  }

  async cancelForResource(kind: ResourceKind, resourceId: string, keep?: number) {
    this.db
      .prepare(
        `UPDATE operations SET state = 'cancelled', updated_at = ?
         WHERE state = 'pending' AND resource_kind = ? AND resource_id = ? AND id != ?`,
      )
      .run(new Date().toISOString(), kind, resourceId, keep ?? -1);
  }

  async resetLeases() {
    this.db
      .prepare(
        'UPDATE operations SET locked_by = NULL, lease_expires_at = NULL WHERE locked_by IS NOT NULL',
      )
      .run();
  }

  async get(id: number) {
    const row = this.db.prepare('SELECT * FROM operations WHERE id = ?').get(id);
    return row === undefined ? undefined : toOperation(row);
  }

  async listPending() {
    return this.db
      .prepare(`SELECT * FROM operations WHERE state = 'pending' ORDER BY id`)
      .all()
      .map(toOperation);
  }

  async nextDue() {
    const v = this.db
      .prepare(`SELECT min(run_after) FROM operations WHERE state = 'pending'`)
      .pluck()
      .get() as number | null;
    return v ?? undefined;
  }
}

function toOperation(row: unknown): Operation {
  const r = row as Record<string, unknown>;
  return {
    id: r.id as number,
    kind: r.kind as string,
    resourceKind: r.resource_kind as ResourceKind,
    resourceId: r.resource_id as string,
    state: r.state as OperationState,
    payload: JSON.parse(r.payload as string) as Record<string, unknown>,
    attempts: r.attempts as number,
    lastError: (r.last_error as string | null) ?? null,
    runAfter: r.run_after as number,
    lockedBy: (r.locked_by as string | null) ?? null,
    leaseExpiresAt: (r.lease_expires_at as number | null) ?? null,
    createdAt: r.created_at as string,
    updatedAt: r.updated_at as string,
  };
}
