// Database clients for the end-to-end tests: the real `psql` binary (what the
// README tells users to run) and node-postgres (for what psql cannot show,
// such as a client's refused TLS settings).

import { execFile, execFileSync } from 'node:child_process';
import type { TestContext } from 'node:test';
import { accepts } from '../../src/lib/port-probe.js';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

/** A libpq connection string for tsdbadmin@tsdb on `port`; `extra` adds or replaces keywords. */
export function conninfo(port: number, extra: Record<string, string> = {}): string {
  const words = {
    host: '127.0.0.1',
    port: String(port),
    user: 'tsdbadmin',
    dbname: 'tsdb',
    sslmode: 'require',
    connect_timeout: '10',
    ...extra,
  };
  return Object.entries(words)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

function psqlEnv(password: string): NodeJS.ProcessEnv {
  // Only what the connection string says: a developer's PG* settings must not count.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')));
  return { ...env, PGPASSWORD: password };
}

/**
 * Runs `sql` with psql (no psqlrc, unaligned, tuples only, stop at the first
 * error) and returns its output, trimmed. A failure throws psql's own message.
 */
export async function psql(conn: string, password: string, sql: string): Promise<string> {
  try {
    const { stdout } = await run('psql', [conn, '-XAtq', '-v', 'ON_ERROR_STOP=1', '-c', sql], {
      env: psqlEnv(password),
    });
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string };
    throw new Error(`psql "${conn}" failed: ${e.stderr?.trim() || (err as Error).message}`);
  }
}

/** psql's message when it cannot connect; throws if it can. */
export async function psqlRefused(conn: string, password: string): Promise<string> {
  try {
    await run('psql', [conn, '-XAtqc', 'SELECT 1'], { env: psqlEnv(password) });
  } catch (err) {
    return (err as { stderr?: string }).stderr ?? String(err);
  }
  throw new Error(`psql "${conn}" connected, but should have been refused`);
}

/**
 * A node-postgres client of tsdbadmin on `port`, connected; the caller ends
 * it. `to.host`: the address connected to (and so the client's own, on this
 * host), 127.0.0.1 by default; `to.database`: tsdb by default.
 */
export async function pgClient(
  port: number,
  password: string,
  ssl: pg.ClientConfig['ssl'] = { rejectUnauthorized: false },
  to: { host?: string; database?: string } = {},
): Promise<pg.Client> {
  const client = new pg.Client({
    host: to.host ?? '127.0.0.1',
    port,
    user: 'tsdbadmin',
    database: to.database ?? 'tsdb',
    password,
    ssl,
    connectionTimeoutMillis: 10_000,
  });
  client.on('error', () => {}); // a server going away mid-test is reported by the query
  await client.connect();
  return client;
}

/** One query over a fresh TLS connection (`to`: as pgClient's). */
export async function pgQuery(
  port: number,
  password: string,
  sql: string,
  to: { host?: string; database?: string } = {},
): Promise<any[]> {
  const client = await pgClient(port, password, undefined, to);
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

/** The error a connection attempt ends with; throws if it succeeds. */
export async function pgRefused(
  port: number,
  password: string,
  ssl?: pg.ClientConfig['ssl'],
): Promise<string> {
  try {
    const client = await pgClient(port, password, ssl);
    await client.end();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`a connection to port ${port} was accepted, but should have been refused`);
}

/** Whether anything accepts TCP connections on 127.0.0.1:`port`. */
export function portOpen(port: number): Promise<boolean> {
  return accepts({ host: '127.0.0.1', port });
}

/** One query as tsdbadmin from the address `source` to `port`, in `database`. */
export function queryFrom(
  source: string,
  port: number,
  password: string,
  sql: string,
  database = 'tsdb',
): Promise<Record<string, unknown>[]> {
  return pgQuery(port, password, sql, { host: source, database });
}

/**
 * Puts `addresses` on this host's loopback interface until the test ends, so
 * clients can connect from inside or outside a VPC's block. `replace` rather
 * than `add`: a run killed before its clean-up leaves its address behind, and
 * the next run (or CI on a copy of the machine) must not fail on it.
 */
export function loopbackAddresses(t: TestContext, ...addresses: string[]): void {
  for (const a of addresses) {
    execFileSync('ip', ['addr', 'replace', `${a}/32`, 'dev', 'lo']);
    t.after(() => execFileSync('ip', ['addr', 'del', `${a}/32`, 'dev', 'lo']));
  }
}
