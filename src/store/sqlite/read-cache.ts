// The cache behind Store.readView. Every request authenticates and most read
// the same few rows again and again (a client polling its service), and each
// SQLite statement on its own costs a read transaction (two fcntl locks on the
// -shm file) plus building the row in JavaScript. So a view answers from
// memory while the database is unchanged.
//
// Unchanged means: nothing was committed since the last check, by any
// connection, whether our own writer connection (a separate connection; the
// reader never writes) or another process on the same file, such as `basin
// credential revoke` (see read-cache.test.ts). commit-watch.ts tells, from the
// WAL-index header every commit writes (or `PRAGMA data_version`). Making a
// view runs that check, once.
//
// What a commit changed is narrowed down by table: triggers count every row
// written to the tables a view reads (`read_changes`, migration 12, written by
// whoever commits, other processes included), so a commit that touched only
// operations, events or backups (most of the engine's) empties nothing, and
// one that touched credentials empties only the credentials' caches. Services
// are kept across their own table's changes: a service read before is handed
// out again, the same frozen object, while its row's version and creation time
// are still the same (every update bumps the version, doc-repo.ts), so a list
// of 2,000 services after one of them changed reads 2,000 (id, version) pairs
// from an index and one document, and the presented bodies and their JSON,
// kept per service object (api/presented-cache.ts), are reused for the rest.
// Without it every commit of a create (a dozen a second while services are
// made) had each list parse, freeze, present and serialize every service
// again, and read every service's replica sets with a statement each, on the
// event loop (docs/decisions.md, "Density (local driver)").
//
// Everything here is synchronous, like better-sqlite3: a miss reads and fills
// the cache in one step, so no commit can come between the read and the fill.
// Misses (an unknown bearer key, an unknown id) are not cached, so random
// input cannot fill the cache; every cache is also capped. Cached values are
// frozen, since they are handed to every request that asks.

import type Database from 'better-sqlite3';
import type { Service } from '../../domain/types.js';
import { deepFreeze } from '../../lib/freeze.js';
import { Lru } from '../../lib/lru.js';
import type { ReadView } from '../store.js';
import { type CommitWatch, watchCommits } from './commit-watch.js';

export interface ReadCacheLimits {
  /** Credentials cached, per scheme. */
  credentials: number;
  /** Users whose project list is cached. */
  users: number;
  /** Documents cached, per kind (services, read replica sets). */
  docs: number;
  /** Lists cached, per kind (services of a project, replica sets of a service). */
  lists: number;
}

export const DEFAULT_READ_CACHE_LIMITS: ReadCacheLimits = {
  credentials: 1000,
  users: 1000,
  // A list of every service of a project reuses the services read before
  // (above): the documents and the replica sets of each must all fit, or a
  // list of more services than that reads them all again every time.
  docs: 20_000,
  lists: 20_000,
};

/** The tables a read view reads (read_changes' rows). */
const TABLES = ['credentials', 'user_projects', 'services', 'replica_sets'] as const;
type Table = (typeof TABLES)[number];

/** A service's row as the lists' check reads it (an index alone answers it). */
interface Row {
  id: string;
  version: number;
  created_at: string;
}

/** A service handed out, and the services generation it was last found current in. */
interface Held {
  doc: Service;
  checked: number;
}

export class ReadCache {
  /** The cached view: the same object for every request. */
  readonly view: ReadView;
  private readonly commits: CommitWatch;
  /** Each table's caches, emptied when its count moves. */
  private readonly caches = new Map<Table, Lru<string, unknown>[]>();
  /** Each table's change count, as last read; undefined: unknown (everything is emptied). */
  private seqs: Map<string, number> | undefined;
  private readonly readSeqs: () => Map<string, number> | undefined;
  /** The services handed out, by id: reused while their row's version holds. */
  private readonly held = new Map<string, Held>();
  /** Bumped whenever the services table changed: what was checked before is checked again. */
  private servicesGeneration = 0;
  private readonly serviceLists: Lru<string, { docs: readonly Service[]; checked: number }>;

  /** `reader`: the read connection; `source`: the uncached view on it. */
  constructor(
    reader: Database.Database,
    source: ReadView,
    private readonly limits = DEFAULT_READ_CACHE_LIMITS,
  ) {
    this.commits = watchCommits(reader);
    this.commits.changed();
    const changes = tryPrepare(reader, 'SELECT name, seq FROM read_changes');
    this.readSeqs = () => {
      try {
        return changes ? new Map(changes.raw().all() as [string, number][]) : undefined;
      } catch {
        return undefined;
      }
    };
    this.seqs = this.readSeqs();
    /** A read through an LRU; what `load` finds is cached, frozen, and misses are not. */
    const cached = <V>(table: Table, max: number, load: (key: string) => V) => {
      const lru = new Lru<string, NonNullable<V>>(max);
      this.lru(table, lru as Lru<string, unknown>);
      return (key: string): V => {
        const hit = lru.get(key);
        if (hit !== undefined) return hit;
        const value = load(key);
        if (value !== undefined && value !== null) lru.set(key, deepFreeze(value));
        return value;
      };
    };
    const { credentials, users, services, replicaSets } = source;
    const versionOf = reader.prepare('SELECT id, version, created_at FROM services WHERE id = ?');
    const rowsOf = reader.prepare(
      'SELECT id, version, created_at FROM services WHERE project_id = ? ORDER BY created_at, id',
    );
    this.serviceLists = new Lru(limits.lists);
    this.lru('services', this.serviceLists as Lru<string, unknown>);
    const service = (row: Row): Service | undefined => {
      const gen = this.servicesGeneration;
      const held = this.held.get(row.id);
      if (held && held.doc.version === row.version && held.doc.createdAt === row.created_at) {
        held.checked = gen;
        return held.doc;
      }
      const doc = services.get(row.id);
      if (doc === undefined) {
        this.held.delete(row.id);
        return undefined;
      }
      if (this.held.size >= limits.docs) this.held.clear();
      this.held.set(row.id, { doc: deepFreeze(doc), checked: gen });
      return doc;
    };
    // The row and the document are read in one read transaction: the same state.
    const inTransaction = reader.transaction((fn: () => unknown) => fn());
    const snapshot = <T>(fn: () => T): T => inTransaction(fn) as T;
    this.view = {
      credentials: {
        findByBearerHash: cached('credentials', limits.credentials, (h) =>
          credentials.findByBearerHash(h),
        ),
        findByAccessKey: cached('credentials', limits.credentials, (k) =>
          credentials.findByAccessKey(k),
        ),
      },
      users: { projectIds: cached('user_projects', limits.users, (u) => users.projectIds(u)) },
      services: {
        get: (id) => {
          const held = this.held.get(id);
          if (held?.checked === this.servicesGeneration) return held.doc;
          return snapshot(() => {
            const row = versionOf.get(id) as Row | undefined;
            if (row !== undefined) return service(row);
            this.held.delete(id);
            return undefined;
          });
        },
        listByProject: (projectId) => {
          const list = this.serviceLists.get(projectId);
          if (list?.checked === this.servicesGeneration) return list.docs;
          const docs = snapshot(() => {
            const out: Service[] = [];
            for (const row of rowsOf.all(projectId) as Row[]) {
              const doc = service(row);
              if (doc !== undefined) out.push(doc);
            }
            return Object.freeze(out);
          });
          // Services of the project that are gone: no longer held.
          for (const gone of list?.docs ?? []) {
            if (this.held.get(gone.id)?.checked !== this.servicesGeneration) {
              this.held.delete(gone.id);
            }
          }
          this.serviceLists.set(projectId, { docs, checked: this.servicesGeneration });
          return docs;
        },
      },
      replicaSets: {
        get: cached('replica_sets', limits.docs, (id) => replicaSets.get(id)),
        listByService: cached('replica_sets', limits.lists, (s) => replicaSets.listByService(s)),
      },
    };
  }

  /** Entries cached, over every kind (for tests). */
  get size(): number {
    let n = this.held.size;
    for (const lrus of this.caches.values()) for (const c of lrus) n += c.size;
    return n;
  }

  close(): void {
    this.commits.close();
  }

  /**
   * The view, after emptying what a commit since the last check may have
   * changed. The check (a pread(2) of the WAL-index header, about a tenth
   * of a polled GET's CPU; the change counts' read only after a commit) is
   * made once per turn of the event loop: the requests answered in one turn
   * are those whose bytes one epoll call found waiting, so each was sent
   * before the check, and answering it from the state as of the check is
   * answering it as of a moment while it was in flight. Our own commits call
   * `committed()`, so a read after a write in the same turn checks again and
   * sees it.
   */
  check(): ReadView {
    if (this.checkedThisTurn) return this.view;
    if (this.commits.changed()) this.forgetChanged();
    this.checkedThisTurn = true;
    setImmediate(this.nextTurn);
    return this.view;
  }

  /** Called after each commit of this process's writer: the next view checks again. */
  committed(): void {
    this.checkedThisTurn = false;
  }

  private checkedThisTurn = false;
  private readonly nextTurn = () => {
    this.checkedThisTurn = false;
  };

  private lru(table: Table, lru: Lru<string, unknown>): void {
    const list = this.caches.get(table) ?? [];
    list.push(lru);
    this.caches.set(table, list);
  }

  /** Empties the caches of the tables whose change counts moved (all of them when unknown). */
  private forgetChanged(): void {
    const before = this.seqs;
    const now = this.readSeqs();
    this.seqs = now;
    for (const table of TABLES) {
      const seq = now?.get(table);
      if (seq !== undefined && seq === before?.get(table)) continue;
      for (const c of this.caches.get(table) ?? []) c.clear();
      if (table === 'services') this.servicesGeneration++;
    }
  }
}

/** A statement, or undefined when the schema lacks what it reads (a store not migrated yet). */
function tryPrepare(db: Database.Database, sql: string) {
  try {
    return db.prepare(sql);
  } catch {
    return undefined;
  }
}
