// The metrics series API (the vendor's getServiceMetricsAvailableSeries and
// getServiceMetricsSeries): checks a request against the catalogue and the
// store's tiers, then reads the series store (domain/series/). Every refusal says
// what to send instead.

import { invalid } from '../domain/errors.js';
import { isRfc3339 } from '../domain/service-rules.js';
import { type Fn, isMetricName, METRICS } from '../domain/series/catalogue.js';
import {
  COARSE_STEP_S,
  RAW_RETENTION_S,
  type SeriesAnswer,
  type SeriesStore,
} from '../domain/series/series-store.js';
import type { ReadView } from '../store/store.js';
import type { Ctx, Principal } from './context.js';
import { loadServiceOrReplica } from './service-lookup.js';

/** The most buckets one answer holds (a week of the coarse tier's five minutes). */
export const MAX_BUCKETS = 2016;

export interface SeriesRequest {
  name: string;
  from: string;
  to: string;
  bucket_seconds?: number | undefined;
  fn?: string | undefined;
  filters?: readonly { key: string; value: string }[] | undefined;
}

type Reads = Pick<ReadView, 'services' | 'replicaSets'>;

export function availableSeries(
  ctx: Ctx,
  reads: Reads,
  p: Principal,
  projectId: string,
  serviceId: string,
): string[] {
  loadServiceOrReplica(reads, p, projectId, serviceId);
  return ctx.series?.available(serviceId) ?? [];
}

export function readSeries(
  ctx: Ctx,
  reads: Reads,
  p: Principal,
  projectId: string,
  serviceId: string,
  r: SeriesRequest,
): SeriesAnswer[] {
  loadServiceOrReplica(reads, p, projectId, serviceId);
  const store: SeriesStore | undefined = ctx.series;
  if (!isMetricName(r.name)) {
    const known = store?.available(serviceId) ?? [];
    throw invalid(
      `Unknown metric series ${JSON.stringify(r.name)}; this service has ${known.length ? known.join(', ') : 'none yet'} (GET …/metrics/available-series).`,
    );
  }
  const def = METRICS[r.name];
  for (const [field, value] of [
    ['from', r.from],
    ['to', r.to],
  ] as const) {
    if (!isRfc3339(value))
      throw invalid(`${field} must be an RFC 3339 date-time, e.g. 2026-06-25T10:00:00Z.`);
  }
  const fromMs = Date.parse(r.from);
  const toMs = Date.parse(r.to);
  if (fromMs >= toMs) throw invalid('from must be before to.');
  const windowS = (toMs - fromMs) / 1000;
  // Older than the raw tier's day: only the five-minute summaries are left.
  const coarse = fromMs < ctx.clock() - RAW_RETENTION_S * 1000;
  const bucket = r.bucket_seconds ?? defaultBucket(windowS, coarse);
  if (!Number.isInteger(bucket) || bucket < 60)
    throw invalid('bucket_seconds must be a whole number of seconds, at least 60.');
  if (coarse && bucket < COARSE_STEP_S)
    throw invalid(
      `Samples older than ${RAW_RETENTION_S / 3600} hours are kept per ${COARSE_STEP_S} seconds: use bucket_seconds of at least ${COARSE_STEP_S} for a window starting before then.`,
    );
  if (Math.ceil(windowS / bucket) > MAX_BUCKETS)
    throw invalid(
      `The window holds ${Math.ceil(windowS / bucket)} buckets of ${bucket} seconds; at most ${MAX_BUCKETS} are answered: use bucket_seconds of at least ${Math.ceil(windowS / MAX_BUCKETS)}, or a shorter window.`,
    );
  let fn: Fn = 'LAST';
  if (r.fn !== undefined) {
    if (!(def.accepts as readonly string[]).includes(r.fn))
      throw invalid(
        def.accepts.length === 0
          ? `${r.name} takes no fn (it is answered with LAST): omit fn.`
          : `${r.name} does not take fn ${r.fn}; it takes ${def.accepts.join(', ')}.`,
      );
    fn = r.fn as Fn;
  }
  for (const f of r.filters ?? []) {
    if (!(def.labels as readonly string[]).includes(f.key))
      throw invalid(
        `${r.name} has no label ${JSON.stringify(f.key)}; its labels are ${def.labels.join(', ')}.`,
      );
  }
  if (store === undefined) return [];
  return store.query(
    serviceId,
    { name: r.name, fromMs, toMs, bucketSeconds: bucket, fn, filters: r.filters ?? [] },
    coarse,
  );
}

/** The vendor's defaults (1 min up to an hour, 1 h up to 30 days, 1 day beyond), held to the tier. */
function defaultBucket(windowS: number, coarse: boolean): number {
  const b = windowS <= 3600 ? 60 : windowS <= 30 * 86400 ? 3600 : 86400;
  return coarse ? Math.max(b, COARSE_STEP_S) : b;
}
