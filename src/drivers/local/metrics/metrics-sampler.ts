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
//   `storageIntervalMs` (30 s), not on every sample.
// A node without a live postmaster reports no memory and no CPU, but its storage.

import type { Metrics } from '../../../domain/types.js';
import { diskUsageBytes } from './disk-usage.js';
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
}

export interface TrackedNode {
  pgdata: string;
  /** The postmaster's pid; undefined while the node is stopped. */
  pid: number | undefined;
}

interface NodeState extends TrackedNode {
  /** The tree's total CPU ticks at the last sample, and whose tree it was (pid:startTime). */
  cpu?: { root: string; ticks: number; atMs: number };
  usage?: { memoryMb: number; milliCpu: number };
  storage?: { mb: number; atMs: number };
  /** The walk of pgdata in progress, if any. */
  walk?: Promise<void>;
}

const DEFAULT_STORAGE_INTERVAL_MS = 30_000;
const MB = 1024 * 1024;

export class MetricsSampler {
  private readonly intervalMs: number;
  private readonly storageIntervalMs: number;
  private readonly clock: () => number;
  private readonly nodes = new Map<string, NodeState>();
  private timer: NodeJS.Timeout | undefined;
  /** A process sample in progress: timer ticks do not pile up behind a slow one. */
  private sampling: Promise<void> | undefined;

  constructor(options: MetricsSamplerOptions) {
    this.intervalMs = options.intervalMs;
    this.storageIntervalMs = options.storageIntervalMs ?? DEFAULT_STORAGE_INTERVAL_MS;
    this.clock = options.clock ?? (() => performance.now());
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
    const state: NodeState = { pgdata: node.pgdata, pid: node.pid };
    this.nodes.set(key, state);
    this.measureStorage(state);
  }

  untrack(key: string): void {
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

  /** Stops the timer; a sample in progress finishes on its own. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Samples every node now and waits for it, storage walks due or in progress included. */
  async sampleNow(): Promise<void> {
    for (const state of this.nodes.values()) if (this.storageDue(state)) this.measureStorage(state);
    const walks = [...this.nodes.values()].map((state) => state.walk);
    await this.sampling; // one begun before this call may miss what changed since
    await Promise.all([this.sampleOnce(), ...walks]);
  }

  private tick(): void {
    for (const state of this.nodes.values()) if (this.storageDue(state)) this.measureStorage(state);
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

  private measureStorage(state: NodeState): void {
    if (state.walk !== undefined) return;
    state.walk = diskUsageBytes(state.pgdata)
      .then((bytes) => {
        state.storage = { mb: Math.round((bytes / MB) * 10) / 10, atMs: this.clock() };
      })
      .catch(() => {}) // diskUsageBytes tolerates vanishing files; nothing else should escape a timer
      .finally(() => (state.walk = undefined));
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
    const kb = await Promise.all(tree.map((p) => memoryKb(p.pid)));
    state.usage = { memoryMb: Math.round(kb.reduce((a, b) => a + b, 0) / 1024), milliCpu };
  }
}
