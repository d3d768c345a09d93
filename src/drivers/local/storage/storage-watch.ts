// The storage watch: measures what each service (and read replica set)
// holds on the host's disk, keeps it on its level of the ladder
// (domain/storage.ts), and keeps the host's reserve. docs/decisions.md,
// Storage allowances, says why it works this way; in short:
//
// - A tenant is its service's OS user and can write into its directories
//   at the disk's speed, bypassing PostgreSQL; this kernel has no quotas.
//   So Basin measures from outside, as root, and enforces from outside:
//   the read-only levels are applied by the driver's converge (which the
//   engine runs when asked, `StorageNotice`), and the stop is done here,
//   at once, by killing every process of the service.
// - Measuring is walking directories (measurement.ts), which costs time in
//   proportion to their entries. Every target is measured every
//   `periodMs`; besides, every tick (`tickMs`) reads the file system's
//   use (statfs, one system call), and a target whose next threshold is
//   closer than what the file system grew (or shrank) since its last
//   measurement is measured at once, first (Movement). A fast writer is
//   thus seen within a tick and a walk of its directories; one whose
//   writes are hidden by as much freed in the very same ticks (by itself
//   elsewhere, or by others), within `periodMs`.
// - Walks are bounded per tick (`walk`), so that a tenant with millions of
//   files costs Basin a bounded share of a core, and slows only its own
//   measurement.

import { statfsSync } from 'node:fs';
import type { Target } from '../../../domain/logs.js';
import {
  diskLow,
  nextStorageState,
  type ReservePolicy,
  reserveOf,
  STORAGE_LEVELS,
  type StorageChange,
  type StorageLevel,
  type StorageLimits,
  storageLimits,
  storageMargins,
  type StorageState,
  type StorageUsage,
  type StorageView,
} from '../../../domain/storage.js';
import type { Logger } from '../../../lib/logger.js';
import type { Layout } from '../layout.js';
import { Measurement } from './measurement.js';
import { readStorageRecord, type StorageRecord, writeStorageRecord } from './storage-record.js';

/** What the driver tells the watch of a service or replica set. */
export interface WatchedTarget {
  target: Target;
  /** Its allowance, in bytes (domain/storage.ts, allowanceOf). */
  allowance: number;
  /** Its nodes' indices. */
  nodes: number[];
  /** Whether its allowance grows with its size (a resize raises it). */
  grows: boolean;
}

/**
 * What the watch tells the engine: a change of level (to write into the
 * target's logs), or only that its nodes are not converged to its level yet.
 */
export interface StorageNotice {
  target: Target;
  change?: StorageChange;
}

/** The host's disk, as the last tick saw it. */
export interface DiskState {
  size: number;
  free: number;
  used: number;
  reserve: number;
  low: boolean;
}

export interface StorageWatchOptions {
  layout: Layout;
  reserve: ReservePolicy;
  /**
   * Stops every process of the target (its nodes' and its OS user's): the
   * stop of the ladder. Called at once, in the same turn of the event loop
   * as the measurement that decided it: it should kill before it awaits.
   */
  stop: (target: Target, nodes: readonly number[]) => Promise<void>;
  log: Logger;
  tickMs?: number;
  periodMs?: number;
  /** Bounds of the walks per tick: urgent measurements' apart. */
  walk?: WalkBounds;
  /** The file system of `path`: its size and the bytes a tenant may still take (tests fake it). */
  statfs?: (path: string) => Promise<{ size: number; free: number; used: number }>;
  clock?: () => number;
  /**
   * Whether a target's files cannot change now: a suspended service (no
   * process of its runs, its tenant's included: idle/). Its measurement is
   * not repeated every period while it rests (one that is due, urgent or
   * never made still is): at 2,000 services, mostly asleep, walking each
   * one's ~1,000 files every period kept the watch at its walk bounds, on
   * the event loop, for nothing.
   */
  resting?: (id: string) => boolean;
}

export interface WalkBounds {
  entriesPerTick: number;
  msPerTick: number;
  urgent: { entriesPerTick: number; msPerTick: number };
}

export const STORAGE_WATCH = Object.freeze({
  tickMs: 50,
  periodMs: 30_000,
  walk: Object.freeze({
    entriesPerTick: 1_000,
    msPerTick: 25,
    urgent: Object.freeze({ entriesPerTick: 10_000, msPerTick: 200 }),
  }),
});

/**
 * Entries counted between two looks at what a measurement found so far:
 * fewer when it is urgent, so that a big file is acted on soon after it is
 * counted (a look costs next to nothing; a slice of a loaded host's walk,
 * tens of milliseconds).
 */
const SLICE = 500;
const URGENT_SLICE = 64;

/** How soon the engine is asked again to converge a target whose level is not applied. */
const ASK_AGAIN_MS = 5_000;

interface Watched {
  record: StorageRecord;
  target: Target;
  limits: StorageLimits;
  /** When the last complete measurement began, and the file system's movement then (Movement). */
  measured?: { at: number; moved: Movement };
  measuring?: { m: Measurement; at: number; moved: Movement; urgent: boolean };
  askedAt?: number;
  stoppedAt?: number;
  /** Measured again at the next tick (due). */
  stale?: boolean;
}

const rank = (level: StorageLevel) => STORAGE_LEVELS.indexOf(level);

/**
 * How much the file system grew, and shrank, in all, tick by tick: a
 * target is measured at once when the growth since its last measurement
 * reaches its next threshold. Summed per tick rather than netted, so that
 * space freed elsewhere (another service's cleanup, or the tenant's own
 * in another of its services) hides a writer only within one tick.
 */
interface Movement {
  grown: number;
  shrunk: number;
}

export class StorageWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly listeners: ((notice: StorageNotice) => void)[] = [];
  private readonly tickMs: number;
  private readonly periodMs: number;
  private readonly walk: WalkBounds;
  private readonly clock: () => number;
  private readonly statfs: NonNullable<StorageWatchOptions['statfs']>;
  private disk: DiskState | undefined;
  private readonly movement: Movement = { grown: 0, shrunk: 0 };
  /** Whose measurement goes first among those that are not urgent (walkSlices). */
  private turn = 0;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;

  constructor(private readonly o: StorageWatchOptions) {
    this.tickMs = o.tickMs ?? STORAGE_WATCH.tickMs;
    this.periodMs = o.periodMs ?? STORAGE_WATCH.periodMs;
    this.walk = o.walk ?? STORAGE_WATCH.walk;
    this.clock = o.clock ?? (() => performance.now());
    this.statfs = o.statfs ?? fileSystem;
  }

  onNotice(listener: (notice: StorageNotice) => void): void {
    this.listeners.push(listener);
  }

  /**
   * Starts (or updates) watching a target. A target met for the first
   * time takes its level from its record, if it has one (a restarted
   * Basin); a new allowance (a resize) moves its level at once.
   */
  async track(t: WatchedTarget): Promise<void> {
    const id = t.target.id;
    if (!this.watched.has(id)) {
      const found = await readStorageRecord(this.o.layout.storageFile(id));
      const record: StorageRecord =
        found && found.kind === t.target.kind
          ? found
          : {
              kind: t.target.kind,
              allowance: t.allowance,
              nodes: t.nodes,
              repo: false,
              level: 'ok',
            };
      // Tracked meanwhile (another call read the same record): that one stays.
      if (!this.watched.has(id)) {
        this.watched.set(id, { record, target: t.target, limits: storageLimits(record.allowance) });
      }
    }
    const w = this.watched.get(id)!;
    const { record } = w;
    const repo = t.target.kind === 'service';
    const same =
      record.allowance === t.allowance &&
      record.repo === repo &&
      record.grows === t.grows &&
      sameNodes(record.nodes, t.nodes);
    if (same) return;
    if (!sameNodes(record.nodes, t.nodes)) this.due(id);
    record.grows = t.grows;
    record.allowance = t.allowance;
    record.nodes = [...t.nodes];
    record.repo = repo;
    w.limits = storageLimits(t.allowance);
    if (record.usage) this.settle(w, record.usage, true);
    await this.save(w);
  }

  /** Targets the watch knows from their records, though nothing tracked them yet (a restart). */
  async adopt(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      if (this.watched.has(id)) continue;
      const r = await readStorageRecord(this.o.layout.storageFile(id));
      if (!r) continue;
      await this.track({
        target: { kind: r.kind, id },
        allowance: r.allowance,
        nodes: r.nodes,
        grows: r.grows ?? true,
      });
    }
  }

  /**
   * Measures the target again at the next tick: its nodes changed (made,
   * restored, rebuilt), and what the last measurement found is stale.
   */
  due(id: string): void {
    const w = this.watched.get(id);
    if (w) w.stale = true;
  }

  forget(id: string): void {
    const w = this.watched.get(id);
    void w?.measuring?.m.close();
    this.watched.delete(id);
  }

  /** Its level now (`ok` for a target not watched). */
  state(id: string): StorageState {
    const r = this.watched.get(id)?.record;
    return r ? { level: r.level, ...(r.why ? { why: r.why } : {}) } : { level: 'ok' };
  }

  /** Its level, usage and limits, once it was measured. */
  view(id: string): StorageView | undefined {
    const w = this.watched.get(id);
    if (!w?.record.usage) return undefined;
    return { ...this.viewOf(w), usage: w.record.usage };
  }

  private viewOf(w: Watched): Omit<StorageView, 'usage'> {
    const { level, why, grows } = w.record;
    return { level, ...(why ? { why } : {}), limits: w.limits, grows: grows ?? true };
  }

  /** Its nodes were converged to `level` (the engine need not be asked again). */
  async applied(id: string, level: StorageLevel): Promise<void> {
    const w = this.watched.get(id);
    if (!w || w.record.applied === level) return;
    w.record.applied = level;
    await this.save(w);
  }

  /** The host's disk as last seen; undefined before the first tick. */
  diskState(): DiskState | undefined {
    return this.disk;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const w of this.watched.values()) void w.measuring?.m.close();
  }

  /** One tick (the timer's; tests call it): the disk, the measurements due, the asks. */
  tick(): Promise<void> {
    return (this.ticking ??= this.tickOnce().finally(() => (this.ticking = undefined)));
  }

  private async tickOnce(): Promise<void> {
    try {
      const fs = await this.statfs(this.o.layout.root).catch(() => undefined);
      if (fs) await this.see(fs);
      const now = this.clock();
      for (const w of this.watched.values()) {
        const urgent = this.moved(w);
        if (w.measuring) {
          // One under way when the disk moves past its threshold: hurried.
          if (urgent) w.measuring.urgent = true;
          continue;
        }
        const periodic =
          w.measured !== undefined &&
          now - w.measured.at >= this.periodMs &&
          !this.o.resting?.(w.target.id);
        if (urgent || w.stale || !w.measured || periodic) {
          this.begin(w, urgent);
        }
      }
      await this.walkSlices();
      await this.enforce();
    } catch (err) {
      this.o.log.error({ err: (err as Error).message }, 'the storage watch failed a tick');
    }
  }

  /** Whether the file system filled or emptied, since `w` was measured, by more than its margins. */
  private moved(w: Watched): boolean {
    const usage = w.record.usage;
    if (!usage || !w.measured) return false;
    const { up, down } = storageMargins(w.record.level, usage, w.limits);
    return (
      this.movement.grown - w.measured.moved.grown >= up ||
      this.movement.shrunk - w.measured.moved.shrunk >= down
    );
  }

  private begin(w: Watched, urgent: boolean): void {
    const { layout } = this.o;
    const id = w.target.id;
    const m = new Measurement({
      nodes: w.record.nodes.map((node) => [
        layout.nodeDir({ id, node }),
        layout.socketDir({ id, node }),
      ]),
      // Its repository where it has a server of its own (repository/) counts as its backups too.
      backups: w.record.repo
        ? [layout.backupDir(id), layout.archiveDir(id), layout.repository(id).dir]
        : [],
    });
    w.measuring = { m, at: this.clock(), moved: { ...this.movement }, urgent };
    w.stale = false;
  }

  /**
   * Walks the measurements in progress, a slice each in turn: first the
   * urgent ones (the disk grew past their next threshold), within bounds of
   * their own, since every millisecond there is disk; then the others,
   * from where the last tick left off, so that a target with millions of
   * entries slows only its own measurement.
   */
  private async walkSlices(): Promise<void> {
    const waiting = [...this.watched.values()].filter((w) => w.measuring);
    const rest = waiting.filter((w) => !w.measuring!.urgent);
    const turn = rest.length > 0 ? this.turn++ % rest.length : 0;
    await this.walkRound(
      waiting.filter((w) => w.measuring!.urgent),
      this.walk.urgent,
      URGENT_SLICE,
    );
    await this.walkRound([...rest.slice(turn), ...rest.slice(0, turn)], this.walk, SLICE);
  }

  private async walkRound(
    targets: Watched[],
    bounds: { entriesPerTick: number; msPerTick: number },
    slice: number,
  ): Promise<void> {
    const deadline = this.clock() + bounds.msPerTick;
    let budget = bounds.entriesPerTick;
    let round = targets;
    while (round.length > 0 && budget > 0 && this.clock() < deadline) {
      const again: Watched[] = [];
      for (const w of round) {
        if (budget <= 0 || this.clock() >= deadline) break;
        if (!w.measuring) continue; // finished by a round before
        const { m } = w.measuring;
        const before = m.entries;
        const done = await m.step(Math.min(budget, slice), deadline, this.clock);
        budget -= m.entries - before;
        if (this.watched.get(w.target.id) !== w) continue; // forgotten meanwhile
        if (done) {
          await this.finish(w);
        } else {
          // What a slice counted already raises the level.
          if (this.settle(w, m.usage(), false)) await this.save(w);
          again.push(w);
        }
      }
      round = again;
    }
  }

  private async finish(w: Watched): Promise<void> {
    const { m, at, moved } = w.measuring!;
    w.measuring = undefined;
    w.measured = { at, moved };
    const usage = m.usage();
    this.o.log.debug(
      { id: w.target.id, usage, entries: m.entries, ms: this.clock() - at },
      'storage measured',
    );
    const changed = this.settle(w, usage, true);
    const before = w.record.usage;
    w.record.usage = usage;
    // The record's usage is what a restart starts from: kept within a margin's slack of the truth.
    if (changed || !before || Math.abs(before.data - usage.data) > w.limits.slack) {
      await this.save(w);
    }
  }

  /**
   * Moves `w` to the level `usage` puts it at; a count still in progress
   * (`complete` false) only ever raises it. Returns whether it changed.
   */
  private settle(w: Watched, usage: StorageUsage, complete: boolean): boolean {
    const { record } = w;
    const from = record.level;
    const next = nextStorageState(from, usage, w.limits, this.disk?.low ?? false);
    if (!complete && rank(next.level) <= rank(from)) return false;
    if (next.level === from && next.why === record.why) return false;
    record.level = next.level;
    if (next.why) record.why = next.why;
    else delete record.why;
    if (!complete) record.usage = usage;
    const view: StorageView = { ...this.viewOf(w), usage };
    this.o.log.info(
      { [w.target.kind === 'service' ? 'serviceId' : 'replicaSetId']: w.target.id, from, ...next },
      'storage level changed',
    );
    this.notify({ target: w.target, change: { from, view } });
    if (next.level === 'stopped') this.stopNow(w);
    return true;
  }

  private stopNow(w: Watched): void {
    w.stoppedAt = this.clock();
    this.o.stop(w.target, w.record.nodes).catch((err: Error) => {
      this.o.log.error(
        { id: w.target.id, err: err.message },
        'could not stop a service over its storage limit',
      );
    });
  }

  /**
   * What each tick enforces besides: a stopped target is stopped again now
   * and then (a converge that raced with the stop may have started it),
   * and the engine is asked to converge a service whose nodes are not at
   * its level yet (a level changed while Basin was down, or while the
   * engine was busy).
   */
  private async enforce(): Promise<void> {
    const now = this.clock();
    for (const w of this.watched.values()) {
      const { level, applied } = w.record;
      if (level === 'stopped') {
        if (now - (w.stoppedAt ?? -Infinity) >= this.periodMs / 2) this.stopNow(w);
        continue;
      }
      if (w.target.kind !== 'service' || level === (applied ?? 'ok')) continue;
      if (now - (w.askedAt ?? -Infinity) < ASK_AGAIN_MS) continue;
      w.askedAt = now;
      this.notify({ target: w.target });
    }
  }

  /** The file system's state: below its reserve, every target over its allowance is stopped. */
  private async see(fs: { size: number; free: number; used: number }): Promise<void> {
    const reserve = reserveOf(this.o.reserve, fs.size);
    if (this.disk) {
      const delta = fs.used - this.disk.used;
      if (delta > 0) this.movement.grown += delta;
      else this.movement.shrunk -= delta;
    }
    const wasLow = this.disk?.low ?? false;
    const low = diskLow(wasLow, fs.free, reserve);
    this.disk = { ...fs, reserve, low };
    if (low === wasLow) return;
    const mb = (n: number) => Math.round(n / 1024 / 1024);
    if (low) {
      this.o.log.warn(
        { root: this.o.layout.root, freeMb: mb(fs.free), reserveMb: mb(reserve) },
        "WARNING: the data directory's file system is below its reserve: new services, forks and " +
          'replica sets are refused, and every service over its storage allowance is stopped, until ' +
          'it has room again (docs/decisions.md, Storage allowances)',
      );
    } else {
      this.o.log.info(
        { freeMb: mb(fs.free), reserveMb: mb(reserve) },
        "the data directory's file system has room again",
      );
    }
    for (const w of this.watched.values()) {
      if (w.record.usage && this.settle(w, w.record.usage, true)) await this.save(w);
    }
  }

  private notify(notice: StorageNotice): void {
    for (const l of this.listeners) l(notice);
  }

  private async save(w: Watched): Promise<void> {
    try {
      await writeStorageRecord(this.o.layout.storageFile(w.target.id), w.record);
    } catch (err) {
      // Its instance directory is not made yet (a service being created), or gone (deleted).
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

const sameNodes = (a: number[], b: number[]) =>
  a.length === b.length && a.every((n, i) => n === b[i]);

/**
 * statfs(2) of `path`: `free` is what an unprivileged user (a tenant) may
 * still take. Synchronous: one system call on the data directory's own
 * file system, twenty times a second, not worth a trip through libuv's
 * thread pool, where it would queue behind the walks that keep those
 * threads busy.
 */
async function fileSystem(path: string): Promise<{ size: number; free: number; used: number }> {
  const s = statfsSync(path);
  return {
    size: s.blocks * s.bsize,
    free: s.bavail * s.bsize,
    used: (s.blocks - s.bfree) * s.bsize,
  };
}
