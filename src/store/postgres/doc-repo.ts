import { conflict } from '../../domain/errors.js';
import type { DocRepo } from '../store.js';
import type { MirroredTable } from './migrations.js';
import { BY_TIME, changes, type PgContext, rows } from './queryable.js';

type Doc = { id: string; version: number; projectId: string; createdAt: string };

/**
 * A table of versioned JSON documents (sqlite/doc-repo.ts, on PostgreSQL).
 * The optimistic check is the UPDATE's own WHERE: under READ COMMITTED a
 * concurrent update of the same row waits for the other to commit, then
 * re-checks `version` against the row it committed, so of two writers from
 * the same read exactly one changes a row, whatever the isolation.
 */
export class PgDocRepo<T extends Doc> implements DocRepo<T> {
  constructor(
    protected readonly ctx: PgContext,
    protected readonly table: string,
    private readonly parentOf: (doc: T) => string | null,
    private readonly what: string,
  ) {}

  private touch(): void {
    if (this.table === 'services' || this.table === 'replica_sets') {
      this.ctx.touched(this.table as MirroredTable);
    }
  }

  async get(id: string): Promise<T | undefined> {
    const [row] = await rows(this.ctx.db, `SELECT doc FROM ${this.table} WHERE id = $1`, [id]);
    return row === undefined ? undefined : (JSON.parse(row.doc as string) as T);
  }

  async insert(doc: T): Promise<void> {
    this.touch();
    await this.ctx.db.query(
      `INSERT INTO ${this.table} (id, project_id, parent_id, version, created_at, doc)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [doc.id, doc.projectId, this.parentOf(doc), doc.version, doc.createdAt, JSON.stringify(doc)],
    );
  }

  async update(doc: T): Promise<T> {
    this.touch();
    const next = { ...doc, version: doc.version + 1 };
    const n = await changes(
      this.ctx.db,
      `UPDATE ${this.table} SET version = version + 1, doc = $1 WHERE id = $2 AND version = $3`,
      [JSON.stringify(next), doc.id, doc.version],
    );
    if (n !== 1) {
      throw conflict(
        `The ${this.what} ${doc.id} was changed by another request; read it again and retry.`,
      );
    }
    return next;
  }

  async delete(id: string): Promise<void> {
    this.touch();
    await this.ctx.db.query(`DELETE FROM ${this.table} WHERE id = $1`, [id]);
  }

  async listByProject(projectId: string): Promise<T[]> {
    return this.list('WHERE project_id = $1', [projectId]);
  }

  protected async listByParent(parentId: string): Promise<T[]> {
    return this.list('WHERE parent_id = $1', [parentId]);
  }

  async listAll(): Promise<T[]> {
    return this.list('', []);
  }

  private async list(where: string, values: unknown[]): Promise<T[]> {
    const found = await rows(
      this.ctx.db,
      `SELECT doc FROM ${this.table} ${where} ORDER BY ${BY_TIME}`,
      values,
    );
    return found.map((r) => JSON.parse(r.doc as string) as T);
  }
}
