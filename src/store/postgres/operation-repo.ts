import type {
  ClaimLimits,
  FailedOperation,
  NewOperation,
  Operation,
  OperationRepo,
  ReleaseAt,
  ResourceKind,
} from '../store.js';
import { isConverge } from '../../domain/operations.js';
import { changes, iso, ms, type PgContext, rows } from './queryable.js';
import { readOperation } from '../read-operation.js';

/**
 * The durable operation queue (see OperationRepo) on PostgreSQL: the SQLite
 * queue's statements (sqlite/operation-repo.ts). Claiming reads the runnable
 * rows and leases them in the caller's transaction, which holds the store's
 * transaction lock (pg-store.ts), so two claims never see the same row free:
 * the same reasoning as SQLite's single writer. (docs/decisions.md says what
 * changes when transactions stop being serial: FOR UPDATE SKIP LOCKED.)
 */
export class PgOperationRepo implements OperationRepo {
  constructor(private readonly ctx: PgContext) {}

  private get db() {
    return this.ctx.db;
  }

  async enqueue(op: NewOperation, at: number): Promise<Operation> {
    const now = ms(at);
    if (isConverge(op.kind)) {
      await this.db.query(
        `UPDATE operations SET state = 'cancelled', updated_at = $1
         WHERE state = 'pending' AND kind = $2 AND resource_kind = $3 AND resource_id = $4
           AND (locked_by IS NULL OR lease_expires_at < $5)`,
        [iso(now), op.kind, op.resourceKind, op.resourceId, now],
      );
    }
    const [row] = await rows(
      this.db,
      `INSERT INTO operations (kind, resource_kind, resource_id, project_id, state, payload, run_after, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $7) RETURNING id`,
      [
        op.kind,
        op.resourceKind,
        op.resourceId,
        op.projectId,
        JSON.stringify(op.payload),
        now,
        iso(now),
      ],
    );
    return (await this.get(row?.id as number)) as Operation;
  }

  async claim(worker: string, at: number, limits: ClaimLimits): Promise<Operation[]> {
    const now = ms(at);
    // As in SQLite: the oldest pending operation of its resource, due, not
    // leased (or its lease ran out, and it is not this worker's), at most
    // `perProject` of this worker's leases per project.
    const found = await rows(
      this.db,
      `WITH held AS (
         SELECT project_id, count(*) AS n FROM operations
         WHERE state = 'pending' AND locked_by = $1 AND lease_expires_at >= $2
         GROUP BY project_id
       ),
       runnable AS (
         SELECT o.*, row_number() OVER (PARTITION BY o.project_id ORDER BY o.run_after, o.id) AS rn
         FROM operations o
         WHERE o.state = 'pending' AND o.run_after <= $2
           AND (o.locked_by IS NULL OR (o.lease_expires_at < $2 AND o.locked_by != $1))
           AND o.id = (SELECT min(id) FROM operations p
                       WHERE p.state = 'pending' AND p.resource_kind = o.resource_kind
                         AND p.resource_id = o.resource_id)
       )
       SELECT r.* FROM runnable r LEFT JOIN held h ON h.project_id = r.project_id
       WHERE r.rn + coalesce(h.n, 0) <= $3
       ORDER BY r.run_after, r.id LIMIT $4`,
      [worker, now, limits.perProject, limits.limit],
    );
    const expires = ms(now + limits.leaseMs);
    const claimed: Operation[] = [];
    for (const row of found) {
      const read = readOperation(row);
      if ('error' in read) {
        // Never handed out, never retried: failed where anyone can read why.
        await this.db.query(
          `UPDATE operations SET state = 'failed', last_error = $1, locked_by = NULL,
             lease_expires_at = NULL, updated_at = $2 WHERE id = $3`,
          [read.error, iso(now), read.id],
        );
        continue;
      }
      await this.db.query(
        'UPDATE operations SET locked_by = $1, lease_expires_at = $2, updated_at = $3 WHERE id = $4',
        [worker, expires, iso(now), read.op.id],
      );
      claimed.push({ ...read.op, lockedBy: worker, leaseExpiresAt: expires, updatedAt: iso(now) });
    }
    return claimed;
  }

  async renew(worker: string, now: number, leaseMs: number): Promise<void> {
    await this.db.query(
      `UPDATE operations SET lease_expires_at = $1 WHERE locked_by = $2 AND state = 'pending'`,
      [ms(now + leaseMs), worker],
    );
  }

  async release(id: number, worker: string, at: ReleaseAt): Promise<boolean> {
    const n = await changes(
      this.db,
      `UPDATE operations SET locked_by = NULL, lease_expires_at = NULL, run_after = $1, last_error = $2,
         attempts = $3, waits = coalesce($4, waits), waiting_since = coalesce($5, waiting_since),
         updated_at = $6 WHERE id = $7 AND locked_by = $8 AND state = 'pending'`,
      [
        ms(at.runAfter),
        at.error,
        at.attempts,
        at.waits ?? null,
        at.waitingSince === undefined ? null : ms(at.waitingSince),
        iso(at.now),
        id,
        worker,
      ],
    );
    return n === 1;
  }

  async finish(
    id: number,
    worker: string,
    state: 'done' | 'failed',
    error: string | null,
    now: number,
  ): Promise<boolean> {
    const n = await changes(
      this.db,
      `UPDATE operations SET state = $1, last_error = coalesce($2, last_error), locked_by = NULL,
         lease_expires_at = NULL, updated_at = $3 WHERE id = $4 AND locked_by = $5 AND state = 'pending'`,
      [state, error, iso(now), id, worker],
    );
    return n === 1;
  }

  async cancelForResource(kind: ResourceKind, resourceId: string, now: number): Promise<void> {
    await this.db.query(
      `UPDATE operations SET state = 'cancelled', updated_at = $1
       WHERE state = 'pending' AND resource_kind = $2 AND resource_id = $3`,
      [iso(now), kind, resourceId],
    );
  }

  async leaseHolders(): Promise<string[]> {
    const found = await rows(
      this.db,
      `SELECT locked_by FROM operations WHERE locked_by IS NOT NULL AND state = 'pending'
       GROUP BY locked_by ORDER BY locked_by COLLATE "C"`,
    );
    return found.map((r) => r.locked_by as string);
  }

  async releaseLeases(worker: string, now: number): Promise<number> {
    return changes(
      this.db,
      `UPDATE operations SET locked_by = NULL, lease_expires_at = NULL, updated_at = $1
       WHERE locked_by = $2 AND state = 'pending'`,
      [iso(now), worker],
    );
  }

  async get(id: number): Promise<Operation | undefined> {
    const [row] = await rows(this.db, 'SELECT * FROM operations WHERE id = $1', [id]);
    if (row === undefined) return undefined;
    const read = readOperation(row);
    return 'op' in read ? read.op : undefined;
  }

  async listPending(): Promise<Operation[]> {
    const found = await rows(
      this.db,
      `SELECT * FROM operations WHERE state = 'pending' ORDER BY id`,
    );
    return found.map(readOperation).flatMap((read) => ('op' in read ? [read.op] : []));
  }

  async latestFailures(): Promise<FailedOperation[]> {
    const found = await rows(
      this.db,
      `SELECT o.id, o.kind, o.resource_kind, o.resource_id, o.last_error FROM operations o
       WHERE o.state = 'failed'
         AND o.id = (SELECT max(p.id) FROM operations p
                     WHERE p.resource_kind = o.resource_kind AND p.resource_id = o.resource_id)
       ORDER BY o.id`,
    );
    return found.map((r) => ({
      id: r.id as number,
      kind: r.kind as string,
      resourceKind: r.resource_kind as string,
      resourceId: r.resource_id as string,
      lastError: (r.last_error as string | null) ?? null,
    }));
  }

  async nextDue(): Promise<number | undefined> {
    const [row] = await rows(
      this.db,
      `SELECT min(run_after) AS due FROM operations WHERE state = 'pending'`,
    );
    return (row?.due as number | null) ?? undefined;
  }
}
