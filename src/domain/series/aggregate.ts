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
export function nearestRank(sorted: ArrayLike<number>, p: number): number {
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
  return summariseRows(
    values.length,
    (i) => times[i]!,
    (i) => values[i]!,
    before,
    percentiles,
  );
}

/**
 * summarise() over `n` samples read in place (`time(i)`, `value(i)`, in
 * time order): the store reads its ring this way, without copying a
 * bucket's samples into arrays first (the copy was most of a query's
 * garbage).
 */
export function summariseRows(
  n: number,
  time: (i: number) => number,
  value: (i: number) => number,
  before?: { t: number; v: number },
  percentiles = true,
): Summary | null {
  if (n === 0) return null;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let increase = 0;
  let hasPrev = before !== undefined;
  let prev = before?.v ?? 0;
  for (let i = 0; i < n; i++) {
    const v = value(i);
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
    if (hasPrev) increase += rise(prev, v);
    prev = v;
    hasPrev = true;
  }
  const span = time(n - 1) - (before?.t ?? time(0));
  // Sorting is most of a bucket's cost: only when a percentile is asked for
  // (a typed array sorts numerically, in place).
  let sorted: ArrayLike<number> = [NaN];
  if (percentiles) {
    const all = new Float64Array(n);
    for (let i = 0; i < n; i++) all[i] = value(i);
    sorted = all.sort();
  }
  return {
    count: n,
    sum,
    min,
    max,
    last: value(n - 1),
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
  return mergeRows(parts.length, (i, field) => parts[i]![field], percentiles);
}

/**
 * merge() over `n` summaries read in place (`field(i, name)`): the store
 * reads its coarse ring this way, with no object made per summary.
 */
export function mergeRows(
  n: number,
  field: (i: number, name: keyof Summary) => number,
  percentiles = true,
): Summary | null {
  if (n === 0) return null;
  const out: Summary = {
    count: 0,
    sum: 0,
    min: Infinity,
    max: -Infinity,
    last: field(n - 1, 'last'),
    increase: 0,
    span: 0,
    p50: 0,
    p90: 0,
    p99: 0,
  };
  for (let i = 0; i < n; i++) {
    out.count += field(i, 'count');
    out.sum += field(i, 'sum');
    const min = field(i, 'min');
    if (min < out.min) out.min = min;
    const max = field(i, 'max');
    if (max > out.max) out.max = max;
    out.increase += field(i, 'increase');
    out.span += field(i, 'span');
  }
  if (!percentiles) return out;
  for (const key of ['p50', 'p90', 'p99'] as const) {
    const q = key === 'p50' ? 0.5 : key === 'p90' ? 0.9 : 0.99;
    const ranked = Array.from({ length: n }, (_, i) => ({
      v: field(i, key),
      w: field(i, 'count'),
    })).sort((a, b) => a.v - b.v);
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
