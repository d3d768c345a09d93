// The sim's backups: in memory, each taking `delayMs`, named and dated as
// pgBackRest names them (the local driver's), so that clients and the engine
// see the same shapes. Forgotten at restart, like everything of the sim's:
// a parent whose backups the sim never saw is taken to have the ones asked for.

import type { BackupInfo, BackupProgress } from '../driver.js';

export class SimBackups {
  private readonly taken = new Map<string, BackupInfo[]>();
  /** A backup in progress per service: what it was asked for (`since`) and when it started. */
  private readonly running = new Map<string, { since: number; startedMs: number }>();

  constructor(
    private readonly delayMs: number,
    private readonly clock: () => number,
  ) {}

  /** One step of a backup that started at or after `since`. */
  take(serviceId: string, since: number): BackupProgress {
    const now = this.clock();
    const list = this.taken.get(serviceId) ?? [];
    const done = list.find((b) => Date.parse(b.startedAt) >= Math.floor(since / 1000) * 1000);
    if (done) return { done: true, backup: done };
    let run = this.running.get(serviceId);
    if (run?.since !== since) {
      run = { since, startedMs: now };
      this.running.set(serviceId, run);
    }
    const remaining = run.startedMs + this.delayMs - now;
    if (remaining > 0) return { done: false, retryAfterMs: remaining, reason: 'backing up' };
    this.running.delete(serviceId);
    let label = pgBackRestLabel(run.startedMs);
    for (let n = 1; list.some((b) => b.label === label); n++) label = `${label.slice(0, 16)}_${n}`;
    const backup: BackupInfo = {
      label,
      startedAt: new Date(run.startedMs).toISOString(),
      stoppedAt: new Date(now).toISOString(),
    };
    this.taken.set(serviceId, [...list, backup]);
    return { done: true, backup };
  }

  expire(serviceId: string, oldestKept: string): void {
    const list = this.taken.get(serviceId);
    const keep = list?.find((b) => b.label === oldestKept);
    if (!list || !keep) return;
    this.taken.set(
      serviceId,
      list.filter((b) => b.startedAt >= keep.startedAt),
    );
  }

  forget(serviceId: string): void {
    this.taken.delete(serviceId);
    this.running.delete(serviceId);
  }

  /**
   * Why a fork of `parentId` from the backup `label` to `targetTime` cannot
   * be made, or undefined when it can (or the sim knows none of the parent's backups).
   */
  unusable(parentId: string, label: string | null, targetTime: string | null): string | undefined {
    const list = this.taken.get(parentId);
    if (label === null || list === undefined) return undefined;
    const backup = list.find((b) => b.label === label);
    if (!backup) return `the backup ${label} of service ${parentId} no longer exists`;
    if (targetTime !== null && Date.parse(targetTime) < Date.parse(backup.stoppedAt)) {
      return `${targetTime} is before the backup ${label} of service ${parentId} ended (${backup.stoppedAt})`;
    }
    return undefined;
  }
}

/** `20300101-000000F`: a full backup's label, from when it started (UTC). */
function pgBackRestLabel(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10).replace(/-/g, '')}-${iso.slice(11, 19).replace(/:/g, '')}F`;
}
