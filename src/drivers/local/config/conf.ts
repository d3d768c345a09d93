// Pure builders for a node's configuration: postgresql settings derived from
// the service's size and type, pg_hba.conf and pg_ident.conf. No I/O here, so
// every rule can be unit-tested (conf.test.ts) and the driver can compare what
// it wants with what it wrote by comparing text.
//
// The settings go to `basin.conf`, which the template's postgresql.conf
// includes last: initdb's own choices (locale, text search config…) stay in
// postgresql.conf, and everything Basin decides is in one generated file.

import { isIP } from 'node:net';
import type { ServiceSpec } from '../../driver.js';
import type { Recovery } from '../node/node-state.js';
import { archiveCommand, forkRestoreCommand, restoreCommand } from './pgbackrest.js';
import type { ServiceType, Size } from '../../../domain/types.js';

export type Settings = Record<string, string>;

/** Where a node's files live, as far as its configuration names them. */
export interface NodePaths {
  socketDir: string;
  /** The service's pgBackRest configuration (its stanza is the service's id)… */
  backupConf: string;
  /** …and pgBackRest's command. */
  pgbackrest: string;
  /** A recovering fork's source: the part of its parent's repository it restores, configured… */
  forkSourceConf: string;
  /** …and the parent's control file and both identifiers (fork-check.ts). */
  forkSourcePg: string;
}

/**
 * Which node the settings are for, and its part in replication
 * (replication.ts): a primary names its synchronous standbys, a standby
 * where it streams from.
 */
export interface NodeSettings {
  index: number;
  port: number;
  /** A primary with synchronous standbys: synchronous_standby_names. */
  synchronousStandbys?: string;
  /** A standby: its primary_conninfo and slot. */
  standby?: { conninfo: string; slot: string };
}

export interface ConfOptions {
  /** PostgreSQL's listen_addresses: '*' (all interfaces) unless configured. */
  listenAddresses: string;
  /** Who may reach the public endpoint (default everyone: 0.0.0.0/0 and ::/0). */
  publicCidrs: readonly string[];
  /** The host's memory; sizes larger than the host are sized as the host (see sizeProfile). */
  hostMemoryMb?: number;
  /** The service's storage allowance, in bytes, and whether its sessions start read-only (storageSettings). */
  storage?: { allowance: number; readOnly: boolean };
}

/** The part of a service's configuration that depends on its size. */
export interface SizeProfile {
  sharedBuffersMb: number;
  effectiveCacheSizeMb: number;
  maintenanceWorkMemMb: number;
  workMemKb: number;
  maxConnections: number;
  maxParallelWorkers: number;
  maxParallelWorkersPerGather: number;
  maxParallelMaintenanceWorkers: number;
  /** timescaledb.max_background_workers: its launcher's schedulers and jobs. */
  timescaleBackgroundWorkers: number;
}

/**
 * The classic PostgreSQL sizing rules (as in the PostgreSQL wiki's "Tuning
 * Your PostgreSQL Server" and timescaledb-tune), for a dedicated `memoryGbs`
 * and `cpuMillis`:
 * - shared_buffers 25% of memory; effective_cache_size 75% (the planner's
 *   guess of shared buffers + OS page cache);
 * - maintenance_work_mem memory/16, at most 2 GB (VACUUM, CREATE INDEX);
 * - max_connections 25 per GB, between 100 and 500: each connection is a
 *   process, and a pooler is the answer beyond that;
 * - work_mem: what is left after shared_buffers, shared by every connection
 *   running ~3 sort/hash nodes at once, at least 4 MB (PostgreSQL's default);
 * - one parallel worker per (rounded up) CPU, half of them for one query or
 *   index build, at most 4.
 * `shared` sizes get a small fixed profile: PostgreSQL's defaults for memory,
 * fewer connections, no parallel query.
 *
 * A size with more memory than the host is sized as if it had the host's:
 * PostgreSQL maps shared_buffers at start, and a mapping larger than the
 * machine's memory fails, so the service could never start.
 */
export function sizeProfile(size: Size, hostMemoryMb = Infinity): SizeProfile {
  if (size.shared) {
    // Small on purpose: an idle shared service should cost the host tens of
    // MB. wal_buffers defaults to 1/32 of shared_buffers and is zeroed at
    // start, so shared_buffers drives the idle footprint (bench: local-idle-memory).
    return {
      sharedBuffersMb: 32,
      effectiveCacheSizeMb: 256,
      maintenanceWorkMemMb: 32,
      workMemKb: 4096,
      maxConnections: 50,
      maxParallelWorkers: 1,
      maxParallelWorkersPerGather: 0,
      maxParallelMaintenanceWorkers: 0,
      timescaleBackgroundWorkers: 4,
    };
  }
  const memMb = Math.max(256, Math.min(Math.round(size.memoryGbs * 1024), hostMemoryMb));
  const cpus = Math.max(1, Math.ceil(size.cpuMillis / 1000));
  const sharedBuffersMb = Math.floor(memMb / 4);
  const maxConnections = clamp(Math.round(size.memoryGbs * 25), 100, 500);
  const half = Math.min(4, Math.floor(cpus / 2));
  return {
    sharedBuffersMb,
    effectiveCacheSizeMb: Math.floor((memMb * 3) / 4),
    maintenanceWorkMemMb: Math.min(2048, Math.floor(memMb / 16)),
    workMemKb: Math.max(
      4096,
      Math.floor(((memMb - sharedBuffersMb) * 1024) / (maxConnections * 3)),
    ),
    maxConnections,
    maxParallelWorkers: cpus,
    maxParallelWorkersPerGather: half,
    maxParallelMaintenanceWorkers: half,
    // 1 launcher slot + 1 scheduler per database using it + concurrent jobs.
    timescaleBackgroundWorkers: clamp(cpus * 2, 4, 16),
  };
}

const clamp = (n: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, n));

/**
 * The processes a node's settings allow: max_connections, and
 * max_worker_processes, the one pool of background workers (parallel
 * workers, timescaledb's launcher and its workers, the logical replication
 * launcher, one spare). Its pids bound follows from them (node-bounds.ts).
 */
export function processCounts(spec: Pick<ServiceSpec, 'size' | 'type'>): {
  maxConnections: number;
  maxWorkerProcesses: number;
} {
  const p = sizeProfile(spec.size);
  const tsdb = hasTimescale(spec.type);
  return {
    maxConnections: p.maxConnections,
    maxWorkerProcesses: Math.max(
      8,
      p.maxParallelWorkers + (tsdb ? p.timescaleBackgroundWorkers + 1 : 0) + 2,
    ),
  };
}

export const hasTimescale = (type: ServiceType) => type === 'TIMESERIESDB';

/** Basin's own library (extensions/basin_readonly), built and installed by scripts/setup-host.sh. */
export const READ_ONLY_LIBRARY = 'basin_readonly';

/** How long the server waits before it answers a failed login (auth_delay.milliseconds). */
export const AUTH_DELAY_MS = 1000;

/** The extensions a service gets in its `tsdb` database. */
export function wantedExtensions(spec: Pick<ServiceSpec, 'type' | 'vector'>): string[] {
  const out: string[] = [];
  if (hasTimescale(spec.type)) out.push('timescaledb');
  if (spec.type === 'VECTOR' || spec.vector) out.push('vector');
  return out;
}

/**
 * Settings that only take effect when the postmaster starts ("context:
 * postmaster" in pg_settings). Changing any of them means a restart; the
 * rest are applied with a reload (SIGHUP).
 */
export const RESTART_SETTINGS: ReadonlySet<string> = new Set([
  'listen_addresses',
  'port',
  'unix_socket_directories',
  'cluster_name',
  'max_connections',
  'shared_buffers',
  'max_worker_processes',
  'shared_preload_libraries',
  'timescaledb.max_background_workers',
  'wal_level',
  'archive_mode',
  'logging_collector',
  'hot_standby',
]);

/**
 * Every setting Basin decides for a service node; `recovery` while it is a
 * fork recovering from its parent's data (recoverySettings).
 */
export function postgresqlSettings(
  spec: ServiceSpec,
  paths: NodePaths,
  options: ConfOptions,
  recovery?: Recovery,
  node: NodeSettings = { index: 0, port: spec.port },
): Settings {
  const p = sizeProfile(spec.size, options.hostMemoryMb);
  const tsdb = hasTimescale(spec.type);
  const s: Settings = {
    // Connections. The Unix socket lives in a directory only root and the
    // service's OS user can enter: it is Basin's administrative door.
    listen_addresses: options.listenAddresses,
    port: String(node.port),
    unix_socket_directories: paths.socketDir,
    // Names the cluster in process titles ("postgres: <id>: checkpointer");
    // node 0 keeps the service's id, as before services had several nodes.
    cluster_name: node.index === 0 ? spec.serviceId : `${spec.serviceId}-node${node.index}`,
    max_connections: String(p.maxConnections),
    password_encryption: 'scram-sha-256',
    // TLS; pg_hba.conf makes it mandatory for TCP. The files are relative to
    // the data directory. https://www.postgresql.org/docs/15/ssl-tcp.html
    ssl: 'on',
    ssl_cert_file: 'server.crt',
    ssl_key_file: 'server.key',
    ssl_min_protocol_version: 'TLSv1.2',
    // Memory and parallelism, from the size.
    shared_buffers: `${p.sharedBuffersMb}MB`,
    effective_cache_size: `${p.effectiveCacheSizeMb}MB`,
    maintenance_work_mem: `${p.maintenanceWorkMemMb}MB`,
    work_mem: `${p.workMemKb}kB`,
    max_parallel_workers: String(p.maxParallelWorkers),
    max_parallel_workers_per_gather: String(p.maxParallelWorkersPerGather),
    max_parallel_maintenance_workers: String(p.maxParallelMaintenanceWorkers),
    // Background workers come from one pool (processCounts).
    max_worker_processes: String(processCounts(spec).maxWorkerProcesses),
    // Storage is assumed to be SSD: random reads cost little more than sequential ones.
    random_page_cost: '1.1',
    // auth_delay (contrib): a failed login is answered only after a second,
    // so one connection guesses a password at most once a second (and all
    // of max_connections, which a guesser would have to fill, at most that
    // many a second). A person who mistypes loses a second. It hooks the
    // authentication of the postmaster's children: preloaded, and a change
    // of these libraries needs a restart (docs/decisions.md, Credentials).
    // basin_readonly (extensions/basin_readonly) makes the vendor's
    // read-only settings hold: tsdb_admin.read_only_connection at connect,
    // tsdb_admin.read_only_role on a role (docs/security.md, Read-only
    // sessions). Preloaded too: it hooks every session.
    shared_preload_libraries: [
      ...(tsdb ? ['timescaledb'] : []),
      'auth_delay',
      READ_ONLY_LIBRARY,
    ].join(','),
    'auth_delay.milliseconds': String(AUTH_DELAY_MS),
    // WAL archiving into the service's own pgBackRest repository, for PITR
    // and forks: archive-push queues each segment and a background
    // pgBackRest compresses and stores it, checksummed (pgbackrest.ts).
    // https://pgbackrest.org/user-guide.html#async-archiving
    wal_level: 'replica',
    archive_mode: 'on',
    archive_command: archiveCommand(paths.pgbackrest, paths.backupConf, spec.serviceId),
    // A segment is archived at the latest 5 minutes after a write, so a
    // point-in-time restore can reach close to now; an idle server does not
    // switch segments, so this costs nothing when nothing happens. (A fork
    // of a running service switches its parent's segment first.)
    archive_timeout: '5min',
    // Full-page images compressed (lz4, cheap in CPU): after every
    // checkpoint, a backup's included, the first change to each page writes
    // it whole into the WAL, which the commits fsync and the archiver
    // stores. Fewer bytes for both; its effect on the backup-write
    // benchmark alone was within that benchmark's noise (bench/README.md).
    wal_compression: 'lz4',
    // Pages a backend writes out (a shared service's 32 MB of buffers
    // evict constantly under writes) are handed to the disk every 256 kB,
    // rather than left in the kernel's cache for up to 30 s: otherwise the
    // next checkpoint's fsyncs, a backup's immediate one included, wrote
    // hundreds of MB at once and the commits' WAL fsyncs queued behind them
    // (0.5 s with 200-900 MB dirty; with this, 0.01 s and ~30 MB dirty at
    // most: bench/README.md, backup-write). PostgreSQL's own knob for such
    // stalls; checkpoints and the background writer already do so by default.
    backend_flush_after: '256kB',
    // JSON logs, collected into pgdata/log, rotated daily or at 10 MB. Names
    // sort chronologically (logs/read-node-logs.ts relies on it); PostgreSQL
    // turns the .log suffix into .json for jsonlog.
    // https://www.postgresql.org/docs/15/runtime-config-logging.html
    logging_collector: 'on',
    log_destination: 'jsonlog',
    log_directory: 'log',
    log_filename: 'postgresql-%Y%m%d-%H%M%S.log',
    log_rotation_age: '1d',
    log_rotation_size: '10MB',
    log_file_mode: '0600',
    log_timezone: 'UTC',
    timezone: 'UTC',
  };
  if (tsdb) {
    s['timescaledb.max_background_workers'] = String(p.timescaleBackgroundWorkers);
    // No internet here; and a managed service does not phone home by default.
    s['timescaledb.telemetry_level'] = 'off';
  }
  if (options.storage) Object.assign(s, storageSettings(options.storage));
  if (node.synchronousStandbys) s.synchronous_standby_names = node.synchronousStandbys;
  if (node.standby) {
    // A streaming standby (https://www.postgresql.org/docs/15/warm-standby.html):
    // it follows the newest timeline, so it keeps following after a failover
    // promoted another standby; its slot keeps the WAL it still needs on
    // the primary; its feedback keeps the primary from removing rows its
    // queries still read.
    s.primary_conninfo = node.standby.conninfo;
    s.primary_slot_name = node.standby.slot;
    s.recovery_target_timeline = 'latest';
    s.hot_standby_feedback = 'on';
  }
  if (spec.source.kind === 'fork' && node.index === 0 && !node.standby) {
    // A fork recovers its parent's WAL before it opens. With hot standby,
    // PostgreSQL would refuse to recover with fewer connections or workers
    // than its parent had (a fork may be smaller); nobody connects before
    // it opens anyway. Its node 0 runs as a standby only after a failover
    // (rewound, then restarted anyway), so this changes
    // nothing afterwards, and it never changes: no restart.
    s.hot_standby = 'off';
  }
  return { ...s, ...(recovery ? recoverySettings(recovery, paths) : {}) };
}

/**
 * What a storage allowance asks of PostgreSQL (docs/decisions.md, Storage
 * allowances):
 * - the WAL a checkpoint keeps (max_wal_size, PostgreSQL's default 1 GB)
 *   is at most a quarter of the allowance, so that a small service's
 *   allowance goes to its data, not to WAL kept for crash recovery; at
 *   least 32 MB, two segments, PostgreSQL's floor;
 * - over its allowance, every session starts read-only
 *   (default_transaction_read_only): a session may still SET it off to
 *   free space, which is the point. Basin's own sessions do so at login
 *   (admin.ts).
 * Both apply with a reload.
 */
export function storageSettings(storage: { allowance: number; readOnly: boolean }): Settings {
  const mb = 1024 * 1024;
  const maxWalMb = Math.max(32, Math.min(1024, Math.floor(storage.allowance / 4 / mb)));
  return {
    max_wal_size: `${maxWalMb}MB`,
    min_wal_size: `${Math.max(32, Math.min(80, Math.floor(maxWalMb / 2)))}MB`,
    ...(storage.readOnly ? { default_transaction_read_only: 'on' } : {}),
  };
}

/**
 * What a recovering fork needs to stop where its strategy says and then
 * promote itself (https://www.postgresql.org/docs/15/runtime-config-wal.html#RUNTIME-CONFIG-WAL-RECOVERY-TARGET),
 * with the recovery.signal its restore wrote. None of these is a restart
 * setting: they are read when the server starts recovering, and dropping
 * them once the fork is open must not restart it.
 */
export function recoverySettings(recovery: Recovery, paths: NodePaths): Settings {
  if (recovery.kind === 'none') return {};
  return { ...recoveryTarget(recovery, paths), ...RECOVERY_SYNC };
}

/**
 * A server that was not shut down cleanly (a copy of a running parent, a
 * restored backup) first makes its whole data directory durable. With
 * `fsync`, PostgreSQL's default, one fsync per file: on a single-device XFS
 * each is a cache flush of the device even when the file is clean, as a
 * reflinked clone is; ~1,000 of them for the smallest service, 0.2-6 s
 * here (bench/README.md, fork-now). `syncfs` makes the same guarantee with
 * one call per file system (data directory, pg_wal, tablespaces), writing
 * out whatever else is dirty on it too, which the kernel would within 30 s
 * anyway. Read at start only.
 */
const RECOVERY_SYNC = { recovery_init_sync_method: 'syncfs' };

function recoveryTarget(recovery: Exclude<Recovery, { kind: 'none' }>, paths: NodePaths): Settings {
  const promote = { recovery_target_action: 'promote', recovery_target_timeline: 'current' };
  if (recovery.kind === 'copy') {
    // The WAL came with the copy, in pg_wal; PostgreSQL reads it there when
    // the restore_command finds nothing (it must have one to recover).
    return { restore_command: 'false', recovery_target: 'immediate', ...promote };
  }
  const fetch = recovery.systemIds
    ? forkRestoreCommand(
        paths.pgbackrest,
        paths.forkSourceConf,
        recovery.stanza,
        paths.forkSourcePg,
      )
    : restoreCommand(paths.pgbackrest, paths.forkSourceConf, recovery.stanza);
  const { target } = recovery;
  if (target === 'end') return { restore_command: fetch, recovery_target_action: 'promote' };
  if (target === 'immediate') {
    return { restore_command: fetch, recovery_target: 'immediate', ...promote };
  }
  return { restore_command: fetch, recovery_target_time: pgTimestamp(target.time), ...promote };
}

/**
 * An RFC 3339 moment as recovery_target_time takes it: PostgreSQL's check
 * of the setting refuses the `T` and the `Z` that timestamptz input takes.
 */
export function pgTimestamp(iso: string): string {
  return new Date(iso).toISOString().replace('T', ' ').replace('Z', '+00');
}

/** The two halves of the settings: what needs a restart and what a reload applies. */
export function splitSettings(settings: Settings): { restart: Settings; reload: Settings } {
  const restart: Settings = {};
  const reload: Settings = {};
  for (const [k, v] of Object.entries(settings))
    (RESTART_SETTINGS.has(k) ? restart : reload)[k] = v;
  return { restart, reload };
}

/** postgresql.conf syntax; every value is a quoted string, which PostgreSQL accepts for any type. */
export function renderConf(settings: Settings): string {
  const lines = Object.entries(settings).map(([k, v]) => `${k} = '${v.replace(/'/g, "''")}'`);
  return `# Written by Basin from the service's spec; edits are overwritten.\n${lines.join('\n')}\n`;
}

/** The role the standbys of a service stream as (replication.ts). */
export const REPLICATION_ROLE = 'basin_replication';

/** The ident map name used for Basin's administrative (peer) connections. */
export const ADMIN_MAP = 'basin';

/**
 * Where a node's non-public clients come from: what pgHba admits beside
 * the access rules.
 */
export interface HbaSources {
  /**
   * Behind a proxy (HAProxy's TCP mode, with no PROXY header) a node sees
   * the proxy's address, as it sees a client on this host: admitted for
   * every role but `postgres`, the proxy enforcing the access rules.
   */
  proxy: readonly string[];
  /** Where the replication role streams and rewinds from. */
  replication: readonly string[];
}

const LOOPBACK = ['127.0.0.1/32', '::1/128'];

/** A node in the host's network: the proxy, the host's clients and the standbys come from loopback. */
export const HOST_NETWORK: HbaSources = { proxy: LOOPBACK, replication: LOOPBACK };

/**
 * A node in a network namespace of its own (docs/decisions.md, Service
 * networks): HAProxy and the host's clients arrive from the namespace's
 * gateway (`hostAddress`, the host side of its veth: loopback clients are
 * translated to it); the service's HA standbys stream over the
 * namespace's own loopback, its read replica sets' nodes arrive from the
 * gateway too (translated: nft-table.ts).
 */
export function namespaceSources(hostAddress: string): HbaSources {
  const gateway = `${hostAddress}/32`;
  return { proxy: [gateway], replication: [...LOOPBACK, gateway] };
}

/**
 * Host-based authentication, first match wins
 * (https://www.postgresql.org/docs/15/auth-pg-hba-conf.html):
 * - the `postgres` superuser only over the Unix socket, by peer (OS user)
 *   authentication mapped through pg_ident; every other local login is refused;
 * - TCP without TLS is refused for everyone, so TLS is required;
 * - the superuser never logs in over TCP, whatever its password;
 * - every other role logs in with SCRAM-SHA-256 from admittedCidrs: the
 *   public endpoint's CIDRs, or a VPC's instead; `locked`, nobody
 *   does: a fork holds its parent's roles and passwords until Basin has
 *   reset tsdbadmin's;
 * - while the connection pooler is enabled, tsdbadmin logs in to `tsdb` over
 *   the socket with SCRAM-SHA-256: that is PgBouncer (pooler.ts), replaying
 *   its client's SCRAM proof. The socket's directory is the service's user's
 *   alone, so nothing else gets there that could not already.
 * - with `replication` (a service with standbys), the replication role
 *   streams from `from.replication` (HbaSources).
 * A node behind HAProxy (its port is not the endpoint's) admits
 * `from.proxy` too.
 */
export function pgHba(
  spec: Pick<ServiceSpec, 'allowedCidrs'> & {
    pooler?: { enabled: boolean };
    port?: number;
    nodes?: readonly { port: number }[];
  },
  publicCidrs: readonly string[],
  locked = false,
  replication = false,
  from: HbaSources = HOST_NETWORK,
) {
  const cidrs = locked ? [] : admittedCidrs(spec, publicCidrs);
  // A node behind HAProxy (its port is not the endpoint's) sees every
  // client as the proxy; the proxy enforces the access rules (haproxy.ts).
  const proxied = spec.nodes?.some((n) => n.port !== spec.port) ?? false;
  if (proxied && !locked) {
    for (const a of from.proxy) if (!cidrs.includes(a)) cidrs.push(a);
  }
  const any = ['0.0.0.0/0', '::/0'];
  const row = (...cols: string[]) => cols.map((c, i) => (i < 4 ? `${c.padEnd(13)} ` : c)).join('');
  return [
    '# Written by Basin from the service spec; edits are overwritten.',
    row('# TYPE', 'DATABASE', 'USER', 'ADDRESS', 'METHOD'),
    row('local', 'all', 'postgres', '', `peer map=${ADMIN_MAP}`),
    ...(spec.pooler?.enabled && !locked
      ? [row('local', 'tsdb', 'tsdbadmin', '', 'scram-sha-256')]
      : []),
    row('local', 'all', 'all', '', 'reject'),
    ...any.map((a) => row('hostnossl', 'all', 'all', a, 'reject')),
    ...any.map((a) => row('hostssl', 'all', 'postgres', a, 'reject')),
    ...cidrs.map((c) => row('hostssl', 'all', 'all', c, 'scram-sha-256')),
    // The service's standbys (when it has some) stream from loopback (or,
    // a read replica set's, through the host), over TLS, as Basin's
    // replication role (replication.ts); `all` above never matches a
    // replication connection.
    ...(replication && !locked ? from.replication : []).map((a) =>
      row('hostssl', 'replication', REPLICATION_ROLE, a, 'scram-sha-256'),
    ),
    // …and a read replica's pg_rewind reads the primary's files through
    // the `postgres` database, as the same role (standby.ts, rewindSource).
    ...(replication && !locked ? from.replication : []).map((a) =>
      row('hostssl', 'postgres', REPLICATION_ROLE, a, 'scram-sha-256'),
    ),
    '',
  ].join('\n');
}

/**
 * Who may connect to a service over TCP (its server and its pooler alike):
 * from its VPC's blocks only (`allowedCidrs`: the VPC's CIDR and its peers')
 * when it is in a VPC, a private network's database being closed to the
 * rest; from the public endpoint's CIDRs (default everyone) otherwise.
 * docs/decisions.md, VPCs and peerings.
 */
export function admittedCidrs(
  spec: Pick<ServiceSpec, 'allowedCidrs'>,
  publicCidrs: readonly string[],
): string[] {
  const from = spec.allowedCidrs.length > 0 ? spec.allowedCidrs : publicCidrs;
  return [...new Set(from.map(checkCidr))];
}

/** Which OS users may log in as `postgres` over the socket: Basin's admin connection. */
export function pgIdent(osUsers: readonly string[]): string {
  const users = [...new Set(osUsers)];
  for (const u of users) {
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(u)) throw new Error(`unusable OS user name ${u}`);
  }
  return [
    '# Written by Basin; edits are overwritten.',
    '# MAPNAME  SYSTEM-USERNAME  PG-USERNAME',
    ...users.map((u) => `${ADMIN_MAP}  ${u}  postgres`),
    '',
  ].join('\n');
}

/** Accepts an IPv4 or IPv6 block "address/prefix" and returns it; anything else is refused. */
export function checkCidr(cidr: string): string {
  const m = /^([^/\s]+)\/(\d{1,3})$/.exec(cidr);
  const family = m ? isIP(m[1] as string) : 0;
  const prefix = m ? Number(m[2]) : NaN;
  if (!m || family === 0 || prefix > (family === 4 ? 32 : 128)) {
    throw new Error(`not a CIDR block: ${JSON.stringify(cidr)}`);
  }
  return cidr;
}
