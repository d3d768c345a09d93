// Usage of the local driver's PostgreSQL nodes, sampled from the live
// processes in the background so that `latest()` (called on every GET of a
// service) is a map lookup.
//
// A node is its postmaster and every descendant (backends, background
// workers, archive_command shells…), found by parent pid in /proc:
// - memoryMb: the tree's proportional resident memory (see memoryKb);
// - milliCpu: the tree's CPU time over the last sampling window, per second of
//   wall time, in thousandths of a core. The first sample of a postmaster has
//   no window yet and reports 0.
// A node without a live postmaster reports no memory and no CPU. Its storage
// is the storage watch's (storage/storage-watch.ts), which measures it
// anyway to hold it to its allowance.
// Nothing here runs on a request: latest() only reads the last sample.

import {
  childrenOf,
  clockTicksPerSecond,
  memoryKb,
  processTree,
  readProcessTable,
  type ProcStat,
} from './proc.js';

export interface MetricsSamplerOptions {
  /** How often start() samples memory and CPU. */
  intervalMs: number;
  /** Milliseconds from a monotonic origin; performance.now by default, injectable for tests. */
  clock?: () => number;
}

/** What a sample says of a node. */
export interface ProcessUsage {
  memoryMb: number;
  milliCpu: number;
}

/** Processes of one tree whose memory is read from smaps_rollup on a sample; the rest are estimated. */
const MAX_MEMORY_READS = 256;

export interface TrackedNode {
  /** The node's data directory: another one for the same key (a failover) starts afresh. */
  pgdata: string;
  /** The postmaster's pid; undefined while the node is stopped. */
  pid: number | undefined;
}

interface NodeState extends TrackedNode {
  key: string;
  /** The tree's total CPU ticks at the last sample, and whose tree it was (pid:startTime). */
  cpu?: { root: string; ticks: number; atMs: number };
  usage?: ProcessUsage;
}

export class MetricsSampler {
  private readonly intervalMs: number;
  private readonly clock: () => number;
  private readonly nodes = new Map<string, NodeState>();
  private timer: NodeJS.Timeout | undefined;
  /** A process sample in progress: timer ticks do not pile up behind a slow one. */
  private sampling: Promise<void> | undefined;

  constructor(options: MetricsSamplerOptions) {
    this.intervalMs = options.intervalMs;
    this.clock = options.clock ?? (() => performance.now());
  }

  /** Starts (or updates) sampling a node; call again when its postmaster's pid changes. */
  track(key: string, node: TrackedNode): void {
    const known = this.nodes.get(key);
    if (known !== undefined && known.pgdata === node.pgdata) {
      known.pid = node.pid; // the CPU baseline follows the postmaster by identity
      return;
    }
    this.nodes.set(key, { key, pgdata: node.pgdata, pid: node.pid });
  }

  untrack(key: string): void {
    this.nodes.delete(key);
  }

  /** The last sample, or undefined before the node's first. */
  latest(key: string): ProcessUsage | undefined {
    return this.nodes.get(key)?.usage;
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

  /** Samples every node now and waits for it (for tests and tools). */
  async sampleNow(): Promise<void> {
    await this.sampling; // one begun before this call may miss what changed since
    await this.sampleOnce();
  }

  private tick(): void {
    void this.sampleOnce();
  }

  /** The process sample in progress, or a new one: two never interleave their CPU baselines. */
  private sampleOnce(): Promise<void> {
    return (this.sampling ??= this.sampleProcesses().finally(() => (this.sampling = undefined)));
  }

  private async sampleProcesses(): Promise<void> {
    try {
      const states = [...this.nodes.values()];
      const anyPid = states.some((s) => s.pid !== undefined);
      const table = anyPid ? await readProcessTable() : new Map<number, ProcStat>();
      const now = this.clock(); // when the CPU times were read
      // Once per sample, not once per node: the table holds every process of the host.
      const children = childrenOf(table);
      await Promise.all(states.map((state) => this.sampleNode(state, table, children, now)));
    } catch {
      // /proc unreadable: keep the previous sample rather than break the timer.
    }
  }

  private async sampleNode(
    state: NodeState,
    table: Map<number, ProcStat>,
    children: Map<number, ProcStat[]>,
    now: number,
  ): Promise<void> {
    const pid = state.pid;
    const tree = pid === undefined ? [] : processTree(table, pid, children);
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
