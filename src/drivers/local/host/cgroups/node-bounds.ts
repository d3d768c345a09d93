// How much memory, how many processes and how much CPU each thing Basin
// runs for a tenant may take (docs/decisions.md, Memory and processes):
// pure numbers, which node-cgroups.ts writes into the cgroups and confine.ts
// into the rlimits.
//
// - A node: its size's memory (`memory_gbs` GiB), swap included; its
//   size's CPU (cgroup-hierarchy.ts, cpuQuotaUs); as many processes as a full
//   load of it needs: its max_connections, its background workers, the
//   autovacuum workers and WAL senders PostgreSQL adds to them, its own
//   processes, and headroom for what a tenant legitimately runs beside
//   (COPY … PROGRAM, pgBackRest's archive-push). A `shared` node has no
//   memory bound of its own: every shared node of the installation shares
//   one (sharedMemoryBytes).
// - A service's (or set's) PgBouncer: one process, and memory for the
//   clients it may hold (each a TLS session and its buffers).
// - The helpers Basin runs as the service's user (backups, restores, base
//   backups, rewinds): a few processes, 1 GiB (their page cache included,
//   which the kernel reclaims under the bound); the same for what runs as
//   its repository's user (its server, backups, expiry).
// - The service's OS user, across all of those: RLIMIT_NPROC.

import type { Size } from '../../../../domain/types.js';
import { type Bounds, cpuQuotaUs } from './cgroup-hierarchy.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** PostgreSQL's defaults, which Basin does not change: each is a process at full load. */
const AUTOVACUUM_WORKERS = 3;
const WAL_SENDERS = 10;
/**
 * The postmaster and its own processes (logger, checkpointer, background
 * writer, WAL writer, autovacuum and logical replication launchers,
 * archiver, startup, WAL receiver) and pgBackRest's asynchronous
 * archive-push (the command and its background process).
 */
const OWN_PROCESSES = 16;
/** What a tenant runs beside its sessions: programs through COPY … PROGRAM, and their shells. */
const TENANT_HEADROOM = 64;

/** What a node's settings say about its processes (conf.ts, processCounts). */
export interface ProcessCounts {
  maxConnections: number;
  maxWorkerProcesses: number;
}

/** The processes a node of these settings runs at most under a legitimate full load. */
export function nodePidsMax(counts: ProcessCounts): number {
  return (
    counts.maxConnections +
    counts.maxWorkerProcesses +
    AUTOVACUUM_WORKERS +
    WAL_SENDERS +
    OWN_PROCESSES +
    TENANT_HEADROOM
  );
}

/** The smallest memory bound: sizeProfile's floor (conf.ts), below which PostgreSQL is not sized. */
const MIN_NODE_MEMORY = 256 * MiB;

/** A node's bounds: its size's CPU and memory (none of its own when `shared`), and its processes. */
export function nodeBounds(size: Size, counts: ProcessCounts): Bounds {
  const cpu = cpuQuotaUs(size);
  return {
    ...(cpu === undefined ? {} : { cpuQuotaUs: cpu }),
    ...(size.shared ? {} : { memoryBytes: Math.max(MIN_NODE_MEMORY, size.memoryGbs * GiB) }),
    pidsMax: nodePidsMax(counts),
  };
}

/** Memory a PgBouncer needs for each client it may hold: a TLS session and its packet buffers. */
const POOLER_MEMORY_PER_CLIENT = 64 * 1024;
const POOLER_MEMORY_BASE = 64 * MiB;

/**
 * A pooler's bounds: memory for `maxClients` clients and `processes`
 * PgBouncers, a few processes (at most 4: pooler-conf.ts), and on cgroup v2 the priority it has on v1 (pooler.ts, POOLER_NICE).
 */
export function poolerBounds(maxClients: number, nice: number, processes = 1): Bounds {
  return {
    // Each process has its own base; a client is in one process, so the
    // clients' part is counted once.
    memoryBytes:
      POOLER_MEMORY_BASE * Math.max(1, processes) + maxClients * POOLER_MEMORY_PER_CLIENT,
    pidsMax: 32,
    cpuNice: nice,
  };
}

/**
 * The helpers' bounds: pgBackRest's processes (at most 4 per backup, one
 * per restore), pg_basebackup (two), pg_rewind, and their shells; on
 * cgroup v2 the priority of the backups (backups.ts), below the databases.
 */
export const TASKS_BOUNDS: Bounds = { memoryBytes: 1 * GiB, pidsMax: 64, cpuNice: 10 };

/**
 * A service's repository user's bounds (repository/): its pgBackRest
 * server (~14 MB idle, and a process per client connection: the
 * archiver's, a fork's restore with its processes), and the backups and
 * expiry Basin runs as that user (at most 4 processes each): as the
 * helpers, whose work it shares with the service's side.
 */
export const REPOSITORY_BOUNDS: Bounds = { memoryBytes: 1 * GiB, pidsMax: 64, cpuNice: 10 };

/** The shared nodes' bound when the operator sets none: a quarter of the host's memory. */
export function sharedMemoryBytes(hostBytes: number, configuredMb?: number): number {
  return configuredMb !== undefined ? configuredMb * MiB : Math.floor(hostBytes / 4);
}

/**
 * RLIMIT_NPROC of every process Basin starts as a service's (or set's) OS
 * user: a quarter of the host's pid_max, at most 16384. The kernel counts
 * every process and thread of the uid on the host against it: a service's
 * nodes (up to 6; a set's up to 10), its pooler and its helpers together,
 * each held far lower by its cgroup (a node of the largest default size:
 * 644). It is what still holds where the host has no pids controller, or a
 * process escaped one: no uid can take every pid of the host.
 */
export function serviceNproc(pidMax: number): number {
  return Math.min(16384, Math.floor(pidMax / 4));
}

/** Bytes as people read a bound: "1 GiB", "1.5 GiB", "320 MiB". */
export function formatBytes(n: number): string {
  if (n >= GiB) return `${Math.round((n / GiB) * 10) / 10} GiB`;
  return `${Math.round(n / MiB)} MiB`;
}
