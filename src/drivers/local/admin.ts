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

import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

export interface AdminTarget {
  socketDir: string;
  port: number;
  /** The data directory the server must be running (checked at every connection). */
  pgdata: string;
}

export async function withAdmin<T>(
  target: AdminTarget,
  database: string,
  fn: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({
    host: target.socketDir,
    port: target.port,
    user: 'postgres',
    database,
    application_name: 'basin',
    connectionTimeoutMillis: 10_000,
  });
  // A server going away mid-call surfaces as an error event; without a
  // listener it would crash the process instead of failing this call.
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ d: string }>(
      "SELECT current_setting('data_directory') AS d",
    );
    if (rows[0]?.d !== target.pgdata) {
      throw new Error(
        `the server on ${target.socketDir} runs ${JSON.stringify(rows[0]?.d)}, not ${target.pgdata}`,
      );
    }
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

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
    if (Date.now() > deadline) throw new Error('the server did not reload its configuration');
    await sleep(10);
  }
}
