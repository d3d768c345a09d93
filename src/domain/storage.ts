// Storage allowances (docs/decisions.md, Storage allowances): how much of
// the host's disk a service may take, and what happens as it nears and
// passes that. Pure rules, no I/O: the local driver measures and acts
// (drivers/local/storage/), the engine records, the API shows.
//
// A service's data (the largest of its nodes' directories, WAL included)
// climbs a ladder of levels as it grows:
//
//   ok         under its allowance
//   readOnly   at its allowance: sessions start read-only
//              (default_transaction_read_only), which a session may lift
//              with SET to free space
//   recovery   at its ceiling (allowance + margin): PostgreSQL runs in
//              recovery, where no session can write
//   stopped    at its limit (ceiling + margin), its backup repository past
//              its bound, or over its allowance while the host's disk is
//              below its reserve: every process of the service is stopped,
//              and it does not start while that holds
//
// Each level is left a little below where it was entered (`slack`), so
// that a service at the edge does not flap.

import { STORAGE_LEVELS, type Size, type StorageLevel } from './types.js';

export { STORAGE_LEVELS, type StorageLevel };

/** Storage is counted in binary megabytes, as `metrics.storage_mb` is. */
export const MB = 1024 * 1024;
export const GB = 1024 * MB;

/**
 * Where a service's allowance comes from: the same for every size, or so
 * much per GB of the size's memory (a `shared` size then gets `sharedBytes`).
 */
export type AllowancePolicy =
  | { kind: 'fixed'; bytes: number }
  | { kind: 'perMemoryGb'; bytesPerGb: number; sharedBytes: number };

/** The default: 25 GB of storage per GB of memory, 10 GB for a shared service. */
export const DEFAULT_ALLOWANCE: AllowancePolicy = {
  kind: 'perMemoryGb',
  bytesPerGb: 25 * GB,
  sharedBytes: 10 * GB,
};

/** A service's allowance in bytes (whole megabytes). */
export function allowanceOf(policy: AllowancePolicy, size: Size): number {
  const bytes =
    policy.kind === 'fixed'
      ? policy.bytes
      : size.shared
        ? policy.sharedBytes
        : policy.bytesPerGb * size.memoryGbs;
  return Math.max(MB, Math.round(bytes / MB) * MB);
}

export interface StorageLimits {
  /** readOnly from here. */
  allowance: number;
  /** recovery from here. */
  ceiling: number;
  /** stopped from here. */
  limit: number;
  /** How far below a level's threshold it is left. */
  slack: number;
  /** The backup repository's bound: stopped from here. */
  backups: number;
}

/**
 * The thresholds that follow from an allowance: a margin of a tenth of it,
 * at least 64 MB (a fast writer outruns the measurement by about that,
 * docs/decisions.md) and at most 1 GB, between each level. The backup
 * repository may hold four times the limit: the four full backups that the
 * default schedule (daily) and recovery window (three days) keep, and the
 * WAL between them; backups are not part of the allowance, as managed
 * clouds bill them apart, but they are on the same disk.
 */
export function storageLimits(allowance: number): StorageLimits {
  const margin = Math.min(GB, Math.max(64 * MB, Math.round(allowance / 10 / MB) * MB));
  const limit = allowance + 2 * margin;
  return { allowance, ceiling: allowance + margin, limit, slack: margin / 2, backups: 4 * limit };
}

/** Why a service is stopped. */
export type StopReason = 'limit' | 'backups' | 'lowDisk';

export interface StorageState {
  level: StorageLevel;
  /** Only for `stopped`. */
  why?: StopReason;
}

export interface StorageUsage {
  /** The largest of its nodes' directories, in bytes. */
  data: number;
  /** Its backup repository, in bytes. */
  backups: number;
}

const rank = (level: StorageLevel) => STORAGE_LEVELS.indexOf(level);

/**
 * The level a service is at now, given the one it was at, what it uses,
 * its limits and whether the host's disk is below its reserve.
 */
export function nextStorageState(
  prev: StorageLevel,
  usage: StorageUsage,
  l: StorageLimits,
  lowDisk: boolean,
): StorageState {
  const { data } = usage;
  if (data >= l.limit) return { level: 'stopped', why: 'limit' };
  if (usage.backups >= l.backups) return { level: 'stopped', why: 'backups' };
  if (lowDisk && data >= l.allowance) return { level: 'stopped', why: 'lowDisk' };
  if (data >= l.ceiling) return { level: 'recovery' };
  if (rank(prev) >= rank('recovery') && data >= l.ceiling - l.slack) return { level: 'recovery' };
  if (data >= l.allowance) return { level: 'readOnly' };
  if (rank(prev) >= rank('readOnly') && data >= l.allowance - l.slack) return { level: 'readOnly' };
  return { level: 'ok' };
}

/**
 * How much the data may grow (`up`) or shrink (`down`) from `usage` before
 * the level could change: a measurement is due sooner when the host's disk
 * filled or emptied by that much since the last one (Infinity: no bound).
 */
export function storageMargins(
  level: StorageLevel,
  usage: StorageUsage,
  l: StorageLimits,
): { up: number; down: number } {
  const upTo = [l.allowance, l.ceiling, l.limit].find((t) => t > usage.data) ?? Infinity;
  const backupsUp = l.backups - usage.backups;
  const downTo =
    level === 'ok'
      ? -Infinity
      : level === 'readOnly'
        ? l.allowance - l.slack
        : level === 'recovery'
          ? l.ceiling - l.slack
          : l.limit;
  return {
    up: level === 'stopped' ? Infinity : Math.max(0, Math.min(upTo - usage.data, backupsUp)),
    down: Math.max(0, usage.data - downTo),
  };
}

/** What a driver says of a service's (or replica set's) storage now. */
export interface StorageView {
  level: StorageLevel;
  why?: StopReason;
  usage: StorageUsage;
  limits: StorageLimits;
  /** Whether its allowance grows with its size (AllowancePolicy perMemoryGb): a resize raises it. */
  grows: boolean;
}

/** A change of level, as the driver reports it. */
export interface StorageChange {
  from: StorageLevel;
  view: StorageView;
}

const mb = (bytes: number) => `${Math.round(bytes / MB)} MB`;

/** How the allowance of `view` is raised. */
const raise = (view: StorageView) =>
  view.grows
    ? 'a resize to a size with more memory raises the allowance'
    : "the allowance is the installation's (--storage-allowance): the operator raises it";

/**
 * The entry Basin writes into a service's (or replica set's) logs when its
 * level changes: what happened, and what the user can do about it.
 */
export function storageMessage(
  change: StorageChange,
  what: 'service' | 'replica set',
): { severity: 'LOG' | 'WARNING' | 'ERROR'; message: string } {
  const { from, view } = change;
  const { usage, limits: l } = view;
  const at = `storage is at ${mb(usage.data)}`;
  switch (view.level) {
    case 'ok':
      return {
        severity: 'LOG',
        message: `basin: ${at}, under its allowance of ${mb(l.allowance)}: the ${what} takes writes again`,
      };
    case 'readOnly':
      return rank(from) > rank('readOnly')
        ? {
            severity: 'WARNING',
            message:
              `basin: ${at}: PostgreSQL runs out of recovery again; the ${what} is still over its allowance ` +
              `of ${mb(l.allowance)}, so sessions start read-only until it is under ${mb(l.allowance - l.slack)}`,
          }
        : {
            severity: 'WARNING',
            message:
              `basin: ${at}, over its allowance of ${mb(l.allowance)}: the ${what} is read-only ` +
              `(default_transaction_read_only). To free space, in a session: SET default_transaction_read_only = off; ` +
              `then DROP or TRUNCATE what is not needed (or DELETE and VACUUM FULL). ` +
              `At ${mb(l.ceiling)} PostgreSQL is restarted in recovery, at ${mb(l.limit)} stopped; ${raise(view)}`,
          };
    case 'recovery':
      return {
        severity: 'WARNING',
        message:
          `basin: ${at}, past ${mb(l.ceiling)} (its allowance of ${mb(l.allowance)} and a margin): ` +
          `PostgreSQL is restarted read-only, in recovery, where no session can write. ` +
          `It takes writes again under ${mb(l.ceiling - l.slack)} (remove files written into its directories; ` +
          `${raise(view)}); at ${mb(l.limit)} it is stopped`,
      };
    case 'stopped':
      return { severity: 'ERROR', message: `basin: ${stoppedMessage(view, what)}` };
  }
}

/** What the stop did, and why. */
function stoppedMessage(view: StorageView, what: 'service' | 'replica set'): string {
  const { usage, limits: l } = view;
  const stopped = `every process of the ${what} was stopped`;
  switch (view.why ?? 'limit') {
    case 'limit':
      return `storage is at ${mb(usage.data)}, past its limit of ${mb(l.limit)} (allowance ${mb(l.allowance)}): ${stopped}`;
    case 'backups':
      return `its backup repository holds ${mb(usage.backups)}, past its bound of ${mb(l.backups)} (four times its storage limit): ${stopped}`;
    case 'lowDisk':
      return `the host's disk is below its reserve and the ${what} is over its allowance (${mb(usage.data)} of ${mb(l.allowance)}): ${stopped}, to keep room for the others`;
  }
}

/** Why a stopped service does not start, and what brings it back: the error its converges fail with. */
export function holdMessage(view: StorageView, what: 'service' | 'replica set'): string {
  const { usage, limits: l } = view;
  const back = view.grows
    ? `resize it to a size whose allowance holds it, or delete it`
    : `the operator must raise the installation's allowance (--storage-allowance), or delete it`;
  switch (view.why ?? 'limit') {
    case 'limit':
      return `storage is at ${mb(usage.data)}, past its limit of ${mb(l.limit)}: the ${what} does not start while it holds that much; ${back}`;
    case 'backups':
      return `its backup repository holds ${mb(usage.backups)}, past its bound of ${mb(l.backups)}: the ${what} does not start while it holds that much; ${back}`;
    case 'lowDisk':
      return `the host's disk is below its reserve and the ${what} is over its allowance (${mb(usage.data)} of ${mb(l.allowance)}): it starts again once the host has room, or once it is under its allowance`;
  }
}

/**
 * How much free space the host keeps: a fraction of the file system, or
 * so many bytes.
 */
export type ReservePolicy =
  { kind: 'fraction'; fraction: number } | { kind: 'bytes'; bytes: number };

export const DEFAULT_RESERVE: ReservePolicy = { kind: 'fraction', fraction: 0.05 };

export function reserveOf(policy: ReservePolicy, fileSystemBytes: number): number {
  return policy.kind === 'bytes' ? policy.bytes : Math.round(policy.fraction * fileSystemBytes);
}

/**
 * Whether the host's disk is low: below its reserve, and until it has a
 * tenth of the reserve (at least 64 MB) more than that again.
 */
export function diskLow(wasLow: boolean, freeBytes: number, reserve: number): boolean {
  const slack = Math.max(64 * MB, reserve / 10);
  return freeBytes < reserve || (wasLow && freeBytes < reserve + slack);
}

/**
 * Parses an allowance: a size (`200MB`, `50GB`, `2TB`) for every service,
 * or `<n>x` for n GB per GB of memory (a shared size then gets
 * `sharedBytes`). Throws what to write instead ("must be …").
 */
export function parseAllowance(text: string, sharedBytes: number): AllowancePolicy {
  const ratio = /^(\d+(?:\.\d+)?)x$/i.exec(text.trim());
  if (ratio && Number(ratio[1]) > 0) {
    return { kind: 'perMemoryGb', bytesPerGb: Number(ratio[1]) * GB, sharedBytes };
  }
  const bytes = sizeBytes(text);
  if (!(bytes >= MB)) {
    throw new Error(`<n>x (n GB per GB of memory, n above 0) or ${A_SIZE}; got ${text}`);
  }
  return { kind: 'fixed', bytes };
}

/** Parses a reserve: `5%` of the file system, or a size (`20GB`). Throws what to write instead. */
export function parseReserve(text: string): ReservePolicy {
  const pct = /^(\d+(?:\.\d+)?)%$/.exec(text.trim());
  const fraction = pct ? Number(pct[1]) / 100 : NaN;
  if (fraction >= 0 && fraction < 0.5) return { kind: 'fraction', fraction };
  const bytes = sizeBytes(text);
  if (!pct && bytes >= 0) return { kind: 'bytes', bytes };
  throw new Error(`a percentage of the file system under 50% (5%) or ${A_SIZE}; got ${text}`);
}

/** `200MB`, `1.5GB`, `2TB` (binary units, as storage_mb is) → bytes, at least 1MB. Throws what to write instead. */
export function parseBytes(text: string): number {
  const bytes = sizeBytes(text);
  if (!(bytes >= MB)) throw new Error(`${A_SIZE} (at least 1MB); got ${text}`);
  return bytes;
}

const A_SIZE = 'a size such as 500MB, 20GB or 2TB';

function sizeBytes(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(MB|GB|TB)$/i.exec(text.trim());
  const unit = { MB, GB, TB: 1024 * GB };
  return m ? Math.round(Number(m[1]) * unit[m[2]!.toUpperCase() as keyof typeof unit]) : NaN;
}
