// What every fn means over the samples of one bucket (pure; series-store.ts
// feeds it). Samples are (time in seconds, value).
//
// - COUNT, SUM, AVG, MIN, MAX, LAST: of the samples whose time is in the bucket.
// - INCREASE: the sum of the rises between consecutive samples whose later
//   sample is in the bucket (so the step from the previous bucket's last
//   sample counts once, here); a fall is a counter reset (a restarted server
//   starts again from zero), so the rise is the new value itself.
// - RATE: INCREASE per second of the time those steps span.
// - P50/P90/P99: nearest rank of the bucket's samples (the value at rank
//   ceil(p·n) of the sorted samples): always a value that was sampled.
// An empty bucket is null, whatever the fn (COUNT too: the vendor's shape).

import type { Fn } from './catalogue.js';

/** A bucket's summary; also what the coarse tier keeps of every five minutes. */
export interface Summary {
  count: number;
  sum: number;
  min: number;
  max: number;
  last: number;
  /** Reset-aware rise over the steps ending in the bucket. */
  increase: number;
  /** Seconds those steps span. */
  span: number;
  p50: number;
  p90: number;
  p99: number;
}

/** The nearest-rank percentile of sorted values (non-empty). */
export function nearestRank(sorted: readonly number[], p: number): number {
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[rank - 1]!;
}

/** The rise from `prev` to `next` of a counter that may have been reset. */
export function rise(prev: number, next: number): number {
  return next >= prev ? next - prev : next;
}

/**
 * Summarises samples `times`/`values` (in time order, all in the bucket);
 * `before` is the sample just before them, if any, for INCREASE and RATE.
 */
export function summarise(
  times: readonly number[],
  values: readonly number[],
  before?: { t: number; v: number },
  percentiles = true,
): Summary | null {
  const n = values.length;
  if (n === 0) return null;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let increase = 0;
  let prev = before;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
    if (prev !== undefined) increase += rise(prev.v, v);
    prev = { t: times[i]!, v };
  }
  const span = times[n - 1]! - (before?.t ?? times[0]!);
  // Sorting is most of a bucket's cost: only when a percentile is asked for.
  const sorted = percentiles ? [...values].sort((a, b) => a - b) : [NaN];
  return {
    count: n,
    sum,
    min,
    max,
    last: values[n - 1]!,
    increase,
    span,
    p50: nearestRank(sorted, 0.5),
    p90: nearestRank(sorted, 0.9),
    p99: nearestRank(sorted, 0.99),
  };
}

/**
 * Merges the five-minute summaries of a bucket of the coarse tier (in time
 * order). Everything but the percentiles is exact; a percentile is the
 * count-weighted nearest rank of the summaries' own percentiles (an
 * approximation, as the vendor's are: docs/decisions.md).
 */
export function merge(parts: readonly Summary[], percentiles = true): Summary | null {
  if (parts.length === 0) return null;
  const out: Summary = {
    count: 0,
    sum: 0,
    min: Infinity,
    max: -Infinity,
    last: parts[parts.length - 1]!.last,
    increase: 0,
    span: 0,
    p50: 0,
    p90: 0,
    p99: 0,
  };
  for (const p of parts) {
    out.count += p.count;
    out.sum += p.sum;
    out.min = Math.min(out.min, p.min);
    out.max = Math.max(out.max, p.max);
    out.increase += p.increase;
    out.span += p.span;
  }
  if (!percentiles) return out;
  for (const key of ['p50', 'p90', 'p99'] as const) {
    const q = key === 'p50' ? 0.5 : key === 'p90' ? 0.9 : 0.99;
    const ranked = parts.map((p) => ({ v: p[key], w: p.count })).sort((a, b) => a.v - b.v);
    const target = Math.max(1, Math.ceil(q * out.count));
    let seen = 0;
    for (const r of ranked) {
      seen += r.w;
      if (seen >= target) {
        out[key] = r.v;
        break;
      }
    }
  }
  return out;
}

/** The value `fn` names of a bucket's summary (null for an empty bucket). */
export function valueOf(s: Summary | null, fn: Fn): number | null {
  if (s === null) return null;
  switch (fn) {
    case 'COUNT':
      return s.count;
    case 'SUM':
      return s.sum;
    case 'AVG':
      return s.sum / s.count;
    case 'MIN':
      return s.min;
    case 'MAX':
      return s.max;
    case 'LAST':
      return s.last;
    case 'INCREASE':
      return s.increase;
    case 'RATE':
      return s.span > 0 ? s.increase / s.span : null;
    case 'P50':
      return s.p50;
    case 'P90':
      return s.p90;
    case 'P99':
      return s.p99;
  }
}
