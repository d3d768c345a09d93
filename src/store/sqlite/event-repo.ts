import type Database from 'better-sqlite3';
import {
  EVENTS_KEPT_PER_RESOURCE,
  type EventQuery,
  type EventRepo,
  type NewEvent,
  type ResourceKind,
  type StoredEvent,
} from '../store.js';

/**
 * Basin's own log entries, per resource. Search terms match as JavaScript's
 * case-insensitive substring test does (SQLite's lower() folds ASCII only),
 * so events filter exactly like the drivers' entries they are merged with.
 */
export class SqliteEventRepo implements EventRepo {
  constructor(private readonly db: Database.Database) {
    db.function('basin_icontains', { deterministic: true }, (haystack, needle) =>
      String(haystack).toLowerCase().includes(String(needle).toLowerCase()) ? 1 : 0,
    );
  }

  async add(e: NewEvent): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO events (resource_kind, resource_id, node, at, severity, message)
         VALUES (?, ?, ?, ?, ?, ?)`,
      )
      .run(e.resourceKind, e.resourceId, e.node, e.at, e.severity, e.message);
    this.db
      .prepare(
        `DELETE FROM events WHERE resource_kind = @kind AND resource_id = @id AND id NOT IN (
           SELECT id FROM events WHERE resource_kind = @kind AND resource_id = @id
           ORDER BY at DESC, id DESC LIMIT @keep)`,
      )
      .run({ kind: e.resourceKind, id: e.resourceId, keep: EVENTS_KEPT_PER_RESOURCE });
  }

  async list(kind: ResourceKind, resourceId: string, q: EventQuery): Promise<StoredEvent[]> {
    const where = [
      'resource_kind = @kind',
      'resource_id = @id',
      q.node === 0 ? '(node IS NULL OR node = 0)' : 'node = @node',
    ];
    const params: Record<string, unknown> = {
      kind,
      id: resourceId,
      node: q.node,
      limit: Math.max(0, Math.floor(q.limit)),
    };
    if (q.before) {
      where.push('(at < @beforeAt OR (at = @beforeAt AND id < @beforeId))');
      params.beforeAt = q.before.at;
      params.beforeId = q.before.id;
    }
    if (q.since !== undefined) {
      where.push('at > @since');
      params.since = q.since;
    }
    if (q.until !== undefined) {
      where.push('at < @until');
      params.until = q.until;
    }
    if (q.severities.length > 0) {
      const names = q.severities.map((s, i) => {
        params[`sev${i}`] = s.toUpperCase();
        return `@sev${i}`;
      });
      where.push(`severity IN (${names.join(', ')})`);
    }
    q.search.forEach((term, i) => {
      params[`term${i}`] = term;
      where.push(`basin_icontains(message, @term${i})`);
    });
    const rows = this.db
      .prepare(
        `SELECT * FROM events WHERE ${where.join(' AND ')} ORDER BY at DESC, id DESC LIMIT @limit`,
      )
      .all(params) as Record<string, unknown>[];
    return rows.map((r) => ({
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
    this.db
      .prepare('DELETE FROM events WHERE resource_kind = ? AND resource_id = ?')
      .run(kind, resourceId);
  }
}
