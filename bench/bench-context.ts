// What run.ts hands each benchmark: a module of its own, so that the
// benchmarks do not import run.ts, which imports them all.

export interface BenchSettings {
  connections: number;
  rounds: number;
  warmupMs: number;
  durationMs: number;
  initialWarmupMs: number;
  basinNodeArgs: string[];
}

export interface BenchContext {
  settings: BenchSettings;
  /** A directory of this run, removed at the end. */
  tmpDir: string;
}
