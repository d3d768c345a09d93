import {
  EVENTS_KEPT_PER_RESOURCE,
  type EventQuery,
  type EventRepo,
  type NewEvent,
  type ResourceKind,
  type StoredEvent,
} from '../store.js';
import { ms, type PgContext, rows } from './queryable.js';

/**
 * Basin's own log entries, per resource (sqlite/event-repo.ts). Search terms
 * match case-insensitively with Unicode case folding whatever the database's
 * own locale: lower() under ICU's root collation, as JavaScript's
 * toLowerCase() folds (the drivers' entries are filtered that way).
 */
export class PgEventRepo implements EventRepo {
  constructor(private readonly ctx: PgContext) {}

  async add(e: NewEvent): Promise<void> {
    await this.ctx.db.query(
      `INSERT INTO events (resource_kind, resource_id, node, at, severity, message)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [e.resourceKind, e.resourceId, e.node, ms(e.at), e.severity, e.message],
    );
    await this.ctx.db.query(
      `DELETE FROM events WHERE resource_kind = $1 AND resource_id = $2 AND id NOT IN (
         SELECT id FROM events WHERE resource_kind = $1 AND resource_id = $2
         ORDER BY at DESC, id DESC LIMIT $3)`,
      [e.resourceKind, e.resourceId, EVENTS_KEPT_PER_RESOURCE],
    );
  }

  async list(kind: ResourceKind, resourceId: string, q: EventQuery): Promise<StoredEvent[]> {
    const values: unknown[] = [];
    const param = (v: unknown) => {
      values.push(v);
      return `$${values.length}`;
    };
    const where = [
      `resource_kind = ${param(kind)}`,
      `resource_id = ${param(resourceId)}`,
      q.node === 0 ? '(node IS NULL OR node = 0)' : `node = ${param(q.node)}`,
    ];
    if (q.before) {
      const at = param(q.before.at);
      where.push(`(at < ${at} OR (at = ${at} AND id < ${param(q.before.id)}))`);
    }
    if (q.since !== undefined) where.push(`at > ${param(q.since)}`);
    if (q.until !== undefined) where.push(`at < ${param(q.until)}`);
    if (q.severities.length > 0) {
      where.push(`severity = ANY(${param(q.severities.map((s) => s.toUpperCase()))}::text[])`);
    }
    for (const term of q.search) {
      where.push(
        `strpos(lower(message COLLATE "und-x-icu"), lower(${param(term)}::text COLLATE "und-x-icu")) > 0`,
      );
    }
    const limit = param(Math.max(0, Math.floor(q.limit)));
    const found = await rows(
      this.ctx.db,
      `SELECT * FROM events WHERE ${where.join(' AND ')} ORDER BY at DESC, id DESC LIMIT ${limit}`,
      values,
    );
    return found.map((r) => ({
      id: r.id as number,
      resourceKind: r.resource_kind as ResourceKind,
      resourceId: r.resource_id as string,
      node: (r.node as number | null) ?? null,
      at: r.at as number,
      severity: r.severity as string,
      message: r.message as string,
    }));
  }

  async deleteForResource(kind: ResourceKind, resourceId: string): Promise<void> {
    await this.ctx.db.query('DELETE FROM events WHERE resource_kind = $1 AND resource_id = $2', [
      kind,
      resourceId,
    ]);
  }
}
