// The cache behind Store.readView. Every request authenticates and most read
// the same few rows again and again (a client polling its service), and each
// SQLite statement on its own costs a read transaction (two fcntl locks on the
// -shm file) plus building the row in JavaScript. So a view answers from
// memory while the database is unchanged.
//
// Unchanged means: `PRAGMA data_version` on the read connection is what it was
// at the last check. SQLite changes it whenever another connection commits,
// whether our own writer connection (a separate connection; the reader never
// writes) or another process on the same file, such as `basin credential
// revoke` (see read-cache.test.ts). Making a view runs that check, once, and
// empties the whole cache when anything was committed: coarse, but writes are
// rare next to reads, and nothing can be missed.
//
// Misses (an unknown bearer key, an unknown id) are not cached, so random
// input cannot fill the cache; every cache is also capped (LRU). Cached values
// are frozen, since they are handed to every request that asks.

import type Database from 'better-sqlite3';
import { deepFreeze } from '../../lib/freeze.js';
import { Lru } from '../../lib/lru.js';
import type { ReplicaSet, Service } from '../../domain/types.js';
import type { Credential, ReadView, Repos } from '../store.js';

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
  readonly view: ReadView;
  private readonly dataVersion: Database.Statement;
  private version: unknown;
  /** Bumped whenever the cache is emptied: a load that started before it must not fill it. */
  private generation = 0;
  private readonly caches: Lru<string, unknown>[] = [];

  constructor(reader: Database.Database, reads: Repos, limits = DEFAULT_READ_CACHE_LIMITS) {
    this.dataVersion = reader.prepare('PRAGMA data_version').pluck();
    this.version = this.dataVersion.get();
    const byBearer = this.lru<Credential>(limits.credentials);
    const byAccessKey = this.lru<Credential>(limits.credentials);
    const projectIds = this.lru<string[]>(limits.users);
    const services = this.lru<Service>(limits.docs);
    const servicesByProject = this.lru<Service[]>(limits.lists);
    const replicaSets = this.lru<ReplicaSet>(limits.docs);
    const replicaSetsByService = this.lru<ReplicaSet[]>(limits.lists);
    this.view = {
      credentials: {
        findByBearerHash: (hash) =>
          this.cached(byBearer, hash, () => reads.credentials.findByBearerHash(hash)),
        findByAccessKey: (key) =>
          this.cached(byAccessKey, key, () => reads.credentials.findByAccessKey(key)),
      },
      users: {
        projectIds: (userId) =>
          this.cached(projectIds, userId, () => reads.users.projectIds(userId)),
      },
      services: {
        get: (id) => this.cached(services, id, () => reads.services.get(id)),
        listByProject: (projectId) =>
          this.cached(servicesByProject, projectId, () => reads.services.listByProject(projectId)),
      },
      replicaSets: {
        get: (id) => this.cached(replicaSets, id, () => reads.replicaSets.get(id)),
        listByService: (serviceId) =>
          this.cached(replicaSetsByService, serviceId, () =>
            reads.replicaSets.listByService(serviceId),
          ),
      },
    };
  }

  /** Entries cached, over every kind (for tests). */
  get size(): number {
    return this.caches.reduce((n, c) => n + c.size, 0);
  }

  /** The view, after emptying the cache if anything was committed since the last check. */
  check(): ReadView {
    const version = this.dataVersion.get();
    if (version !== this.version) {
      this.version = version;
      this.generation++;
      for (const c of this.caches) c.clear();
    }
    return this.view;
  }

  private lru<V>(max: number): Lru<string, V> {
    const lru = new Lru<string, V>(max);
    this.caches.push(lru as Lru<string, unknown>);
    return lru;
  }

  /** A hit costs one Map lookup and no async function; a miss reads (misses stay uncached). */
  private cached<V>(
    lru: Lru<string, NonNullable<V>>,
    key: string,
    load: () => Promise<V>,
  ): Promise<V> {
    const hit = lru.get(key);
    return hit !== undefined ? Promise.resolve(hit) : this.fill(lru, key, load);
  }

  private async fill<V>(
    lru: Lru<string, NonNullable<V>>,
    key: string,
    load: () => Promise<V>,
  ): Promise<V> {
    const generation = this.generation;
    const value = await load();
    if (value === undefined || value === null) return value;
    deepFreeze(value);
    // Emptied meanwhile: the value may predate the commit that emptied it.
    if (generation === this.generation) lru.set(key, value);
    return value;
  }
}
