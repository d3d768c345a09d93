import type Database from 'better-sqlite3';
import { conflict } from '../../domain/errors.js';
import type { DocRepo } from '../store.js';

type Doc = { id: string; version: number; projectId: string; createdAt: string };

/**
 * A table of versioned JSON documents. The columns beside `doc` exist only so
 * that queries can filter and order without parsing JSON.
 */
export class SqliteDocRepo<T extends Doc> implements DocRepo<T> {
  private readonly stmts;

  constructor(
    protected readonly db: Database.Database,
    protected readonly table: string,
    private readonly parentOf: (doc: T) => string | null,
    private readonly what: string,
  ) {
    this.stmts = {
      get: db.prepare(`SELECT doc FROM ${table} WHERE id = ?`).pluck(),
      insert: db.prepare(
        `INSERT INTO ${table} (id, project_id, parent_id, version, created_at, doc) VALUES (?, ?, ?, ?, ?, ?)`,
      ),
      update: db.prepare(
        `UPDATE ${table} SET version = version + 1, doc = ? WHERE id = ? AND version = ?`,
      ),
      delete: db.prepare(`DELETE FROM ${table} WHERE id = ?`),
      byProject: db
        .prepare(`SELECT doc FROM ${table} WHERE project_id = ? ORDER BY created_at, id`)
        .pluck(),
      byParent: db
        .prepare(`SELECT doc FROM ${table} WHERE parent_id = ? ORDER BY created_at, id`)
        .pluck(),
      all: db.prepare(`SELECT doc FROM ${table} ORDER BY created_at, id`).pluck(),
    };
  }

  async get(id: string): Promise<T | undefined> {
    return this.read(id);
  }

  /** `get`, synchronously (for read views, see repos.ts createReadView). */
  read(id: string): T | undefined {
    const row = this.stmts.get.get(id) as string | undefined;
    return row === undefined ? undefined : (JSON.parse(row) as T);
  }

  async insert(doc: T): Promise<void> {
    this.stmts.insert.run(
      doc.id,
      doc.projectId,
      this.parentOf(doc),
      doc.version,
      doc.createdAt,
      JSON.stringify(doc),
    );
  }

  async update(doc: T): Promise<T> {
    const next = { ...doc, version: doc.version + 1 };
    const res = this.stmts.update.run(JSON.stringify(next), doc.id, doc.version);
    if (res.changes !== 1) {
      throw conflict(
        `The ${this.what} ${doc.id} was changed by another request; read it again and retry.`,
      );
    }
    return next;
  }

  async delete(id: string): Promise<void> {
    this.stmts.delete.run(id);
  }

  async listByProject(projectId: string): Promise<T[]> {
    return this.readByProject(projectId);
  }

  readByProject(projectId: string): T[] {
    return this.parse(this.stmts.byProject.all(projectId));
  }

  protected async listByParent(parentId: string): Promise<T[]> {
    return this.readByParent(parentId);
  }

  readByParent(parentId: string): T[] {
    return this.parse(this.stmts.byParent.all(parentId));
  }

  async listAll(): Promise<T[]> {
    return this.parse(this.stmts.all.all());
  }

  private parse(rows: unknown[]): T[] {
    return (rows as string[]).map((r) => JSON.parse(r) as T);
  }
}
