// Synthetic usage for the sim driver: plausible, deterministic for a given id,
// and slowly varying with the clock, so dashboards and clients polling metrics
// see something alive without any process to sample. Pure arithmetic: cheap.
// Every GET of a service asks (the local driver answers from its last sample,
// a lookup), so what depends only on the id, and the parsed creation time,
// are kept rather than worked out again on every call (~0.3 µs a GET). So is
// the last answer for each id: asked again with the same inputs (a service
// polled many times within one millisecond of the clock, as the service-get
// benchmark does), the answer is the same object, as the local driver's latest
// sample is, instead of two sines worked out again (~0.3 µs a GET).

import type { SeriesSample } from '../../domain/series/catalogue.js';
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
  const last = lastAnswers.get(input.id);
  if (
    last !== undefined &&
    last.nowMs === input.nowMs &&
    last.sinceMs === input.sinceMs &&
    last.running === input.running &&
    last.size === input.size
  ) {
    return last.metrics;
  }
  const metrics = Object.freeze(compute(input));
  if (lastAnswers.size >= KEPT) lastAnswers.clear();
  lastAnswers.set(input.id, { ...input, metrics });
  return metrics;
}

function compute(input: SimMetricsInput): Metrics {
  const { baseline, phaseA, phaseB, growthMbPerHour, initialMb } = curvesOf(input.id);

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

interface Curves {
  baseline: number;
  phaseA: number;
  phaseB: number;
  growthMbPerHour: number;
  initialMb: number;
}

/** Kept per id; emptied when this many ids were seen (ids of deleted resources go too). */
const KEPT = 10_000;
const curves = new Map<string, Curves>();
const createdMs = new Map<string, number>();
/** The last answer per id, with the inputs it was worked out from (`size` compared by identity). */
const lastAnswers = new Map<string, SimMetricsInput & { metrics: Metrics }>();

/** What the id's seed draws: the same numbers every time. */
function curvesOf(id: string): Curves {
  let c = curves.get(id);
  if (c === undefined) {
    const rng = mulberry32(hashString(`metrics:${id}`));
    c = {
      baseline: rng(),
      phaseA: rng() * 2 * Math.PI,
      phaseB: rng() * 2 * Math.PI,
      growthMbPerHour: 0.5 + rng() * 4.5,
      initialMb: 28 + rng() * 6,
    };
    if (curves.size >= KEPT) curves.clear();
    curves.set(id, c);
  }
  return c;
}

/** Date.parse of a creation time, kept. */
export function parseCreatedAt(createdAt: string): number {
  let ms = createdMs.get(createdAt);
  if (ms === undefined) {
    ms = Date.parse(createdAt);
    if (createdMs.size >= KEPT) createdMs.clear();
    createdMs.set(createdAt, ms);
  }
  return ms;
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

/**
 * One sampling of the metric series of a sim service (Driver.sampleSeries):
 * the usage above on its primary, client connections that follow its CPU,
 * transaction counters that only grow (about 30-40 commits a second since
 * creation, one rollback in a hundred), and a few KB of lag per standby.
 */
export function simSeries(
  input: SimMetricsInput,
  nodes: readonly { index: number; role: 'primary' | 'standby' }[],
): SeriesSample[] {
  if (!input.running) return [];
  const m = simMetrics(input);
  const { baseline } = curvesOf(input.id);
  const ageS = Math.max(0, input.nowMs - input.sinceMs) / 1000;
  const commits = Math.round(ageS * (30 + 10 * baseline));
  const connections = Math.round(2 + m.milliCpu / 25);
  const out: SeriesSample[] = [];
  for (const n of nodes) {
    const labels = { node: String(n.index), role: n.role === 'primary' ? 'primary' : 'replica' };
    const share = n.role === 'primary' ? 1 : 0.1;
    out.push(
      {
        name: 'timescale_cloud_database_num_connections',
        labels,
        value: Math.round(connections * share),
      },
      { name: 'basin_database_xact_commit_total', labels, value: Math.round(commits * share) },
      {
        name: 'basin_database_xact_rollback_total',
        labels,
        value: Math.round((commits * share) / 100),
      },
    );
    if (n.role === 'primary') {
      out.push(
        { name: 'timescale_cloud_system_cpu_usage_millicores', labels, value: m.milliCpu },
        {
          name: 'timescale_cloud_system_memory_usage_bytes',
          labels,
          value: m.memoryMb * 1024 * 1024,
        },
        {
          name: 'timescale_cloud_system_disk_usage_bytes',
          labels,
          value: Math.round(m.storageMb * 1024 * 1024),
        },
      );
    } else {
      out.push(
        { name: 'basin_replication_lag_bytes', labels, value: Math.round(4096 * (1 + baseline)) },
        { name: 'basin_replication_lag_seconds', labels, value: 0.05 * (1 + baseline) },
      );
    }
  }
  return out;
}
