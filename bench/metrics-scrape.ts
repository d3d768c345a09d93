// The `metrics-scrape` benchmark: GET /metrics on the metrics listener with
// 1,000 services (issue 24: under 100 ms). Basin runs as users run it
// (`node dist/main.js --driver sim --metrics-listen …`); the services are
// made through the API and awaited until the engine's queue is empty, then
// /metrics is scraped one request at a time, as Prometheus does.

import { join } from 'node:path';
import type { BenchContext } from './bench-context.js';
import { claimBenchInstallation, releaseBenchInstallation } from './installations.js';
import { freePort } from '../test/harness/postmaster.js';
import { type BenchOutcome, fixed, heading, median, percentile, table } from './report.js';

const SERVICES = 1000;
const SCRAPES = 50;
const TARGET_MS = 100;

export async function metricsScrape(ctx: BenchContext): Promise<BenchOutcome> {
  heading(`metrics-scrape: GET /metrics with ${SERVICES} services (sim driver)`);
  const metricsPort = await freePort();
  const installation = await claimBenchInstallation(ctx, { driver: 'sim' });
  // The services' ports: a range for 1,000 of them (the sim driver listens on none).
  const basin = await installation
    .start({
      args: [
        '--sim-delay-ms',
        '0',
        '--port-range',
        '20000-29999',
        '--metrics-listen',
        `127.0.0.1:${metricsPort}`,
      ],
      bootstrapKey: 'bench-metrics-scrape-key-0123456789',
      logPath: join(ctx.tmpDir, 'metrics-scrape.log'),
    })
    .catch(async (err: unknown) => {
      await releaseBenchInstallation(installation);
      throw err;
    });
  try {
    const url = `http://127.0.0.1:${metricsPort}/metrics`;
    const path = basin.servicePath();
    let next = 0;
    const creator = async () => {
      while (next < SERVICES) {
        const i = next++;
        const res = await basin.call('POST', path, { name: `svc-${i}` });
        if (res.status !== 202) throw new Error(`create ${i}: ${res.status} ${res.text}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, creator));
    const scrape = async () => {
      const res = await fetch(url);
      const text = await res.text();
      if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${text}`);
      return text;
    };
    // Until every service is READY: the scrape then has its full size.
    const deadline = Date.now() + 300_000;
    for (;;) {
      const text = await scrape();
      const up = text.match(/^basin_service_up\{.*\} 1$/gm)?.length ?? 0;
      if (up >= SERVICES) break;
      if (Date.now() > deadline) throw new Error(`only ${up} of ${SERVICES} services READY`);
      await new Promise((r) => setTimeout(r, 500));
    }
    let bytes = 0;
    for (let i = 0; i < 5; i++) await scrape();
    const ms: number[] = [];
    for (let i = 0; i < SCRAPES; i++) {
      const t0 = performance.now();
      bytes = (await scrape()).length;
      ms.push(performance.now() - t0);
    }
    const sorted = [...ms].sort((a, b) => a - b);
    const p95 = percentile(sorted, 95);
    table(
      ['services', 'scrapes', 'bytes', 'median ms', 'p95 ms', 'max ms'],
      [
        [
          String(SERVICES),
          String(SCRAPES),
          String(bytes),
          fixed(median(ms), 1),
          fixed(p95, 1),
          fixed(sorted[sorted.length - 1] as number, 1),
        ],
      ],
    );
    return {
      headline: `metrics-scrape: p95 ${fixed(p95, 1)} ms for ${SERVICES} services (target < ${TARGET_MS} ms)`,
      metTarget: p95 < TARGET_MS,
    };
  } finally {
    await basin.stop(30_000);
    await releaseBenchInstallation(installation);
  }
}
