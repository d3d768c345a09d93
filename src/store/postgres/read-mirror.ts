// The PostgreSQL store's read view (Store.readView): synchronous, so served
// from memory. The tables it reads (MIRRORED_TABLES: credentials, the users'
// projects, services, read replica sets) are held here whole, loaded at open,
// and each is loaded again whenever a commit changed it:
//
// - a commit by this process: `transaction` knows which mirrored tables it
//   wrote (the repositories say, PgContext.touched) and, after COMMIT,
//   awaits their reload before it returns, so a request reads its own writes;
// - a commit by any process (another Basin, `basin credential revoke`): a
//   trigger on the table (migrations.ts, CHANGE_TRIGGERS) sends a NOTIFY on
//   commit, which this process LISTENs for on a connection of its own, and
//   reloads the table it names (milliseconds; the bound asked is 1 s).
//
// "No commit between read and fill" (sqlite/read-cache.ts) becomes: every
// reload is a query that *starts* after the commit that asked for it was
// known here (its NOTIFY received, or its COMMIT returned), so under READ
// COMMITTED its snapshot contains that commit. A table's reloads run one at a
// time and are installed in the order they ran, so an older snapshot never
// replaces a newer one; a request for a reload while one runs queues exactly
// one more after it (which all requests meanwhile share). A notification that
// arrives during a load therefore always causes a later load: the cache can
// be stale for at most the length of two loads after a commit.
//
// When the listening connection is lost, notifications may be lost with it:
// it reconnects (every RECONNECT_MS) and, once listening again, reloads every
// table. While it is down, another process's commit is not seen; our own are.

import pg from 'pg';
import { deepFreeze } from '../../lib/freeze.js';
import type { Credential, ReplicaSet, Service } from '../../domain/types.js';
import type { ReadView } from '../store.js';
import {
  CHANGE_CHANNEL,
  MIRRORED_TABLES,
  type MirroredTable,
  QUEUE_CHANNEL,
  USAGE_CHANNEL,
} from './migrations.js';
import { BY_TIME, C, type Queryable, rows } from './queryable.js';
import { toCredential } from './repos.js';

const RECONNECT_MS = 500;
const NONE: readonly never[] = Object.freeze([]);

interface Docs<T> {
  byId: Map<string, T>;
  byParent: Map<string, readonly T[]>;
}

interface Mirror {
  credentials: { byBearer: Map<string, Credential>; byAccess: Map<string, Credential> };
  user_projects: Map<string, readonly string[]>;
  services: Docs<Service>;
  replica_sets: Docs<ReplicaSet>;
}

/** One table's reloads: the one running, and at most one queued after it. */
interface Lane {
  running?: Promise<void> | undefined;
  next?: Promise<void> | undefined;
}

export class ReadMirror {
  readonly view: ReadView;
  private readonly lanes = new Map<MirroredTable, Lane>();
  private listener: pg.Client | undefined;
  private closed = false;
  private readonly queued: (() => void)[] = [];
  private readonly published: (() => void)[] = [];

  private constructor(
    private readonly db: Queryable,
    private readonly connect: () => pg.Client,
    private data: Mirror,
  ) {
    this.view = {
      credentials: {
        findByBearerHash: (h) => this.data.credentials.byBearer.get(h),
        findByAccessKey: (k) => this.data.credentials.byAccess.get(k),
      },
      users: { projectIds: (u) => this.data.user_projects.get(u) ?? NONE },
      services: {
        get: (id) => this.data.services.byId.get(id),
        listByProject: (p) => this.data.services.byParent.get(p) ?? NONE,
      },
      replicaSets: {
        get: (id) => this.data.replica_sets.byId.get(id),
        listByService: (s) => this.data.replica_sets.byParent.get(s) ?? NONE,
      },
    };
  }

  /** Listens first, then loads: a commit between the two is in the load. */
  static async open(db: Queryable, connect: () => pg.Client): Promise<ReadMirror> {
    const empty: Mirror = {
      credentials: { byBearer: new Map(), byAccess: new Map() },
      user_projects: new Map(),
      services: { byId: new Map(), byParent: new Map() },
      replica_sets: { byId: new Map(), byParent: new Map() },
    };
    const mirror = new ReadMirror(db, connect, empty);
    await mirror.listen();
    await Promise.all(MIRRORED_TABLES.map((t) => mirror.refresh(t)));
    return mirror;
  }

  /**
   * Reloads `table` by a query that starts after this call; resolves once
   * it is installed (rejects if it failed: a later one is then scheduled).
   */
  refresh(table: MirroredTable): Promise<void> {
    let lane = this.lanes.get(table);
    if (!lane) this.lanes.set(table, (lane = {}));
    const l = lane;
    if (l.next) return l.next;
    const start = (): Promise<void> => {
      const run = this.load(table);
      l.running = run;
      const settle = () => {
        if (l.running === run) l.running = undefined;
      };
      run.then(settle, (err: unknown) => {
        settle();
        this.retryLater(table, err);
      });
      return run;
    };
    if (!l.running) return start();
    const next = l.running
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        l.next = undefined;
        return start();
      });
    l.next = next;
    return next;
  }

  /**
   * Calls `on` when any process queued an operation (QUEUE_CHANNEL), on
   * this listening connection; and once it listens again after losing it
   * (a notification may have been lost meanwhile).
   */
  onQueued(on: () => void): void {
    this.queued.push(on);
  }

  /** The same for USAGE_CHANNEL: the leader published a round of samples (usage-rounds.ts). */
  onUsage(on: () => void): void {
    this.published.push(on);
  }

  async close(): Promise<void> {
    this.closed = true;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
  }

  private retryLater(table: MirroredTable, _err: unknown): void {
    if (this.closed) return;
    setTimeout(() => {
      if (!this.closed) this.refresh(table).catch(() => undefined);
    }, RECONNECT_MS).unref();
  }

  private async listen(): Promise<void> {
    const client = this.connect();
    client.on('notification', (msg) => {
      if (msg.channel === QUEUE_CHANNEL || msg.channel === USAGE_CHANNEL) {
        for (const on of msg.channel === QUEUE_CHANNEL ? this.queued : this.published) on();
        return;
      }
      const table = MIRRORED_TABLES.find((t) => t === msg.payload);
      if (table && !this.closed) this.refresh(table).catch(() => undefined);
    });
    const lost = () => {
      if (this.listener !== client || this.closed) return;
      this.listener = undefined;
      client.end().catch(() => undefined);
      setTimeout(() => this.relisten(), RECONNECT_MS).unref();
    };
    client.on('error', lost);
    client.on('end', lost);
    this.listener = client;
    try {
      await client.connect();
      await client.query(
        `LISTEN ${CHANGE_CHANNEL}; LISTEN ${QUEUE_CHANNEL}; LISTEN ${USAGE_CHANNEL}`,
      );
    } catch (err) {
      this.listener = undefined;
      client.end().catch(() => undefined);
      throw err;
    }
  }

  private relisten(): void {
    if (this.closed) return;
    this.listen().then(
      () => {
        for (const t of MIRRORED_TABLES) this.refresh(t).catch(() => undefined);
        for (const on of [...this.queued, ...this.published]) on();
      },
      () => setTimeout(() => this.relisten(), RECONNECT_MS).unref(),
    );
  }

  private async load(table: MirroredTable): Promise<void> {
    switch (table) {
      case 'credentials': {
        const all = (await rows(this.db, `SELECT * FROM credentials ORDER BY ${BY_TIME}`)).map(
          (r) => deepFreeze(toCredential(r)),
        );
        this.data = {
          ...this.data,
          credentials: {
            byBearer: new Map(all.map((c) => [c.bearerHash, c])),
            byAccess: new Map(all.map((c) => [c.accessKey, c])),
          },
        };
        return;
      }
      case 'user_projects': {
        const found = await rows(
          this.db,
          `SELECT user_id, project_id FROM user_projects ORDER BY user_id ${C}, project_id ${C}`,
        );
        const byUser = new Map<string, string[]>();
        for (const r of found) push(byUser, r.user_id as string, r.project_id as string);
        this.data = { ...this.data, user_projects: freezeLists(byUser) };
        return;
      }
      case 'services':
      case 'replica_sets': {
        // Services are listed by project, read replica sets by their service.
        const key = table === 'services' ? 'project_id' : 'parent_id';
        const found = await rows(
          this.db,
          `SELECT ${key} AS k, doc FROM ${table} ORDER BY ${BY_TIME}`,
        );
        type Doc = Service | ReplicaSet;
        const byId = new Map<string, Doc>();
        const byParent = new Map<string, Doc[]>();
        for (const r of found) {
          const doc = deepFreeze(JSON.parse(r.doc as string) as Doc);
          byId.set(doc.id, doc);
          push(byParent, r.k as string, doc);
        }
        this.data = { ...this.data, [table]: { byId, byParent: freezeLists(byParent) } };
        return;
      }
    }
  }
}

function push<V>(m: Map<string, V[]>, k: string, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

function freezeLists<V>(m: Map<string, V[]>): Map<string, readonly V[]> {
  for (const list of m.values()) Object.freeze(list);
  return m;
}
