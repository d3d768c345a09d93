import pg from 'pg';
import { AppError } from '../../domain/errors.js';
import { describe } from './describe-url.js';
import { type CredentialKey, FencedError, type Repos, type Store, type Tx } from '../store.js';
import { pgLeadership } from './leadership-repo.js';
import {
  CHANGE_TRIGGERS,
  MIRRORED_TABLES,
  PG_MIGRATIONS,
  type MirroredTable,
  USAGE_TABLE,
} from './migrations.js';
import type { Queryable } from './queryable.js';
import { ReadMirror } from './read-mirror.js';
import { createPgRepos } from './repos.js';
import { pgUsageRounds } from './usage-rounds.js';

/** pg_advisory_lock keys (any two bigints Basin alone uses): migrating; writing. */
const MIGRATION_LOCK = 0x62617369_6e000001n;
const WRITE_LOCK = 0x62617369_6e000002n;

/** See the writer pool, openPostgresStore. */
const IDLE_IN_TRANSACTION_MS = 3_000;

/** BIGINT columns (epoch ms, ids) come back as numbers: they stay below 2^53. */
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

export interface PostgresStore extends Store {
  /** close(), awaited: every connection ended. */
  end(): Promise<void>;
  catchUpCredential(key: CredentialKey): Promise<boolean>;
}

/**
 * The store on PostgreSQL (docs/decisions.md, "The store on PostgreSQL"),
 * behind the same interfaces as the SQLite store and with its guarantees:
 *
 * - transactions are serial, as SQLite's single writer makes them: each
 *   takes a transaction-scoped advisory lock (WRITE_LOCK) before its first
 *   statement, in every process that opens this store, and runs at READ
 *   COMMITTED under it, so nothing else commits while it reads and writes;
 * - reads outside a transaction go through connections whose transactions
 *   are read-only (a write there is refused with Basin's INTERNAL error) and
 *   see what is committed, statement by statement, like SQLite's reader;
 * - readView serves from memory (read-mirror.ts), reloaded on commit.
 *
 * Migrations run at open, under a session advisory lock, so two processes
 * starting together apply each migration once.
 */
export async function openPostgresStore(url: string): Promise<PostgresStore> {
  const where = describe(url);
  // A writer paused mid-transaction (SIGSTOP) holds the write lock, and so
  // stops every process's writes and the next leader's taking over: its
  // session is ended after as long as a leadership lease (3 s,
  // engine/leadership.ts), by when it would have lost that lease anyway.
  // Transactions only call the store, so none is idle that long otherwise.
  const writer = new pg.Pool({
    connectionString: url,
    types,
    max: 4,
    options: `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_MS}`,
  });
  const reader = new pg.Pool({
    connectionString: url,
    types,
    max: 8,
    options: '-c default_transaction_read_only=on',
  });
  // An idle connection that breaks (the server restarted) is dropped by the
  // pool, which reports it here; the next query opens another.
  writer.on('error', () => undefined);
  reader.on('error', () => undefined);
  let mirror: ReadMirror | undefined;
  try {
    await unavailableIfUnreachable(where, () => migrate(writer));
    mirror = await unavailableIfUnreachable(where, () =>
      ReadMirror.open(reader, () => new pg.Client({ connectionString: url })),
    );
  } catch (err) {
    await mirror?.close();
    await Promise.all([writer.end(), reader.end()]);
    throw err;
  }
  const view = mirror;

  const readRepos = refuseWrites(createPgRepos({ db: reader, touched: () => undefined }), where);
  let queue: Promise<unknown> = Promise.resolve();

  /** `term`: a fenced transaction's (Store.fenced), checked under the write lock. */
  const run = async <T>(fn: (tx: Tx, db: Queryable) => Promise<T>, term?: number): Promise<T> => {
    const client = await writer.connect();
    const touched = new Set<MirroredTable>();
    let broken = false;
    // The server may end the session while it is checked out (the idle in
    // transaction timeout above, a restart): the query fails, and the event
    // must not go unheard (it would end the process).
    const lost = () => (broken = true);
    client.on('error', lost);
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [WRITE_LOCK]);
      if (term !== undefined) {
        const found = await client.query<{ term: number }>(
          'SELECT term FROM leadership WHERE id = 1',
        );
        const current = found.rows[0]?.term;
        if (current !== term) throw new FencedError(term, current);
      }
      const result = await fn(
        createPgRepos({ db: client, touched: (t) => touched.add(t) }),
        client,
      );
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => (broken = true));
      touched.clear(); // rolled back: nothing to reload
      throw err;
    } finally {
      client.off('error', lost);
      client.release(broken);
      // Our commit is in the read view before the caller goes on. A reload
      // that fails leaves the view stale until a retry (read-mirror.ts).
      await Promise.all([...touched].map((t) => view.refresh(t).catch(() => undefined)));
    }
  };

  const serial = <T>(fn: (tx: Tx, db: Queryable) => Promise<T>, term?: number): Promise<T> => {
    const guarded = () => unavailableIfUnreachable(where, () => run(fn, term));
    const next = queue.then(guarded, guarded);
    queue = next.catch(() => undefined);
    return next;
  };

  const end = async () => {
    await view.close();
    await Promise.all([writer.end(), reader.end()]);
  };
  const leadership = pgLeadership(writer, WRITE_LOCK);
  // The leader's rounds of samples, written in its (fenced) transactions.
  const usage = (term?: number) =>
    pgUsageRounds({
      write: (fn) => serial((_tx, db) => fn(db), term),
      read: reader,
      onPublished: (on) => view.onUsage(on),
    });
  const store: PostgresStore = {
    ...readRepos,
    transaction: (fn) => serial(fn),
    readView: () => view.view,
    leadership: guardAll(leadership, where),
    fenced: (term) => ({ ...store, transaction: (fn) => serial(fn, term), usage: usage(term) }),
    watchQueue: (on) => view.onQueued(on),
    usage: usage(),
    catchUpCredential: async (key) => {
      const inView =
        'bearerHash' in key
          ? view.view.credentials.findByBearerHash(key.bearerHash)
          : view.view.credentials.findByAccessKey(key.accessKey);
      if (inView) return false;
      // One indexed read; only a hit reloads the view (every mirrored table:
      // a user's credential needs its projects too).
      const stored =
        'bearerHash' in key
          ? await readRepos.credentials.findByBearerHash(key.bearerHash)
          : await readRepos.credentials.findByAccessKey(key.accessKey);
      if (!stored || stored.revokedAt !== null) return false;
      await Promise.all(MIRRORED_TABLES.map((t) => view.refresh(t)));
      return true;
    },
    close: () => void end().catch(() => undefined),
    end,
  };
  return store;
}

/** The lease's calls, with an unreachable store a 503 as everywhere else. */
function guardAll<T extends object>(repo: T, where: string): T {
  return Object.fromEntries(
    Object.entries(repo).map(([k, f]) => [
      k,
      (...args: unknown[]) =>
        unavailableIfUnreachable(where, () =>
          (f as (...a: unknown[]) => Promise<unknown>)(...args),
        ),
    ]),
  ) as T;
}

async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query('CREATE TABLE IF NOT EXISTS basin_schema (version INTEGER NOT NULL)');
      const found = await client.query<{ version: number }>('SELECT version FROM basin_schema');
      const applied = found.rows[0]?.version ?? 0;
      if (found.rows.length === 0) await client.query('INSERT INTO basin_schema VALUES (0)');
      if (applied > PG_MIGRATIONS.length) {
        throw new Error(
          `The store was written by a newer Basin (schema ${applied}, this one knows ${PG_MIGRATIONS.length}).`,
        );
      }
      for (let i = applied; i < PG_MIGRATIONS.length; i++) {
        await client.query('BEGIN');
        try {
          await client.query(PG_MIGRATIONS[i] as string);
          await client.query('UPDATE basin_schema SET version = $1', [i + 1]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        }
      }
      await client.query(CHANGE_TRIGGERS);
      await client.query(USAGE_TABLE);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    client.release();
  }
}

/** The repositories on the read-only pool, whose writes fail with Basin's error. */
function refuseWrites(repos: Repos, where: string): Repos {
  const refuse = (err: unknown): never => {
    if (unreachable(err)) throw unavailable(where, err);
    // 25006: read_only_sql_transaction.
    if ((err as { code?: unknown }).code === '25006') {
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
          const result: unknown = value.apply(target, args);
          return result instanceof Promise ? result.catch(refuse) : result;
        };
      },
    });
  return Object.fromEntries(
    Object.entries(repos).map(([k, repo]) => [k, guard(repo as object)]),
  ) as unknown as Repos;
}

/**
 * A store that cannot be reached (refused, reset, shut down, a lost
 * connection) is a 503 that says so, rather than a 500. (A connection lost
 * during COMMIT itself leaves the outcome unknown to any client; the
 * operations Basin retries are idempotent for that reason.)
 */
async function unavailableIfUnreachable<T>(where: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!unreachable(err)) throw err;
    throw unavailable(where, err);
  }
}

function unavailable(where: string, err: unknown): AppError {
  return new AppError(
    'UNAVAILABLE',
    `Basin's store (PostgreSQL at ${where}) cannot be reached: ${(err as Error).message}. Retry once it is back.`,
  );
}

function unreachable(err: unknown): boolean {
  if (err instanceof AppError || !(err instanceof Error)) return false;
  const { code, severity } = err as { code?: unknown; severity?: unknown };
  // FATAL: the server ended (or refused) the session.
  if (severity === 'FATAL' || severity === 'PANIC') return true;
  if (typeof code === 'string') {
    // Node's socket errors; SQLSTATE classes 08 (connection) and 57P (shutdown).
    return /^E[A-Z]+$/.test(code) || code.startsWith('08') || code.startsWith('57P');
  }
  return /Connection terminated|connection timeout|not queryable/i.test(err.message);
}
