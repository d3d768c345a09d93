// Backups and the recovery window (docs/architecture.md §9, docs/decisions.md,
// Backups and forks). Pure: the engine records each completed backup in the
// store, and everything a request needs to know about a service's backups
// is computed here from those records, without asking the driver.
//
// A backup is full and self-contained; with the WAL archived since, it can
// be restored to any moment after it finished (PostgreSQL reaches a
// consistent state only at the end of a backup). So the oldest restorable
// moment of a service is the end of its oldest kept backup, and the newest
// is now.

import { conflict, invalid } from './errors.js';
import { isRfc3339 } from './service-rules.js';
import type { ForkStrategy } from './types.js';

export interface Backup {
  serviceId: string;
  /** The driver's name for it (pgBackRest's label, e.g. 20250102-030405F); sorts by time. */
  label: string;
  /** RFC 3339: when it started. */
  startedAt: string;
  /** RFC 3339: from when on it can be restored (rounded up to the whole second). */
  stoppedAt: string;
}

/** How often full backups are taken and how far back they reach (configuration). */
export interface BackupPolicy {
  /** A full backup is due this long after the last one started. */
  scheduleMs: number;
  /** How far back a point-in-time restore must reach. */
  windowMs: number;
}

/** A full backup a day, three days back: what managed clouds give by default. */
export const DEFAULT_BACKUP_POLICY: BackupPolicy = {
  scheduleMs: 24 * 3_600_000,
  windowMs: 3 * 24 * 3_600_000,
};

const ms = (iso: string) => Date.parse(iso);
const byStart = (a: Backup, b: Backup) =>
  ms(a.startedAt) - ms(b.startedAt) || cmp(a.label, b.label);
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Oldest first. */
export function sortBackups(backups: readonly Backup[]): Backup[] {
  return [...backups].sort(byStart);
}

/** Whether a new full backup is due: there is none yet, or the last started `scheduleMs` ago. */
export function backupDue(backups: readonly Backup[], policy: BackupPolicy, now: number): boolean {
  const last = sortBackups(backups).at(-1);
  return last === undefined || now - ms(last.startedAt) >= policy.scheduleMs;
}

/**
 * The oldest backup to keep: every backup that finished within the window,
 * and the newest one that finished before it (so that the window's first
 * moment stays restorable), and those `pinned` (what forks being made
 * restore). Everything older may be expired with its WAL. Undefined when
 * there is no backup.
 */
export function oldestToKeep(
  backups: readonly Backup[],
  policy: BackupPolicy,
  now: number,
  pinned: readonly string[] = [],
): Backup | undefined {
  const sorted = sortBackups(backups);
  const start = now - policy.windowMs;
  // Backups run one at a time, so they end in the order they start.
  let keep = 0;
  sorted.forEach((b, i) => {
    if (ms(b.stoppedAt) < start) keep = i;
  });
  const firstPinned = sorted.findIndex((b) => pinned.includes(b.label));
  if (firstPinned >= 0 && firstPinned < keep) keep = firstPinned;
  return sorted[keep];
}

/** The restorable moments: from the end of the oldest backup to now; undefined without one. */
export function recoveryWindow(backups: readonly Backup[]): { oldest: string } | undefined {
  const oldest = [...backups].sort((a, b) => ms(a.stoppedAt) - ms(b.stoppedAt))[0];
  return oldest && { oldest: oldest.stoppedAt };
}

/**
 * Which backup a fork restores, checked when the fork is requested: the
 * newest for LAST_SNAPSHOT, the newest that finished by `targetTime` for
 * PITR (its target checked against the recovery window), none for NOW (a
 * copy of the parent as it is). Returns the backup and the target, in
 * RFC 3339 UTC.
 */
export function forkSource(
  parentId: string,
  backups: readonly Backup[],
  strategy: ForkStrategy,
  targetTime: string | undefined,
  now: number,
): { backup: Backup | null; targetTime: string | null } {
  if (strategy === 'NOW') return { backup: null, targetTime: null };
  const target = strategy === 'PITR' ? parseTarget(targetTime as string) : undefined;
  const window = recoveryWindow(backups);
  if (!window) {
    throw conflict(
      `Service ${parentId} has no backup yet: its first is taken once it is READY. ` +
        `Fork it with NOW, or retry ${strategy} once that backup has completed.`,
    );
  }
  if (target === undefined) {
    return { backup: sortBackups(backups).at(-1) as Backup, targetTime: null };
  }
  if (target < ms(window.oldest) || target > now) {
    throw invalid(
      `target_time must be between ${window.oldest} and now (${new Date(now).toISOString()}): ` +
        `the recovery window of service ${parentId} starts when its oldest kept backup ended; ` +
        `got ${targetTime}.`,
    );
  }
  const candidates = backups.filter((b) => ms(b.stoppedAt) <= target);
  const backup = sortBackups(candidates).at(-1) as Backup;
  return { backup, targetTime: new Date(target).toISOString() };
}

/** An RFC 3339 moment, in ms, or a 400 that says what is expected. */
function parseTarget(target: string): number {
  const t = Date.parse(target);
  if (!isRfc3339(target) || Number.isNaN(t)) {
    throw invalid(`target_time must be an RFC 3339 timestamp; got ${JSON.stringify(target)}.`);
  }
  return t;
}
