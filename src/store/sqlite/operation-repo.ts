import type Database from 'better-sqlite3';
import { isConverge } from '../../domain/operations.js';
import { readOperation } from '../read-operation.js';
import { preparedOnce } from './prepared.js';
import type {
  ClaimLimits,
  FailedOperation,
  NewOperation,
  Operation,
  OperationRepo,
  ReleaseAt,
  ResourceKind,
} from '../store.js';

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The durable operation queue (see OperationRepo). With SQLite, claiming is a
 * plain UPDATE inside the caller's transaction, which holds the database's
 * write lock; leases still matter, because a crashed process leaves its
 * claims behind, and several processes may open the same store.
 */
export class SqliteOperationRepo implements OperationRepo {
  private readonly sql: (text: string) => Database.Statement;

  constructor(db: Database.Database) {
    this.sql = preparedOnce(db);
  }

  async enqueue(op: NewOperation, now: number): Promise<Operation> {
    if (isConverge(op.kind)) {
      this.sql(
        `UPDATE operations SET state = 'cancelled', updated_at = ?
           WHERE state = 'pending' AND kind = ? AND resource_kind = ? AND resource_id = ?
             AND (locked_by IS NULL OR lease_expires_at < ?)`,
      ).run(iso(now), op.kind, op.resourceKind, op.resourceId, now);
    }
    const res = this.sql(
      `INSERT INTO operations (kind, resource_kind, resource_id, project_id, state, payload, run_after, created_at, updated_at)
         VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)`,
    ).run(
      op.kind,
      op.resourceKind,
      op.resourceId,
      op.projectId,
      JSON.stringify(op.payload),
      now,
      iso(now),
      iso(now),
    );
    return (await this.get(Number(res.lastInsertRowid))) as Operation;
  }

  async claim(worker: string, now: number, limits: ClaimLimits): Promise<Operation[]> {
    // Runnable: the oldest pending operation of its resource, due, and not
    // leased (or its lease ran out; never one this worker runs itself). Each
    // project gets at most `perProject` of the worker's leases, counting those
    // it holds already: `rn` numbers a project's runnable ones, oldest first.
    const rows = this.sql(
      `WITH held AS (
           SELECT project_id, count(*) AS n FROM operations
           WHERE state = 'pending' AND locked_by = @worker AND lease_expires_at >= @now
           GROUP BY project_id
         ),
         runnable AS (
           SELECT o.*, row_number() OVER (PARTITION BY o.project_id ORDER BY o.run_after, o.id) AS rn
           FROM operations o
           WHERE o.state = 'pending' AND o.run_after <= @now
             AND (o.locked_by IS NULL OR (o.lease_expires_at < @now AND o.locked_by != @worker))
             AND o.id = (SELECT min(id) FROM operations p
                         WHERE p.state = 'pending' AND p.resource_kind = o.resource_kind
                           AND p.resource_id = o.resource_id)
         )
         SELECT r.* FROM runnable r LEFT JOIN held h ON h.project_id = r.project_id
         WHERE r.rn + coalesce(h.n, 0) <= @perProject
         ORDER BY r.run_after, r.id LIMIT @limit`,
    ).all({ worker, now, perProject: limits.perProject, limit: limits.limit });
    const lease = this.sql(
      'UPDATE operations SET locked_by = ?, lease_expires_at = ?, updated_at = ? WHERE id = ?',
    );
    const reject = this.sql(
      `UPDATE operations SET state = 'failed', last_error = ?, locked_by = NULL,
         lease_expires_at = NULL, updated_at = ? WHERE id = ?`,
    );
    const expires = now + limits.leaseMs;
    const claimed: Operation[] = [];
    for (const row of rows) {
      const read = readOperation(row);
      if ('error' in read) {
        // Never handed out, never retried: failed where anyone can read why.
        reject.run(read.error, iso(now), read.id);
        continue;
      }
      lease.run(worker, expires, iso(now), read.op.id);
      claimed.push({ ...read.op, lockedBy: worker, leaseExpiresAt: expires, updatedAt: iso(now) });
    }
    return claimed;
  }

  async renew(worker: string, now: number, leaseMs: number): Promise<void> {
    this.sql(
      `UPDATE operations SET lease_expires_at = ? WHERE locked_by = ? AND state = 'pending'`,
    ).run(now + leaseMs, worker);
  }

  async release(id: number, worker: string, at: ReleaseAt): Promise<boolean> {
    const res = this.sql(
      `UPDATE operations SET locked_by = NULL, lease_expires_at = NULL, run_after = ?, last_error = ?,
           attempts = ?, waits = coalesce(?, waits), waiting_since = coalesce(?, waiting_since),
           updated_at = ? WHERE id = ? AND locked_by = ? AND state = 'pending'`,
    ).run(
      at.runAfter,
      at.error,
      at.attempts,
      at.waits ?? null,
      at.waitingSince ?? null,
      iso(at.now),
      id,
      worker,
    );
    return res.changes === 1;
  }

  async finish(
    id: number,
    worker: string,
    state: 'done' | 'failed',
    error: string | null,
    now: number,
  ): Promise<boolean> {
    const res = this.sql(
      `UPDATE operations SET state = ?, last_error = coalesce(?, last_error), locked_by = NULL,
           lease_expires_at = NULL, updated_at = ? WHERE id = ? AND locked_by = ? AND state = 'pending'`,
    ).run(state, error, iso(now), id, worker);
    return res.changes === 1;
  }

  async cancelForResource(kind: ResourceKind, resourceId: string, now: number): Promise<void> {
    this.sql(
      `UPDATE operations SET state = 'cancelled', updated_at = ?
         WHERE state = 'pending' AND resource_kind = ? AND resource_id = ?`,
    ).run(iso(now), kind, resourceId);
  }

  async leaseHolders(): Promise<string[]> {
    return this.sql(
      `SELECT DISTINCT locked_by FROM operations
         WHERE locked_by IS NOT NULL AND state = 'pending' ORDER BY locked_by`,
    )
      .pluck()
      .all() as string[];
  }

  async releaseLeases(worker: string, now: number): Promise<number> {
    return this.sql(
      `UPDATE operations SET locked_by = NULL, lease_expires_at = NULL, updated_at = ?
         WHERE locked_by = ? AND state = 'pending'`,
    ).run(iso(now), worker).changes;
  }

  async get(id: number): Promise<Operation | undefined> {
    const row = this.sql('SELECT * FROM operations WHERE id = ?').get(id);
    if (row === undefined) return undefined;
    const read = readOperation(row);
    return 'op' in read ? read.op : undefined;
  }

  async listPending(): Promise<Operation[]> {
    return this.sql(`SELECT * FROM operations WHERE state = 'pending' ORDER BY id`)
      .all()
      .map(readOperation)
      .flatMap((read) => ('op' in read ? [read.op] : []));
  }

  async latestFailures(): Promise<FailedOperation[]> {
    const rows = this.sql(
      `SELECT o.id, o.kind, o.resource_kind, o.resource_id, o.last_error FROM operations o
         WHERE o.state = 'failed'
           AND o.id = (SELECT max(p.id) FROM operations p
                       WHERE p.resource_kind = o.resource_kind AND p.resource_id = o.resource_id)
         ORDER BY o.id`,
    ).all() as Record<string, unknown>[];
    return rows.map((r) => ({
      id: r.id as number,
      kind: r.kind as string,
      resourceKind: r.resource_kind as string,
      resourceId: r.resource_id as string,
      lastError: (r.last_error as string | null) ?? null,
    }));
  }

  async nextDue(): Promise<number | undefined> {
    const v = this.sql(`SELECT min(run_after) FROM operations WHERE state = 'pending'`)
      .pluck()
      .get() as number | null;
    return v ?? undefined;
  }
}
