// The bounded SQL tool's work: one statement on a new connection as
// tsdbadmin@tsdb, sslmode=verify-full against the installation's CA, inside
// a transaction that is READ ONLY unless the caller asked otherwise, with
// statement_timeout set for it, rolled back when read-only; the connection
// is closed after every call, so nothing a statement sets outlives it. The
// extended protocol (queryMode 'extended') takes exactly one statement:
// "COMMIT; DELETE …" cannot step out of the read-only transaction, and a
// read-only call's session is read-only at the server besides
// (tsdb_admin.read_only_connection: docs/security.md, Read-only sessions).

import { readFileSync } from 'node:fs';
import pg from 'pg';
import { capRows, type SqlBounds } from './sql-bounds.js';

/** The vendor's startup setting for a read-only session, which basin_readonly enforces. */
export const READ_ONLY_CONNECTION = 'tsdb_admin.read_only_connection';

export interface SqlTarget {
  host: string;
  port: number;
  password: string;
  /** The CA certificate file; without one the server is not verified (the caller says so). */
  ca: string | undefined;
}

export interface SqlResult {
  command: string;
  row_count: number | null;
  columns: string[];
  rows: Record<string, unknown>[];
  truncated: boolean;
  read_only: boolean;
}

export async function runSql(target: SqlTarget, sql: string, b: SqlBounds): Promise<SqlResult> {
  const client = new pg.Client({
    host: target.host,
    port: target.port,
    user: 'tsdbadmin',
    database: 'tsdb',
    password: target.password,
    ssl:
      target.ca === undefined
        ? { rejectUnauthorized: false }
        : { ca: readFileSync(target.ca, 'utf8'), rejectUnauthorized: true },
    // A backstop for a server that does not answer: the statement's own
    // timeout plus room to connect and send the rows.
    query_timeout: b.timeoutMs + 10_000,
    connectionTimeoutMillis: 10_000,
    // Read-only at the server, for the whole session (basin_readonly, as
    // the vendor CLI asks): not even a statement that ends the transaction
    // or turns read-only off could write.
    ...(b.readOnly ? { options: `-c ${READ_ONLY_CONNECTION}=true` } : {}),
  });
  client.on('error', () => {}); // a dropped connection fails the query; nothing else to do
  await client.connect();
  try {
    await client.query(b.readOnly ? 'BEGIN READ ONLY' : 'BEGIN');
    await client.query(`SET LOCAL statement_timeout = ${b.timeoutMs}`);
    const r = await client.query({ text: sql, queryMode: 'extended' } as pg.QueryConfig);
    await client.query(b.readOnly ? 'ROLLBACK' : 'COMMIT');
    const { rows, truncated } = capRows(r.rows as Record<string, unknown>[], b.maxRows);
    return {
      command: r.command,
      row_count: r.rowCount,
      columns: (r.fields ?? []).map((f) => f.name),
      rows: rows.map(jsonRow),
      truncated,
      read_only: b.readOnly,
    };
  } finally {
    await client.end().catch(() => {});
  }
}

/** Values JSON can carry: bigint and buffers as strings, dates as ISO text. */
function jsonRow(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    out[k] =
      typeof v === 'bigint'
        ? String(v)
        : Buffer.isBuffer(v)
          ? `\\x${v.toString('hex')}`
          : v instanceof Date
            ? v.toISOString()
            : v;
  }
  return out;
}
