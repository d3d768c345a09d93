// Basin's administrative connection to a node: the `postgres` superuser over
// the node's Unix socket, authenticated by peer (the connecting OS user,
// mapped through pg_ident). It never uses tsdbadmin and never crosses TCP, so
// no password exists that could leak, and a user who changes tsdbadmin's
// password cannot lock Basin out.
//
// The socket directory belongs to the service's OS user, which the service's
// tsdbadmin can act as (docs/security.md): it can put a link to another
// service's socket where its own was, and root follows links. Root is that
// other server's superuser too, so every connection first checks that the
// server it reached runs the expected data directory, before anything else
// is sent: a real server reports its own, and a fake one run by the service's
// user can only ever be told that service's own things.
//
// For the same reason nothing on the other end is trusted to answer: a fake
// server can accept the connection, or even the login, and then say nothing
// (issue 7, hole 2). Every call is therefore bounded twice. The server is
// asked to give up (statement_timeout and lock_timeout, sent as startup
// parameters so they hold from the first query), and the client gives up
// on its own (connect, each query, the whole call): on expiry the socket is
// destroyed and the call fails with a retryable DriverError naming what
// timed out, so the engine retries later instead of losing a slot for good.
// The bounds are in docs/decisions.md.

import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { DriverError } from '../../driver.js';

/** How long an administrative call may take, in milliseconds. */
export interface AdminBounds {
  /** Connecting, authenticating and the server's first ReadyForQuery. */
  connectMs: number;
  /** The server cancels a statement running longer (statement_timeout). */
  statementMs: number;
  /** The server gives up waiting for a lock (lock_timeout). */
  lockMs: number;
  /** The client gives up on a query with no answer: statement_timeout plus slack for a real server to report it. */
  queryMs: number;
  /** The whole call: connect, check, the caller's queries, and closing. */
  callMs: number;
}

export const ADMIN_BOUNDS: Readonly<AdminBounds> = Object.freeze({
  connectMs: 5_000,
  statementMs: 10_000,
  lockMs: 3_000,
  queryMs: 15_000,
  callMs: 30_000,
});

/** How long a closing connection may take to say goodbye before its socket is destroyed. */
const CLOSE_MS = 1_000;

export interface AdminTarget {
  socketDir: string;
  port: number;
  /** The data directory the server must be running (checked at every connection). */
  pgdata: string;
  /** ADMIN_BOUNDS when absent. */
  bounds?: AdminBounds | undefined;
}

/** What a caller of withAdmin may do with the connection: bounded queries. */
export interface AdminSession {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string): Promise<pg.QueryResult<R>>;
  escapeLiteral(text: string): string;
  escapeIdentifier(text: string): string;
}

/**
 * Runs `fn` on a fresh administrative connection to `database`, after
 * checking that the server runs `target.pgdata`; the connection is closed
 * afterwards, whatever happens. Throws a retryable DriverError when any
 * bound of `target.bounds` expires.
 */
export async function withAdmin<T>(
  target: AdminTarget,
  database: string,
  fn: (session: AdminSession) => Promise<T>,
  options: {
    /**
     * A replication connection (`replication=database`): replication
     * commands such as IDENTIFY_SYSTEM besides SQL (timeline.ts).
     */
    replication?: boolean;
  } = {},
): Promise<T> {
  const bounds = target.bounds ?? ADMIN_BOUNDS;
  const client = new pg.Client({
    host: target.socketDir,
    port: target.port,
    user: 'postgres',
    database,
    application_name: 'basin',
    statement_timeout: bounds.statementMs,
    lock_timeout: bounds.lockMs,
    // Basin's own commits (roles, slots, extensions…) never wait for a
    // synchronous standby: one being rewound or rebuilt would hold every
    // step of the converge that brings it back. Each is applied again
    // whenever it is not found (node-state.ts), so none needs a standby's
    // copy to survive a failover. Nor are they read-only when the service's
    // sessions are (over its storage allowance: conf.ts, storageSettings).
    options: '-c synchronous_commit=local -c default_transaction_read_only=off',
    ...(options.replication ? { replication: 'database' } : {}),
  });
  // A server going away mid-call surfaces as an error event; without a
  // listener it would crash the process instead of failing this call.
  client.on('error', () => {});
  const where = `the server on ${target.socketDir} (port ${target.port})`;
  const kill = () => destroy(client);
  const session: AdminSession = {
    query: (sql) =>
      within(client.query(sql), bounds.queryMs, `${where} to answer ${label(sql)}`, kill),
    escapeLiteral: (text) => client.escapeLiteral(text),
    escapeIdentifier: (text) => client.escapeIdentifier(text),
  };
  const call = async () => {
    await within(client.connect(), bounds.connectMs, `${where} to accept a login`, kill);
    const { rows } = await session.query<{ d: string }>(
      "SELECT current_setting('data_directory') AS d",
    );
    if (rows[0]?.d !== target.pgdata) {
      throw new Error(
        `the server on ${target.socketDir} runs ${JSON.stringify(rows[0]?.d)}, not ${target.pgdata}`,
      );
    }
    return await fn(session);
  };
  try {
    return await within(call(), bounds.callMs, `${where} to finish an administrative call`, kill);
  } finally {
    await close(client);
  }
}

/**
 * A bound of an administrative call expired: the server did not answer in
 * time (as opposed to answering with an error, or refusing the connection).
 * The failover watch counts these (primary-health.ts).
 */
export class AdminTimeoutError extends DriverError {
  constructor(message: string) {
    super(message, true);
    this.name = 'AdminTimeoutError';
  }
}

/**
 * `promise`, or a retryable AdminTimeoutError once `ms` have passed without
 * it settling; `kill` is called first, so that whatever waits on the
 * connection fails too instead of lingering.
 */
function within<T>(promise: Promise<T>, ms: number, waitingFor: string, kill: () => void) {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      kill();
      reject(new AdminTimeoutError(`timed out after ${seconds(ms)} waiting for ${waitingFor}`));
    }, ms);
  });
  // race subscribes to `promise`: its rejection after a kill is handled, not lost.
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** Ends the session politely, or destroys its socket when the other end does not answer. */
async function close(client: pg.Client): Promise<void> {
  const ended = client.end().catch(() => {});
  const late = sleep(CLOSE_MS, 'late', { ref: false });
  if ((await Promise.race([ended, late])) === 'late') destroy(client);
}

function destroy(client: pg.Client): void {
  // pg keeps its socket on the (untyped) connection; destroying it fails every pending call at once.
  (
    client as unknown as { connection: { stream: { destroy(): void } } }
  ).connection.stream.destroy();
}

/**
 * The leading keywords of a statement ("ALTER ROLE", "CREATE EXTENSION IF
 * NOT EXISTS"): enough to tell which step timed out, never a literal (a
 * password verifier must not reach an error message).
 */
function label(sql: string): string {
  const words = /^[A-Za-z_ ]*/.exec(sql)?.[0]?.trim().split(/\s+/).slice(0, 3) ?? [];
  return words.length > 0 && words[0] !== '' ? words.join(' ') : 'a query';
}

const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

/**
 * Sets tsdbadmin's password from its SCRAM verifier: PostgreSQL stores a
 * string that already is a verifier as it is
 * (https://www.postgresql.org/docs/15/sql-createrole.html, PASSWORD), so the
 * password itself never reaches the server. Logging of the statement is
 * turned off for this session: a verifier is not the password, but it is
 * what an attacker would brute-force offline.
 */
export async function setTsdbadminPassword(target: AdminTarget, verifier: string): Promise<void> {
  await withAdmin(target, 'postgres', async (c) => {
    await c.query(`SET log_statement = 'none'`);
    await c.query(`SET log_min_error_statement = 'panic'`);
    await c.query(`ALTER ROLE tsdbadmin PASSWORD ${c.escapeLiteral(verifier)}`);
  });
}

/**
 * The predefined roles tsdbadmin is made a member of, and their version
 * (NodeState.adminGrants: a node that applied an older set gets the new one
 * at its next converge). pg_monitor, as the admin role of other managed
 * clouds has it: pg_stat_replication's sync_state and lag of its own
 * standbys, pg_stat_activity of every session, the settings. All of it is
 * about this cluster, the service's own (docs/security.md, What the admin
 * role sees); it holds none of pg_read_server_files, pg_write_server_files
 * or pg_execute_server_program.
 */
export const ADMIN_GRANTS = { version: 1, roles: ['pg_monitor'] } as const;

/** Grants tsdbadmin ADMIN_GRANTS' roles (granting one it holds is a no-op). */
export async function grantAdminRoles(target: AdminTarget): Promise<void> {
  await withAdmin(target, 'postgres', async (c) => {
    for (const role of ADMIN_GRANTS.roles) {
      await c.query(`GRANT ${c.escapeIdentifier(role)} TO tsdbadmin`);
    }
  });
}

/** Creates extensions in `tsdb` (as the superuser: they need it); existing ones are kept. */
export async function createExtensions(target: AdminTarget, names: string[]): Promise<void> {
  if (names.length === 0) return;
  await withAdmin(target, 'tsdb', async (c) => {
    for (const name of names) {
      await c.query(`CREATE EXTENSION IF NOT EXISTS ${c.escapeIdentifier(name)}`);
    }
  });
}

/**
 * Makes the server re-read its configuration files (pg_hba.conf, settings
 * that need no restart, the TLS certificate) and waits until it did. The
 * postmaster reloads asynchronously on SIGHUP; a new session inherits the
 * postmaster's configuration load time, so once a fresh connection reports a
 * newer pg_conf_load_time(), every later connection sees the new rules.
 * Each connection is bounded as withAdmin's are; the waiting by `timeoutMs`.
 */
export async function reloadConfig(target: AdminTarget, timeoutMs = 10_000): Promise<void> {
  const loadTime = () =>
    withAdmin(target, 'postgres', async (c) => {
      const { rows } = await c.query<{ t: string }>('SELECT pg_conf_load_time()::text AS t');
      return rows[0]?.t;
    });
  const before = await loadTime();
  await withAdmin(target, 'postgres', (c) => c.query('SELECT pg_reload_conf()'));
  const deadline = Date.now() + timeoutMs;
  while ((await loadTime()) === before) {
    if (Date.now() > deadline) {
      throw new DriverError('the server did not reload its configuration', true);
    }
    await sleep(10);
  }
}
