// One reading of a service's pooler for the metric series: its client and
// server connections, from PgBouncer's console (`SHOW POOLS` on the special
// `pgbouncer` database) of each of its processes, summed, called by the
// driver's sampleSeries on Basin's collector timer, never on a request.
// Basin logs in as the pooler's stats user (config/pooler-conf.ts: a stats
// user, not an admin) with the secret only root reads
// (endpoints/pooler-stats.ts), on each process's own Unix socket: the
// pooler's port is shared by its processes (so_reuseport), so a connection
// there reaches one of them, which the kernel picks.
//
// The PgBouncer there runs as the service's OS user, so its tenant can put
// a fake in its place: whatever it answers lands only in that service's
// series, and every step is bounded (a fake that accepts and says nothing
// costs one round of this service a few seconds, no more). A pooler that
// is down or refuses is left out of the round: its buckets are empty.

import pg from 'pg';
import { STATS_USER } from '../config/pooler-conf.js';

/** Connect and log in; then the query; then the whole call (ms). */
const CONNECT_MS = 3_000;
const QUERY_MS = 3_000;
const CALL_MS = 5_000;

export interface PoolerCounts {
  /** Clients logged in to the pools, served or waiting for a server. */
  clients: number;
  /** Server connections the pools hold, in use or idle. */
  servers: number;
}

export interface PoolerSampleTarget {
  /** A process's socket directory. */
  socketDir: string;
  port: number;
  secret: string;
}

/** A row of SHOW POOLS (PgBouncer 1.18), the columns counted here. */
type PoolRow = Record<string, string | null> & { database: string };

const CLIENT_COLUMNS = ['cl_active', 'cl_waiting'];
const SERVER_COLUMNS = [
  'sv_active',
  'sv_active_cancel',
  'sv_being_canceled',
  'sv_idle',
  'sv_used',
  'sv_tested',
  'sv_login',
];

/**
 * The pools' clients and servers summed over the service's databases (`tsdb`
 * and `tsdb_transaction`; the console's own pool, where this very
 * connection is a client, is left out), or undefined when the pooler could
 * not be read. A pool appears once a client first asked for its database:
 * none yet is zero of each.
 */
export async function samplePooler(t: PoolerSampleTarget): Promise<PoolerCounts | undefined> {
  const client = new pg.Client({
    host: t.socketDir,
    port: t.port,
    user: STATS_USER,
    password: t.secret,
    database: 'pgbouncer',
    connectionTimeoutMillis: CONNECT_MS,
    query_timeout: QUERY_MS,
  });
  client.on('error', () => {});
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => {
      destroy(client);
      resolve(undefined);
    }, CALL_MS);
  });
  const read = async (): Promise<PoolerCounts | undefined> => {
    await client.connect();
    // The console speaks the simple protocol only: no parameters.
    const { rows } = await client.query<PoolRow>('SHOW POOLS');
    return countPools(rows);
  };
  try {
    return await Promise.race([read(), expired]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
    // A polite goodbye, and the socket destroyed if it is not said in time.
    const late = setTimeout(() => destroy(client), 1_000).unref();
    void client
      .end()
      .catch(() => {})
      .finally(() => clearTimeout(late));
  }
}

/**
 * The counts of every process of a pooler, read at once and summed; undefined
 * when one could not be read (a partial sum would show a pooler emptier
 * than it is).
 */
export async function samplePoolers(
  targets: readonly PoolerSampleTarget[],
): Promise<PoolerCounts | undefined> {
  if (targets.length === 0) return undefined;
  const each = await Promise.all(targets.map(samplePooler));
  if (each.some((c) => c === undefined)) return undefined;
  return (each as PoolerCounts[]).reduce(
    (sum, c) => ({ clients: sum.clients + c.clients, servers: sum.servers + c.servers }),
    { clients: 0, servers: 0 },
  );
}

/** SHOW POOLS' rows summed; exported for its unit test. */
export function countPools(rows: readonly PoolRow[]): PoolerCounts {
  let clients = 0;
  let servers = 0;
  for (const r of rows) {
    if (r.database === 'pgbouncer') continue;
    for (const c of CLIENT_COLUMNS) clients += count(r[c]);
    for (const c of SERVER_COLUMNS) servers += count(r[c]);
  }
  return { clients, servers };
}

function count(v: string | null | undefined): number {
  const n = Number(v ?? 0);
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

function destroy(client: pg.Client): void {
  // pg keeps its socket on the (untyped) connection.
  (
    client as unknown as { connection?: { stream?: { destroy(): void } } }
  ).connection?.stream?.destroy();
}
