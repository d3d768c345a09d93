// Basin's store of metric samples, in memory and bounded (docs/decisions.md,
// "Metric series"): per series, a ring of raw samples for a day and a ring
// of five-minute summaries for a week, each a typed array of fixed size, so
// a series costs the same bytes on its first day and its hundredth. A query
// reads the raw ring when its window starts within the day, the summaries
// otherwise. Samples of a service Basin forgets go with it (forget).

import { type Summary, mergeRows, summariseRows, valueOf } from './aggregate.js';
import type { Fn, MetricName, SeriesSample } from './catalogue.js';
import { Ring } from './ring.js';

export const RAW_RETENTION_S = 24 * 3600;
export const COARSE_STEP_S = 300;
export const COARSE_RETENTION_S = 7 * 24 * 3600;

const SUMMARY_FIELDS: readonly (keyof Summary)[] = [
  'count',
  'sum',
  'min',
  'max',
  'last',
  'increase',
  'span',
  'p50',
  'p90',
  'p99',
];

/** Where each field of a summary is in a coarse row (after its time). */
const COLUMN = Object.fromEntries(SUMMARY_FIELDS.map((f, k) => [f, k + 1])) as Record<
  keyof Summary,
  number
>;

export interface SeriesQuery {
  name: MetricName;
  fromMs: number;
  toMs: number;
  bucketSeconds: number;
  fn: Fn;
  filters: readonly { key: string; value: string }[];
}

export interface SeriesAnswer {
  labels: Record<string, string>;
  data: { time: string; value: number | null }[];
}

class Series {
  readonly raw: Ring;
  readonly coarse = new Ring(COARSE_RETENTION_S / COARSE_STEP_S, 1 + SUMMARY_FIELDS.length);
  /** The five-minute window the raw samples are filling (rolled up when the next begins). */
  open: number | undefined;

  constructor(
    readonly name: MetricName,
    readonly labels: Record<string, string>,
    rawCapacity: number,
  ) {
    this.raw = new Ring(rawCapacity, 2);
  }

  add(t: number, v: number): void {
    const n = this.raw.length;
    if (n > 0 && t <= this.raw.at(n - 1, 0)) return; // out of order: a clock step back
    const window = Math.floor(t / COARSE_STEP_S);
    if (this.open !== undefined && window > this.open) this.rollUp(this.open);
    this.open = window;
    this.raw.push2(t, v);
    this.raw.dropBefore(t - RAW_RETENTION_S);
    this.coarse.dropBefore(t - COARSE_RETENTION_S);
  }

  private rollUp(window: number): void {
    const start = window * COARSE_STEP_S;
    const s = this.rawSummary(start, start + COARSE_STEP_S);
    if (s === null) return;
    this.coarse.push([start, ...SUMMARY_FIELDS.map((f) => s[f])]);
  }

  /** The summary of raw samples in [from, to), with the step from the sample before, read in place. */
  rawSummary(from: number, to: number, percentiles = true): Summary | null {
    const raw = this.raw;
    const first = raw.firstAtOrAfter(from);
    const end = raw.firstAtOrAfter(to);
    const before = first > 0 ? { t: raw.at(first - 1, 0), v: raw.at(first - 1, 1) } : undefined;
    return summariseRows(
      end - first,
      (i) => raw.at(first + i, 0),
      (i) => raw.at(first + i, 1),
      before,
      percentiles,
    );
  }

  /** The merge of the five-minute summaries starting in [from, to), read in place. */
  coarseSummary(from: number, to: number, percentiles = true): Summary | null {
    const coarse = this.coarse;
    const first = coarse.firstAtOrAfter(from);
    const end = coarse.firstAtOrAfter(to);
    return mergeRows(end - first, (i, f) => coarse.at(first + i, COLUMN[f]), percentiles);
  }

  get bytes(): number {
    return this.raw.bytes + this.coarse.bytes;
  }
}

export class SeriesStore {
  private readonly services = new Map<string, Map<string, Series>>();
  private readonly rawCapacity: number;

  /** `intervalMs`: how often samples come, which sizes the raw ring (a day of them). */
  constructor(intervalMs: number) {
    this.rawCapacity = Math.ceil((RAW_RETENTION_S * 1000) / intervalMs) + 1;
  }

  /** Records one sampling of a service's nodes, taken at `atMs`. */
  record(serviceId: string, atMs: number, samples: readonly SeriesSample[]): void {
    let series = this.services.get(serviceId);
    if (series === undefined) this.services.set(serviceId, (series = new Map()));
    const t = atMs / 1000;
    for (const s of samples) {
      if (!Number.isFinite(s.value)) continue;
      const key = seriesKey(s.name, s.labels);
      let one = series.get(key);
      if (one === undefined) {
        one = new Series(s.name, { ...s.labels }, this.rawCapacity);
        series.set(key, one);
      }
      one.add(t, s.value);
    }
  }

  forget(serviceId: string): void {
    this.services.delete(serviceId);
  }

  /** Forgets every service not in `ids` (deleted while Basin looked away). */
  keepOnly(ids: ReadonlySet<string>): void {
    for (const id of this.services.keys()) if (!ids.has(id)) this.services.delete(id);
  }

  has(serviceId: string): boolean {
    return this.services.has(serviceId);
  }

  /** The names of the series a service has samples of, sorted. */
  available(serviceId: string): MetricName[] {
    const names = new Set<MetricName>();
    for (const s of this.services.get(serviceId)?.values() ?? []) names.add(s.name);
    return [...names].sort();
  }

  /** The last raw sample of each of the service's series of `name` (Prometheus gauges). */
  latest(serviceId: string, name: MetricName): { labels: Record<string, string>; value: number }[] {
    const out: { labels: Record<string, string>; value: number }[] = [];
    for (const s of this.services.get(serviceId)?.values() ?? []) {
      const n = s.raw.length;
      if (s.name === name && n > 0)
        out.push({ labels: { ...s.labels }, value: s.raw.at(n - 1, 1) });
    }
    return out;
  }

  /** The label keys the service's series of `name` carry. */
  labelKeys(serviceId: string, name: MetricName): Set<string> {
    const keys = new Set<string>();
    for (const s of this.services.get(serviceId)?.values() ?? [])
      if (s.name === name) for (const k of Object.keys(s.labels)) keys.add(k);
    return keys;
  }

  /** Bytes the service's series hold (their rings' fixed sizes). */
  bytes(serviceId: string): number {
    let total = 0;
    for (const s of this.services.get(serviceId)?.values() ?? []) total += s.bytes;
    return total;
  }

  /**
   * Every series of `q.name` whose labels match all filters, one value per
   * bucket (the request is checked by the caller: commands/service-metrics.ts).
   * `coarse`: read the five-minute summaries rather than the raw samples.
   */
  query(serviceId: string, q: SeriesQuery, coarse: boolean): SeriesAnswer[] {
    const from = q.fromMs / 1000;
    const to = q.toMs / 1000;
    const n = Math.ceil((to - from) / q.bucketSeconds);
    const percentiles = q.fn === 'P50' || q.fn === 'P90' || q.fn === 'P99';
    const out: SeriesAnswer[] = [];
    for (const s of this.services.get(serviceId)?.values() ?? []) {
      if (s.name !== q.name) continue;
      if (!q.filters.every((f) => s.labels[f.key] === f.value)) continue;
      const data: SeriesAnswer['data'] = [];
      for (let b = 0; b < n; b++) {
        const start = from + b * q.bucketSeconds;
        const end = Math.min(to, start + q.bucketSeconds);
        const summary = coarse
          ? s.coarseSummary(start, end, percentiles)
          : s.rawSummary(start, end, percentiles);
        data.push({ time: new Date(start * 1000).toISOString(), value: valueOf(summary, q.fn) });
      }
      out.push({ labels: { ...s.labels }, data });
    }
    return out.sort((a, b) =>
      seriesKey(q.name, a.labels).localeCompare(seriesKey(q.name, b.labels)),
    );
  }
}

/** One string per label set (sorted keys; values are the drivers' node indices and roles). */
function seriesKey(name: string, labels: Readonly<Record<string, string>>): string {
  let key = name;
  for (const k of Object.keys(labels).sort()) key += `\u0000${k}=${labels[k]}`;
  return key;
}
