// Usage of the local driver's PostgreSQL nodes, sampled from the live
// processes in the background so that `latest()` (called on every GET of a
// service) is a map lookup.
//
// A node is its postmaster and every descendant (backends, background
// workers, archive_command shells…), found by parent pid in /proc:
// - memoryMb: the tree's proportional resident memory (see memoryKb);
// - milliCpu: the tree's CPU time over the last sampling window, per second of
//   wall time, in thousandths of a core. The first sample of a postmaster has
//   no window yet and reports 0;
// - storageMb: allocated size of the data directory. Walking every file is the
//   expensive part, so it is measured on first track and then every
//   `storageIntervalMs` (30 s), not on every sample. A tenant can fill its
//   data directory with millions of files, so walks go a slice at a time
//   (disk-usage.ts): each timer tick walks at most `walk.entriesPerTick`
//   entries for at most `walk.msPerTick`, taking turns between nodes
//   `walk.entriesPerSlice` at a time, and a node shows the size its last
//   complete walk found meanwhile.
// A node without a live postmaster reports no memory and no CPU, but its storage.
// Nothing here runs on a request: latest() only reads the last sample.

import type { Metrics } from '../../../domain/types.js';
import { DiskUsageWalk } from './disk-usage.js';
import {
  clockTicksPerSecond,
  memoryKb,
  processTree,
  readProcessTable,
  type ProcStat,
} from './proc.js';

export interface MetricsSamplerOptions {
  /** How often start() samples memory and CPU. */
  intervalMs: number;
  /** How often a node's data directory is measured again; 30 s by default. */
  storageIntervalMs?: number;
  /** Milliseconds from a monotonic origin; performance.now by default, injectable for tests. */
  clock?: () => number;
  /** Bounds of the storage walks (STORAGE_WALK by default). */
  walk?: Partial<StorageWalkLimits>;
}

/** How much walking of data directories a timer tick may do (see the top of this file). */
export interface StorageWalkLimits {
  entriesPerTick: number;
  entriesPerSlice: number;
  msPerTick: number;
}

export const STORAGE_WALK: Readonly<StorageWalkLimits> = Object.freeze({
  entriesPerTick: 50_000,
  entriesPerSlice: 10_000,
  msPerTick: 1_000,
});

/** Processes of one tree whose memory is read from smaps_rollup on a sample; the rest are estimated. */
const MAX_MEMORY_READS = 256;

export interface TrackedNode {
  pgdata: string;
  /** The postmaster's pid; undefined while the node is stopped. */
  pid: number | undefined;
}

interface NodeState extends TrackedNode {
  key: string;
  /** The tree's total CPU ticks at the last sample, and whose tree it was (pid:startTime). */
  cpu?: { root: string; ticks: number; atMs: number };
  usage?: { memoryMb: number; milliCpu: number };
  storage?: { mb: number; atMs: number };
  /** The walk of pgdata in progress (queued in `walks`), if any. */
  walk?: DiskUsageWalk;
}

const DEFAULT_STORAGE_INTERVAL_MS = 30_000;
const MB = 1024 * 1024;

export class MetricsSampler {
  private readonly intervalMs: number;
  private readonly storageIntervalMs: number;
  private readonly clock: () => number;
  private readonly walkLimits: StorageWalkLimits;
  private readonly nodes = new Map<string, NodeState>();
  /** Nodes whose walk is in progress, in turn order. */
  private readonly walks: NodeState[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** A process sample in progress: timer ticks do not pile up behind a slow one. */
  private sampling: Promise<void> | undefined;
  /** A pass of storage walks in progress: likewise. */
  private walking: Promise<void> | undefined;

  constructor(options: MetricsSamplerOptions) {
    this.intervalMs = options.intervalMs;
    this.storageIntervalMs = options.storageIntervalMs ?? DEFAULT_STORAGE_INTERVAL_MS;
    this.clock = options.clock ?? (() => performance.now());
    this.walkLimits = { ...STORAGE_WALK, ...options.walk };
  }

  /**
   * Starts (or updates) sampling a node; call again when its postmaster's pid
   * changes. A new node, or a new pgdata, is measured at once in the background.
   */
  track(key: string, node: TrackedNode): void {
    const known = this.nodes.get(key);
    if (known !== undefined && known.pgdata === node.pgdata) {
      known.pid = node.pid; // the CPU baseline follows the postmaster by identity
      return;
    }
    if (known !== undefined) this.dropWalk(known);
    const state: NodeState = { key, pgdata: node.pgdata, pid: node.pid };
    this.nodes.set(key, state);
    this.startWalk(state, true);
    void this.walkPass();
  }

  untrack(key: string): void {
    const state = this.nodes.get(key);
    if (state !== undefined) this.dropWalk(state);
    this.nodes.delete(key);
  }

  /** The last sample, or undefined before the node's first complete sample. */
  latest(key: string): Metrics | undefined {
    const state = this.nodes.get(key);
    if (state?.usage === undefined || state.storage === undefined) return undefined;
    return { ...state.usage, storageMb: state.storage.mb };
  }

  /** Samples every `intervalMs`, starting now; the timer never keeps the process alive. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
    this.tick();
  }

  /** Stops the timer and abandons the walks in progress; a process sample in progress finishes on its own. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const state of this.nodes.values()) this.dropWalk(state);
  }

  /**
   * Samples every node now and waits for it, storage walks due or in
   * progress included, walked to their end whatever their size (for tests
   * and tools; the timer never does this).
   */
  async sampleNow(): Promise<void> {
    for (const state of this.nodes.values()) if (this.storageDue(state)) this.startWalk(state);
    await this.sampling; // one begun before this call may miss what changed since
    await this.walking;
    while (this.walks.length > 0) await this.walkPass(true);
    await this.sampleOnce();
  }

  /** What a timer tick does to storage: starts the walks that are due and walks a bounded pass. */
  walkTick(): Promise<void> {
    for (const state of this.nodes.values()) if (this.storageDue(state)) this.startWalk(state);
    return this.walkPass();
  }

  private tick(): void {
    void this.walkTick();
    void this.sampleOnce();
  }

  /** The process sample in progress, or a new one: two never interleave their CPU baselines. */
  private sampleOnce(): Promise<void> {
    return (this.sampling ??= this.sampleProcesses().finally(() => (this.sampling = undefined)));
  }

  private storageDue(state: NodeState): boolean {
    if (state.walk !== undefined) return false;
    return (
      state.storage === undefined || this.clock() - state.storage.atMs >= this.storageIntervalMs
    );
  }

  /** Queues a new walk of the node's data directory (first in turn for a node never measured). */
  private startWalk(state: NodeState, first = false): void {
    if (state.walk !== undefined) return;
    state.walk = new DiskUsageWalk(state.pgdata);
    if (first) this.walks.unshift(state);
    else this.walks.push(state);
  }

  private dropWalk(state: NodeState): void {
    const i = this.walks.indexOf(state);
    if (i >= 0) this.walks.splice(i, 1);
    void state.walk?.close();
    state.walk = undefined;
  }

  /**
   * Walks the queued data directories in turn, each for a slice, until the
   * tick's entries or time are spent (or, `toTheEnd`, until all are done);
   * a finished walk becomes the node's storage.
   */
  private walkPass(toTheEnd = false): Promise<void> {
    return (this.walking ??= this.walkSlices(toTheEnd).finally(() => (this.walking = undefined)));
  }

  private async walkSlices(toTheEnd: boolean): Promise<void> {
    const limits = this.walkLimits;
    const deadline = toTheEnd ? Infinity : this.clock() + limits.msPerTick;
    let budget = toTheEnd ? Infinity : limits.entriesPerTick;
    while (budget > 0 && this.clock() < deadline) {
      const state = this.walks.shift();
      const walk = state?.walk;
      if (state === undefined || walk === undefined) return;
      const before = walk.entries;
      let done: boolean;
      try {
        done = await walk.step(Math.min(budget, limits.entriesPerSlice), deadline, this.clock);
      } catch {
        done = true; // the walk tolerates vanishing files; nothing else should stop the sampler
        await walk.close();
      }
      budget -= walk.entries - before;
      if (this.nodes.get(state.key) !== state || state.walk !== walk) continue; // untracked meanwhile
      if (done) {
        state.storage = { mb: Math.round((walk.bytes / MB) * 10) / 10, atMs: this.clock() };
        state.walk = undefined;
      } else {
        this.walks.push(state);
      }
    }
  }

  private async sampleProcesses(): Promise<void> {
    try {
      const states = [...this.nodes.values()];
      const anyPid = states.some((s) => s.pid !== undefined);
      const table = anyPid ? await readProcessTable() : new Map<number, ProcStat>();
      const now = this.clock(); // when the CPU times were read
      await Promise.all(states.map((state) => this.sampleNode(state, table, now)));
    } catch {
      // /proc unreadable: keep the previous sample rather than break the timer.
    }
  }

  private async sampleNode(
    state: NodeState,
    table: Map<number, ProcStat>,
    now: number,
  ): Promise<void> {
    const pid = state.pid;
    const tree = pid === undefined ? [] : processTree(table, pid);
    const root = tree[0];
    if (root === undefined || root.state === 'Z' || root.state === 'X') {
      state.cpu = undefined;
      state.usage = { memoryMb: 0, milliCpu: 0 };
      return;
    }
    const identity = `${root.pid}:${root.startTime}`;
    const ticks = tree.reduce((sum, p) => sum + p.cpuTicks, 0);
    const prev = state.cpu;
    let milliCpu = 0;
    if (prev !== undefined && prev.root === identity && now > prev.atMs) {
      const cpuMs = ((ticks - prev.ticks) * 1000) / clockTicksPerSecond();
      // Negative only when a child's time left the tree (reaped by someone else).
      milliCpu = Math.max(0, Math.round((cpuMs / (now - prev.atMs)) * 1000));
    }
    state.cpu = { root: identity, ticks, atMs: now };
    // smaps_rollup walks a process's page tables: read it for so many
    // processes only, and count the others at their average.
    const read = await Promise.all(tree.slice(0, MAX_MEMORY_READS).map((p) => memoryKb(p.pid)));
    const kb = (read.reduce((a, b) => a + b, 0) * tree.length) / read.length;
    state.usage = { memoryMb: Math.round(kb / 1024), milliCpu };
  }
}
