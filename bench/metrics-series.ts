// The `metrics-series` benchmark (issue 23): a 7-day series of one service
// answered in under 50 ms with 1,000 services' samples stored.
//
// Basin runs in this process (createBasin, sim driver) rather than as
// `node dist/main.js`: a week of samples cannot be waited for, and the only
// way to hold a week's worth is to record synthetic samples straight into
// its series store, which lives in Basin's memory. So 1,000 services are
// created through the API, then each gets a week of 10-second samples of the
// six series a single-node service has (a counter and five gauges), at the
// collector's interval; the request then goes through Fastify (app.inject,
// with its auth, validation and serialisation) as a client's would, against
// GET of the same service as the baseline, in the same run.
//
// Measured in the steady state a real installation with 1,000 services is
// in, not in the bench's own wake: the engine has first finished what the
// 1,000 creates queued (their converges and first backups, which share the
// event loop and took most of the time measured otherwise), and the
// garbage of recording a week in seconds (363 million samples, which a real
// collector records at 600 a second) is collected before the first request.

import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createBasin } from '../src/basin.js';
import { parseConfig } from '../src/config.js';
import type { MetricName } from '../src/domain/series/catalogue.js';
import type { BenchContext } from './bench-context.js';
import { type BenchOutcome, fixed, heading, median, percentile, table } from './report.js';

const SERVICES = 1000;
const DAYS = 7;
const STEP_MS = 10_000;
const REQUESTS = 50;
const TARGET_MS = 50;
const KEY = 'bench-metrics-series-key-0123456789';

const SERIES: readonly MetricName[] = [
  'basin_database_xact_commit_total',
  'basin_database_xact_rollback_total',
  'timescale_cloud_database_num_connections',
  'timescale_cloud_system_cpu_usage_millicores',
  'timescale_cloud_system_memory_usage_bytes',
  'timescale_cloud_system_disk_usage_bytes',
];

export async function metricsSeries(ctx: BenchContext): Promise<BenchOutcome> {
  heading(`metrics-series: a ${DAYS}-day series with ${SERVICES} services' samples stored`);
  const dataDir = mkdtempSync(join(ctx.tmpDir, 'metrics-series-'));
  const basin = await createBasin(
    parseConfig([], {
      BASIN_DATA_DIR: dataDir,
      BASIN_DRIVER: 'sim',
      BASIN_SIM_DELAY_MS: '0',
      BASIN_BOOTSTRAP_API_KEY: KEY,
      BASIN_LOG_LEVEL: 'warn',
      // The collector's interval sizes the raw tier (a day of samples at it): the bench's.
      BASIN_SERIES_INTERVAL_MS: String(STEP_MS),
      BASIN_PORT_RANGE: '20000-29999',
    }),
  );
  try {
    // The collector stops first: a sample of its at the real "now" would make
    // the week's older samples out of order (dropped) for that service.
    await basin.collector.stop();
    const projectId = (await basin.store.projects.list())[0]!.id;
    const call = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
      const res = await basin.app.inject({
        method,
        url,
        headers: {
          authorization: `Bearer ${KEY}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
      if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
      return res.body;
    };
    const ids: string[] = [];
    for (let i = 0; i < SERVICES; i++) {
      const made = JSON.parse(
        await call('POST', `/v1/projects/${projectId}/services`, { name: `svc-${i}` }),
      );
      ids.push(made.service_id as string);
    }

    // The creates' converges and first backups, done before anything is measured.
    const settleStart = performance.now();
    let idle = 0;
    while (idle < 3) {
      if ((await basin.store.operations.listPending()).length === 0) idle++;
      else idle = 0;
      if (performance.now() - settleStart > 600_000)
        throw new Error('the engine still has operations pending after 10 minutes');
      await new Promise((r) => setTimeout(r, 500));
    }
    const settleS = (performance.now() - settleStart) / 1000;

    const now = Date.now();
    const first = now - DAYS * 86_400_000;
    const labels = { node: '0', role: 'primary' };
    const t0 = performance.now();
    for (const [k, id] of ids.entries()) {
      let commits = 0;
      for (let t = first; t <= now; t += STEP_MS) {
        const load = 0.5 + 0.4 * Math.sin(t / 3_600_000 + k);
        commits += Math.round(400 * load);
        basin.series.record(
          id,
          t,
          SERIES.map((name, j) => ({
            name,
            labels,
            value: j === 0 ? commits : j === 1 ? commits / 100 : load * 1000 * (j + 1),
          })),
        );
      }
    }
    const fillS = (performance.now() - t0) / 1000;
    const bytes = basin.series.bytes(ids[0]!);
    // The fill's garbage goes now, not during the timed requests.
    setFlagsFromString('--expose-gc');
    (runInNewContext('gc') as () => void)();

    const id = ids[SERVICES >> 1]!;
    const service = `/v1/projects/${projectId}/services/${id}`;
    const body = {
      name: 'basin_database_xact_commit_total',
      from: new Date(first).toISOString(),
      to: new Date(now).toISOString(),
      bucket_seconds: 3600,
      fn: 'RATE',
    };
    const answer = JSON.parse(await call('POST', `${service}/metrics/series`, body));
    const points = answer[0].data.length as number;
    if (
      answer[0].data.some(
        (d: { value: number | null }) => d.value === null && d !== answer[0].data.at(-1),
      )
    )
      throw new Error('a bucket of the synthetic week is empty');
    const measure = async (f: () => Promise<unknown>) => {
      for (let i = 0; i < 5; i++) await f();
      const ms: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const s = performance.now();
        await f();
        ms.push(performance.now() - s);
      }
      return ms.sort((a, b) => a - b);
    };
    const series = await measure(() => call('POST', `${service}/metrics/series`, body));
    const get = await measure(() => call('GET', service));
    // The machine's load while the requests ran (the one printed first is before the fill).
    const load = loadavg().map((l) => fixed(l, 2));
    const row = (what: string, ms: number[]) => [
      what,
      fixed(median(ms), 2),
      fixed(percentile(ms, 95), 2),
      fixed(ms[ms.length - 1]!, 2),
    ];
    table(
      ['request', 'median ms', 'p95 ms', 'max ms'],
      [
        row(`POST …/metrics/series (7 d, 1 h buckets, ${points} points)`, series),
        row('GET the service (baseline)', get),
      ],
    );
    console.log(
      `engine idle ${fixed(settleS, 1)} s after the creates; ` +
        `filled ${SERVICES} services × ${SERIES.length} series × ${DAYS} days of 10 s samples in ${fixed(fillS, 1)} s; ` +
        `${fixed(bytes / 1024, 0)} KiB a service (${fixed((bytes * SERVICES) / 2 ** 30, 2)} GiB for ${SERVICES}); ` +
        `load average ${load.join(' ')} when measured`,
    );
    const p95 = percentile(series, 95);
    return {
      headline: `metrics-series: p95 ${fixed(p95, 2)} ms for a 7-day series among ${SERVICES} services (GET baseline p95 ${fixed(percentile(get, 95), 2)} ms; target < ${TARGET_MS} ms)`,
      metTarget: p95 < TARGET_MS,
    };
  } finally {
    await basin.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
