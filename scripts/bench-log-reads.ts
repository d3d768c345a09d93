// How much a hostile log directory costs the other tenants (issue 7, hole 3):
// one node's newest log file is 256 MiB without a newline; four clients page
// through it at once while another tenant reads its own small logs. Prints
// the time of a page of each, and the event loop's delay. Not a test: run
//   node --import tsx scripts/bench-log-reads.ts [seconds] [MiB]

import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readNodeLogs } from '../src/drivers/local/logs/read-node-logs.js';

const seconds = Number(process.argv[2] ?? 5);
const mib = Number(process.argv[3] ?? 256);
const T0 = Date.parse('2026-11-22T00:00:00.000Z');
const line = (i: number) =>
  JSON.stringify({
    timestamp: new Date(T0 + i * 1000).toISOString().replace('T', ' ').replace('Z', ' UTC'),
    error_severity: 'LOG',
    message: `entry ${i}: checkpoint complete`,
    detail: 'd'.repeat(200),
  }) + '\n';
const lines = (n: number) => Array.from({ length: n }, (_, i) => line(i)).join('');
const file = (n: number) => `postgresql-20261122-00000${n}.json`;

const root = mkdtempSync(join(tmpdir(), 'basin-bench-logs-'));
const hostile = join(root, 'hostile');
const other = join(root, 'other');
try {
  mkdirSync(hostile);
  mkdirSync(other);
  writeFileSync(join(hostile, file(1)), lines(20));
  writeFileSync(join(hostile, file(2)), Buffer.alloc(mib * 1024 * 1024, 0x78));
  writeFileSync(join(other, file(1)), lines(5000));
  const q = { severities: [], search: [], limit: 500 };

  const pct = (xs: number[], p: number) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? NaN;
  const otherPages = async (until: number) => {
    const times: number[] = [];
    while (performance.now() < until) {
      const t = performance.now();
      await readNodeLogs(other, q, 'other');
      times.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 10));
    }
    return times;
  };
  const hostilePages = async (until: number) => {
    const times: number[] = [];
    let cursor: string | undefined;
    while (performance.now() < until) {
      const t = performance.now();
      const page = await readNodeLogs(hostile, { ...q, cursor }, 'hostile');
      times.push(performance.now() - t);
      cursor = page.nextCursor;
    }
    return times;
  };

  for (const attackers of [0, 4]) {
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const until = performance.now() + seconds * 1000;
    const [mine, ...theirs] = await Promise.all([
      otherPages(until),
      ...Array.from({ length: attackers }, () => hostilePages(until)),
    ]);
    delay.disable();
    const hostileTimes = theirs.flat();
    console.log(
      `${attackers} hostile readers: other tenant's page p50 ${pct(mine!, 0.5).toFixed(1)} ms, ` +
        `p99 ${pct(mine!, 0.99).toFixed(1)} ms (${mine!.length} pages); ` +
        (attackers > 0
          ? `hostile page p50 ${pct(hostileTimes, 0.5).toFixed(1)} ms, p99 ${pct(hostileTimes, 0.99).toFixed(1)} ms (${hostileTimes.length} pages); `
          : '') +
        `event loop delay p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms`,
    );
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
