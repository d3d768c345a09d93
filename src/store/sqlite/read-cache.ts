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
// view runs that check, once, and empties the whole cache when anything was
// committed: coarse, but writes are rare next to reads, and nothing can be
// missed.
//
// Everything here is synchronous, like better-sqlite3: a miss reads and fills
// the cache in one step, so no commit can come between the read and the fill.
// Misses (an unknown bearer key, an unknown id) are not cached, so random
// input cannot fill the cache; every cache is also capped (LRU). Cached values
// are frozen, since they are handed to every request that asks.

import type Database from 'better-sqlite3';
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
  docs: 2000,
  lists: 2000,
};

export class ReadCache {
  /** The cached view: the same object for every request. */
  readonly view: ReadView;
  private readonly commits: CommitWatch;
  private readonly caches: Lru<string, unknown>[] = [];

  /** `reader`: the read connection; `source`: the uncached view on it. */
  constructor(reader: Database.Database, source: ReadView, limits = DEFAULT_READ_CACHE_LIMITS) {
    this.commits = watchCommits(reader);
    this.commits.changed();
    /** A read through an LRU; what `load` finds is cached, frozen, and misses are not. */
    const cached = <V>(max: number, load: (key: string) => V) => {
      const lru = new Lru<string, NonNullable<V>>(max);
      this.caches.push(lru as Lru<string, unknown>);
      return (key: string): V => {
        const hit = lru.get(key);
        if (hit !== undefined) return hit;
        const value = load(key);
        if (value !== undefined && value !== null) lru.set(key, deepFreeze(value));
        return value;
      };
    };
    const { credentials, users, services, replicaSets } = source;
    this.view = {
      credentials: {
        findByBearerHash: cached(limits.credentials, (h) => credentials.findByBearerHash(h)),
        findByAccessKey: cached(limits.credentials, (k) => credentials.findByAccessKey(k)),
      },
      users: { projectIds: cached(limits.users, (u) => users.projectIds(u)) },
      services: {
        get: cached(limits.docs, (id) => services.get(id)),
        listByProject: cached(limits.lists, (p) => services.listByProject(p)),
      },
      replicaSets: {
        get: cached(limits.docs, (id) => replicaSets.get(id)),
        listByService: cached(limits.lists, (s) => replicaSets.listByService(s)),
      },
    };
  }

  /** Entries cached, over every kind (for tests). */
  get size(): number {
    return this.caches.reduce((n, c) => n + c.size, 0);
  }

  close(): void {
    this.commits.close();
  }

  /**
   * The view, after emptying the cache if anything was committed since the
   * last check. The check (a pread(2) of the WAL-index header, about a tenth
   * of a polled GET's CPU) is made once per turn of the event loop: the
   * requests answered in one turn are those whose bytes one epoll call found
   * waiting, so each was sent before the check, and answering it from the
   * state as of the check is answering it as of a moment while it was in
   * flight. Our own commits call `committed()`, so a read after a write in
   * the same turn checks again and sees it.
   */
  check(): ReadView {
    if (this.checkedThisTurn) return this.view;
    if (this.commits.changed()) for (const c of this.caches) c.clear();
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
}
