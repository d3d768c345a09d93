// Pure builders for a service's or a read replica set's PgBouncer
// (pooler.ts runs it): its pgbouncer.ini, its auth_file and its hba file.
// No I/O here, so the rules are unit-tested (pooler-conf.test.ts) and the
// driver compares text.
//
// PgBouncer 1.24 (Basin's build of trixie's, endpoints/pgbouncer-install.ts),
// or 1.18 (Debian bookworm's) where that build is missing,
// https://www.pgbouncer.org/config.html:
// - A pooler is `count` processes on one port (so_reuseport: the kernel
//   spreads the clients over them), each with a socket directory of its
//   own, which is how its peers forward it the cancel requests meant for
//   its clients (`peer_id`, `[peers]`: 1.19+) and how Basin reads its pools;
//   the pools' server connections are divided among them, so that all of
//   them together take what one took.
// - `tsdb` pools per session and `tsdb_transaction` per transaction; both
//   reach the same `tsdb`. A service's pooler reaches its primary over its
//   Unix socket (no TLS to pay for, and no TCP rule of pg_hba.conf
//   involved: pgHba admits tsdbadmin on the socket to `tsdb` while the
//   pooler is enabled). A read replica set's pooler reaches the set's
//   endpoint (HAProxy, which spreads connections over the set's nodes) over
//   TCP, so with TLS, verified against the installation's CA: PgBouncer
//   speaks TLS to servers over TCP only, and behind HAProxy the node is
//   reached over TCP whatever the pooler's side of the proxy is.
// - Clients must use TLS (client_tls_sslmode=require) with the service's own
//   certificate, so verify-full against the installation's CA works on the
//   pooler's port as on the server's.
// - auth_type=hba: the hba file admits tsdbadmin with SCRAM-SHA-256 from the
//   CIDRs the server admits (public ones, the VPC's), over TLS only.
// - Basin reads the pools' numbers (SHOW POOLS) as `basin_stats`, a
//   PgBouncer-only user in `stats_users` (never `admin_users`: no PAUSE,
//   KILL, SET or SHUTDOWN), admitted to the `pgbouncer` console alone, over
//   TLS, with SCRAM against a verifier of a secret only root reads
//   (metrics/pooler-sample.ts).
// - The auth_file holds tsdbadmin's SCRAM verifier, the very one the server
//   has: no password on disk. A client that logs in with SCRAM hands
//   PgBouncer the ClientKey, which PgBouncer replays to the server (SCRAM
//   pass-through, PgBouncer ≥ 1.14), so the two verifiers must be equal:
//   they are, both come from the spec.

import { isIP } from 'node:net';
import type { ServiceSpec } from '../../driver.js';
import type { Size } from '../../../domain/types.js';
import { admittedCidrs, sizeProfile } from './conf.js';

/** Where the pooler's files are. */
export interface PoolerPaths {
  authFile: string;
  hbaFile: string;
  /** The service's certificate and key (in its data directory, the service's user's). */
  certFile: string;
  keyFile: string;
}

/** How many connections the pooler takes and serves, from the service's size. */
export interface PoolSizes {
  /** Server connections of the session pool (`tsdb`). */
  session: number;
  /** Server connections of the transaction pool (`tsdb_transaction`). */
  transaction: number;
  /** Clients the pooler accepts at once (max_client_conn). */
  maxClients: number;
}

/**
 * The server the pools reach: a service's primary over its Unix socket, or
 * an endpoint over TCP with TLS (`caFile`: the installation's CA, which
 * signed every node's certificate): a read replica set's, or, for an HA
 * service across hosts, the service's own on this host (`verifyFull`: at
 * the host's address, which every node's certificate names).
 */
export type PoolerServer =
  | { socketDir: string; port: number }
  | { host: string; port: number; caFile: string; verifyFull?: boolean };

/** What a pgbouncer.ini is made of, beside its paths. */
export interface PoolerIni {
  /** The pooler's own port (null: none allocated, refused). */
  port: number | null;
  sizes: PoolSizes;
  server: PoolerServer;
}

/** Which of the pooler's processes an ini is for. */
export interface PoolerProcess {
  /** 0 to count - 1. */
  index: number;
  /** The socket directory of each process, by index (their number is the count). */
  socketDirs: readonly string[];
}

/** The most processes a pooler runs, however many cores the host has. */
export const MAX_POOLER_PROCESSES = 4;

/**
 * How many PgBouncer processes serve a pooler: one a core the service may
 * use (the host's for `shared` sizes, else its CPU budget rounded up, at
 * most the host's), at most MAX_POOLER_PROCESSES, and one where the
 * PgBouncer cannot peer. PgBouncer is single-threaded: one process is one
 * core at most, whatever the clients' load (docs/decisions.md has the
 * figures: 2 processes on this 2-core host).
 */
export function poolerProcessCount(
  size: Pick<Size, 'shared' | 'cpuMillis'>,
  hostCores: number,
  peering: boolean,
): number {
  if (!peering) return 1;
  const cores = Math.max(1, Math.floor(hostCores));
  const budget = size.shared ? cores : Math.max(1, Math.ceil(size.cpuMillis / 1000));
  return Math.max(1, Math.min(cores, budget, MAX_POOLER_PROCESSES));
}

/** One process's share of a pool of `size` server connections, among `count` (at least one each). */
export function perProcess(size: number, count: number): number {
  return Math.max(1, Math.floor(size / Math.max(1, count)));
}

/**
 * The pools take half of the server's max_connections, a quarter each, so
 * that direct connections (and Basin's own) keep the other half; clients may
 * be five times max_connections. A session client holds its server
 * connection until it leaves (others queue for one); a transaction client
 * only while a transaction runs, which is how a pooler serves many more
 * clients than the server has connections. docs/decisions.md has the figures.
 */
export function poolSizes(spec: Pick<ServiceSpec, 'size'>): PoolSizes {
  const max = sizeProfile(spec.size).maxConnections;
  const quarter = Math.max(2, Math.floor(max / 4));
  return { session: quarter, transaction: quarter, maxClients: max * 5 };
}

/**
 * A read replica set's pools, from the size of its nodes (each has the
 * max_connections of the set's size, raised to its primary's: a hot standby
 * needs at least as many), times its nodes: the endpoint spreads the server
 * connections over them, so each node gives the pools half its
 * max_connections, as a service's primary does; five times as many clients
 * as the nodes' connections together.
 */
export function replicaSetPoolSizes(spec: {
  size: ServiceSpec['size'];
  primary: Pick<ServiceSpec, 'size'>;
  nodes: number;
}): PoolSizes {
  const max = Math.max(
    sizeProfile(spec.size).maxConnections,
    sizeProfile(spec.primary.size).maxConnections,
  );
  const nodes = Math.max(1, spec.nodes);
  const quarter = Math.max(2, Math.floor(max / 4)) * nodes;
  return { session: quarter, transaction: quarter, maxClients: max * 5 * nodes };
}

/**
 * PgBouncer's listen_addr from PostgreSQL's listen_addresses: the same
 * comma-separated list, `*` for every address.
 */
export function listenAddr(listenAddresses: string): string {
  return listenAddresses
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '')
    .join(',');
}

/** The whole pgbouncer.ini of a pooler. */
export function pgbouncerIni(
  pooler: PoolerIni,
  paths: PoolerPaths,
  listenAddresses: string,
  proc: PoolerProcess = { index: 0, socketDirs: [] },
): string {
  if (pooler.port === null) throw new Error('the pooler has no port');
  const count = Math.max(1, proc.socketDirs.length);
  const socketDir = proc.socketDirs[proc.index] ?? '';
  for (const dir of proc.socketDirs)
    if (!/^\/[A-Za-z0-9_./-]+$/.test(dir)) throw new Error(`unusable socket directory ${dir}`);
  const sizes = {
    session: perProcess(pooler.sizes.session, count),
    transaction: perProcess(pooler.sizes.transaction, count),
    maxClients: pooler.sizes.maxClients,
  };
  const tcp = 'host' in pooler.server ? pooler.server : undefined;
  const host = 'host' in pooler.server ? pooler.server.host : pooler.server.socketDir;
  if (!/^[A-Za-z0-9_.:/-]+$/.test(host)) throw new Error(`unusable server host ${host}`);
  const server = `host=${host} port=${pooler.server.port} dbname=tsdb`;
  const settings: [string, string | number][] = [
    ['listen_addr', listenAddr(listenAddresses)],
    ['listen_port', pooler.port],
    // Its Unix socket, where there is one, is for its peers' cancel requests
    // and Basin's stats user (the hba file admits nobody else on it), in a
    // directory of the service's user (mode 0700, in the pooler's, root's).
    ['unix_socket_dir', socketDir],
    ...(count > 1
      ? ([
          ['so_reuseport', 1],
          ['peer_id', proc.index + 1],
        ] as [string, number][])
      : []),
    ['auth_type', 'hba'],
    ['auth_hba_file', paths.hbaFile],
    ['auth_file', paths.authFile],
    ['client_tls_sslmode', 'require'],
    ['client_tls_cert_file', paths.certFile],
    ['client_tls_key_file', paths.keyFile],
    ['client_tls_protocols', 'tlsv1.2,tlsv1.3'],
    // A socket needs no TLS; over TCP (a replica set's endpoint) the
    // server's certificate must be signed by the installation's CA. Not
    // verify-full there: the endpoint is reached at a listen address, which
    // the certificate (issued for the public host and loopback) may not
    // name. An HA node's pooler across hosts reaches its host's endpoint at
    // the host's address, which every node's certificate names: verify-full.
    ...(tcp
      ? ([
          ['server_tls_sslmode', tcp.verifyFull === true ? 'verify-full' : 'verify-ca'],
          ['server_tls_ca_file', tcp.caFile],
          ['server_tls_protocols', 'tlsv1.2,tlsv1.3'],
        ] as [string, string][])
      : ([['server_tls_sslmode', 'disable']] as [string, string][])),
    ['max_client_conn', sizes.maxClients],
    ['default_pool_size', sizes.session],
    ['reserve_pool_size', 0],
    // tsdbadmin, and Basin's sampler, may read SHOW POOLS, SHOW STATS & co.
    // in the `pgbouncer` database; neither is an admin (no PAUSE, KILL, SET
    // or SHUTDOWN): reading is all the series need.
    ['stats_users', `tsdbadmin, ${STATS_USER}`],
    // Drivers (JDBC, node-postgres…) send these at connect; PgBouncer would
    // refuse the connection over a parameter it does not track. Not
    // `options`: PgBouncer 1.18 cannot pass it on (1.24 passes only some), and dropped it would turn
    // a read-only connection (-c tsdb_admin.read_only_connection=true)
    // into a writable one without a word; refused, the client is told
    // (docs/security.md, Read-only sessions).
    ['ignore_startup_parameters', 'extra_float_digits,statement_timeout'],
    // Logs go to its standard error, which pooler.ts keeps in pooler.log
    // (root's, emptied beyond 1 MB: trimLog). No connections, errors sent to
    // clients or periodic statistics (SHOW STATS has them); PgBouncer still
    // logs each failed login.
    ['logfile', ''],
    ['syslog', 0],
    ['pidfile', ''],
    ['log_connections', 0],
    ['log_disconnections', 0],
    ['log_pooler_errors', 0],
    ['log_stats', 0],
  ];
  // Every process, itself included (PgBouncer ignores its own), by its
  // socket: a cancel request whose key another process issued goes there.
  const peers =
    count > 1
      ? [
          '',
          '[peers]',
          ...proc.socketDirs.map((dir, i) => `${i + 1} = host=${dir} port=${pooler.port}`),
        ]
      : [];
  return [
    '; Written by Basin from the spec; edits are overwritten.',
    '[databases]',
    `tsdb = ${server} pool_mode=session pool_size=${sizes.session}`,
    `tsdb_transaction = ${server} pool_mode=transaction pool_size=${sizes.transaction}`,
    '',
    '[pgbouncer]',
    ...settings.map(([k, v]) => `${k} = ${v}`),
    ...peers,
    '',
  ].join('\n');
}

/** The settings PgBouncer reads only when it starts: a change means a restart, not a reload. */
export function restartPart(ini: string): string {
  return ini
    .split('\n')
    .filter((l) =>
      /^(listen_addr|listen_port|unix_socket_dir|so_reuseport|peer_id|\d+|(client|server)_tls_[a-z_]+) =/.test(
        l,
      ),
    )
    .join('\n');
}

/**
 * The PgBouncer-only user Basin reads the pools' numbers as (a stats user,
 * not a PostgreSQL role: the hba file admits it to the `pgbouncer` console
 * only).
 */
export const STATS_USER = 'basin_stats';

const VERIFIER = /^SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/;

/**
 * The auth_file: tsdbadmin and its SCRAM verifier, and Basin's stats user
 * with the verifier of its secret (`statsVerifier`), nobody else.
 */
export function authFile(passwordVerifier: string, statsVerifier?: string): string {
  for (const v of [passwordVerifier, statsVerifier ?? passwordVerifier])
    if (!VERIFIER.test(v)) throw new Error('not a SCRAM-SHA-256 verifier');
  const stats = statsVerifier === undefined ? '' : `"${STATS_USER}" "${statsVerifier}"\n`;
  return `"tsdbadmin" "${passwordVerifier}"\n${stats}`;
}

/**
 * The stats user's lines: the `pgbouncer` console only, over TLS, with SCRAM,
 * from anywhere (Basin reaches the pooler from loopback or from the host's
 * side of the service's namespace; the secret is what admits it). They come
 * first, before the blocked addresses' reject lines, so that a tenant's
 * failed logins from Basin's own address never blind Basin's sampler.
 */
function statsLines(): string[] {
  return [
    `local pgbouncer ${STATS_USER} scram-sha-256`,
    ...['0.0.0.0/0', '::/0'].map((c) => `hostssl pgbouncer ${STATS_USER} ${c} scram-sha-256`),
  ];
}

/**
 * The pooler's access rules (PgBouncer reads them as pg_hba.conf, first
 * match wins): Basin's stats user to the console when `stats` (statsLines);
 * then the client addresses blocked for their failed logins
 * (pooler-guard.ts), refused; then tsdbadmin with SCRAM over TLS from the
 * same CIDRs the server admits. What no line matches is refused.
 */
export function poolerHba(
  spec: Pick<ServiceSpec, 'allowedCidrs'>,
  publicCidrs: readonly string[],
  blocked: readonly string[] = [],
  stats = false,
): string {
  const cidrs = admittedCidrs(spec, publicCidrs);
  return [
    '# Written by Basin from the service spec; edits are overwritten.',
    ...(stats ? statsLines() : []),
    ...blockLines(blocked),
    ...cidrs.map((c) => `hostssl all tsdbadmin ${c} scram-sha-256`),
    '',
  ].join('\n');
}

/** The reject line's block for one address (endpoints/pooler-guard.ts decides which are blocked). */
function hostBlock(addr: string): string {
  return isIP(addr) === 6 ? `${addr}/128` : `${addr}/32`;
}

/** The hba lines that refuse `blocked` addresses, sorted (the text, and so its hash, is stable). */
function blockLines(blocked: readonly string[]): string[] {
  return [...new Set(blocked)].sort().map((a) => `host all all ${hostBlock(a)} reject`);
}

/**
 * An hba file as a converge wrote it, with its blocked addresses replaced
 * by `blocked`: what the guard writes between converges, leaving every
 * other line as it was (so it never needs the spec, and never undoes a
 * converge's access rules).
 */
export function withBlocks(hba: string, blocked: readonly string[]): string {
  const lines = hba.split('\n').filter((l) => !/^host all all \S+ reject$/.test(l));
  const head: string[] = [];
  // The comment, and the stats user's lines, which stay before the blocks.
  while (
    lines[0]?.startsWith('#') ||
    lines[0]?.startsWith(`hostssl pgbouncer ${STATS_USER} `) ||
    lines[0]?.startsWith(`local pgbouncer ${STATS_USER} `)
  )
    head.push(lines.shift() as string);
  return [...head, ...blockLines(blocked), ...lines].join('\n');
}
