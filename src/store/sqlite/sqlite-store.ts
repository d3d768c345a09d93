import { chmodSync, existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { AppError } from '../../domain/errors.js';
import { FencedError, type Repos, type Store, type Tx } from '../store.js';
import { sqliteLeadership, sqliteTerm } from './leadership-repo.js';
import { MIGRATIONS } from './migrations.js';
import { ReadCache } from './read-cache.js';
import { createReadView, createRepos } from './repos.js';

/**
 * The embedded store: one SQLite file in WAL mode, two connections. Writes
 * happen only inside `transaction`, on the writer connection, one transaction
 * at a time (a promise-chain mutex, since the callback is async). Everything
 * outside a transaction reads through a read-only connection, so it never
 * sees another request's uncommitted writes and cannot write by mistake.
 * `readView` serves the reads of requests from a cache on that connection,
 * emptied whenever anything is committed (read-cache.ts).
 */
export function openSqliteStore(file: string): Store {
  const writer = new Database(file);
  // Only Basin may read the store: it holds credential hashes and password
  // verifiers, and the databases run as another OS user on the same host.
  // (SQLite gives the -wal and -shm files the database file's mode.)
  if (existsSync(file)) chmodSync(file, 0o600);
  writer.pragma('journal_mode = WAL');
  writer.pragma('synchronous = NORMAL');
  writer.pragma('busy_timeout = 5000');
  writer.pragma('foreign_keys = ON');
  migrate(writer);
  const reader = new Database(file, { readonly: true });
  reader.pragma('busy_timeout = 5000');

  const txRepos: Tx = createRepos(writer);
  const readRepos = refuseWrites(createRepos(reader));
  const cache = new ReadCache(reader, createReadView(reader));
  let queue: Promise<unknown> = Promise.resolve();

  const transaction = <T>(fn: (tx: Tx) => Promise<T>): Promise<T> => {
    const run = async () => {
      writer.exec('BEGIN IMMEDIATE'); // (a full disk can refuse even this)
      try {
        const result = await fn(txRepos);
        writer.exec('COMMIT');
        cache.committed();
        return result;
      } catch (err) {
        if (writer.inTransaction) writer.exec('ROLLBACK');
        throw err;
      }
    };
    const guarded = () =>
      run().catch((err: unknown) => {
        throw diskFull(err, file);
      });
    const next = queue.then(guarded, guarded);
    queue = next.catch(() => undefined);
    return next;
  };

  const leadership = sqliteLeadership(writer, (fn) => transaction(async () => fn()));
  const store: Store = {
    ...readRepos,
    transaction,
    readView: () => cache.check(),
    leadership,
    // The term is read after BEGIN IMMEDIATE: no other writer until COMMIT.
    fenced: (term) => ({
      ...store,
      transaction: (fn) =>
        transaction(async (tx) => {
          const current = sqliteTerm(writer);
          if (current !== term) throw new FencedError(term, current);
          return fn(tx);
        }),
    }),
    close() {
      cache.close();
      reader.close();
      writer.close();
    },
  };
  return store;
}

/**
 * The repositories on the read-only connection, whose writes fail with Basin's
 * error rather than SQLite's: what a write outside a transaction throws is
 * part of the store's contract (test/contract/store-contract.ts).
 */
function refuseWrites(repos: Repos): Repos {
  const refuse = (err: unknown): never => {
    if ((err as { code?: unknown }).code === 'SQLITE_READONLY') {
      throw new AppError(
        'INTERNAL',
        'A store write outside store.transaction() was refused: writes go through a transaction.',
      );
    }
    throw err;
  };
  const guard = <T extends object>(repo: T): T =>
    new Proxy(repo, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          try {
            const result: unknown = value.apply(target, args);
            return result instanceof Promise ? result.catch(refuse) : result;
          } catch (err) {
            return refuse(err);
          }
        };
      },
    });
  const guarded = new Map<PropertyKey, object>();
  return new Proxy(repos, {
    get(target, prop, receiver) {
      const repo: unknown = Reflect.get(target, prop, receiver);
      if (typeof repo !== 'object' || repo === null) return repo;
      let g = guarded.get(prop);
      if (!g) guarded.set(prop, (g = guard(repo)));
      return g;
    },
  });
}

function migrate(db: Database.Database): void {
  const applied = db.pragma('user_version', { simple: true }) as number;
  if (applied > MIGRATIONS.length) {
    throw new Error(
      `The data directory was written by a newer Basin (schema ${applied}, this one knows ${MIGRATIONS.length}).`,
    );
  }
  for (let i = applied; i < MIGRATIONS.length; i++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[i] as string);
      db.pragma(`user_version = ${i + 1}`);
    })();
  }
}

/**
 * A write the disk had no room for (SQLITE_FULL): nothing was committed,
 * and the request that asked for it gets a 503 that says why (the API's
 * callers retry 503s), rather than a 500. Basin goes on answering reads,
 * and writes again once there is room (docs/decisions.md, Storage
 * allowances: the store belongs on a file system of its own).
 */
function diskFull(err: unknown, file: string): unknown {
  if ((err as { code?: unknown }).code !== 'SQLITE_FULL') return err;
  return new AppError(
    'UNAVAILABLE',
    `Basin's store (${file}) has no room left on its disk: nothing was changed. Free space there, then retry.`,
  );
}
