// Synthetic usage for the sim driver: plausible, deterministic for a given id,
// and slowly varying with the clock, so dashboards and clients polling metrics
// see something alive without any process to sample. Pure arithmetic: cheap.

import type { Metrics, Size } from '../../domain/types.js';
import { hashString, mulberry32 } from './sim-random.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

/** What the sim knows of a resource when asked for its metrics. */
export interface SimMetricsInput {
  /** Seeds the curves: the same id always draws the same ones. */
  id: string;
  size: Size;
  /** A stopped resource has no processes: no memory or CPU, storage unchanged. */
  running: boolean;
  /** When the resource's data started growing (its creation). */
  sinceMs: number;
  nowMs: number;
}

/**
 * Usage now. Memory stays within the size (64-256 MB for shared sizes), CPU
 * below the size's allowance (below 250 millicores for shared sizes), and
 * storage grows from ~30 MB by a few MB an hour. Values drift over minutes
 * (two slow sine waves with per-id phases), not from one call to the next.
 */
export function simMetrics(input: SimMetricsInput): Metrics {
  const rng = mulberry32(hashString(`metrics:${input.id}`));
  const baseline = rng();
  const phaseA = rng() * 2 * Math.PI;
  const phaseB = rng() * 2 * Math.PI;
  const growthMbPerHour = 0.5 + rng() * 4.5;
  const initialMb = 28 + rng() * 6;

  const ageHours = Math.max(0, input.nowMs - input.sinceMs) / HOUR_MS;
  const storageMb = round1(initialMb + growthMbPerHour * ageHours);
  if (!input.running) return { memoryMb: 0, milliCpu: 0, storageMb };

  const t = input.nowMs;
  // In [0, 1]: a 37-minute swell plus a 7-minute ripple.
  const load =
    0.5 +
    0.35 * Math.sin((2 * Math.PI * t) / (37 * MINUTE_MS) + phaseA) +
    0.15 * Math.sin((2 * Math.PI * t) / (7 * MINUTE_MS) + phaseB);

  const { size } = input;
  if (size.shared) {
    return {
      memoryMb: Math.round(64 + 192 * (0.4 * baseline + 0.6 * load)),
      milliCpu: Math.round(5 + 240 * load * load),
      storageMb,
    };
  }
  const memoryLimitMb = size.memoryGbs * 1024;
  return {
    memoryMb: Math.round(memoryLimitMb * (0.15 + 0.2 * baseline + 0.4 * load)),
    milliCpu: Math.round(size.cpuMillis * (0.02 + 0.6 * load * load)),
    storageMb,
  };
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}
