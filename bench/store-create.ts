// Benchmark: POST /services to READY with the store on PostgreSQL against
// the store in SQLite (issue 20, item 5). Target: PostgreSQL's median within
// 10 % of SQLite's, in the same run.
//
// Two installations as shipped (local driver, real PostgreSQL services):
// one Basin on SQLite (`<data-dir>/basin.db`, the default), and three
// Basins on one PostgreSQL store (test/store-postgres.ts, the harness's
// postmaster; one data directory, a port each). Each builds its template
// and creates and deletes one service first (untimed). Then, in rounds, in
// a shuffled order: a POSTGRES service created through the SQLite Basin;
// one created through a follower of the three and polled there (the
// request queues the operation, whose NOTIFY wakes the leader's engine; the
// leader's status writes reach the follower's read mirror by NOTIFY too);
// and one created through the leader and polled there. Each is timed from
// the POST until GET says READY (polled every 15 ms, as local-create.ts),
// then deleted, untimed, with a `sync` before each timed creation.

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { answering } from '../test/harness/basin-api.js';
import { freePort } from '../test/harness/postmaster.js';
import { startStoreCluster, type StorePostgres } from '../test/store-postgres.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';
import { claimDataDir, installationOf, LocalBasin, releaseDataDir } from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, percentile, table, warn } from './report.js';

const TARGET = 1.1;
const execFileP = promisify(execFile);
const BODY = { cpu_millis: 'shared', memory_gbs: 'shared', addons: [] };

export async function storeCreate(ctx: BenchContext): Promise<BenchOutcome> {
  const rounds = envInt('BENCH_LOCAL_ROUNDS', 7, 1);
  const pollMs = envInt('BENCH_LOCAL_POLL_MS', 15, 1);
  heading('POST /services to READY: the store on PostgreSQL (3 Basins) vs SQLite (1 Basin)');
  const flags = ['--reconcile-interval-ms', '1000'];
  let pgc: StorePostgres | undefined;
  const dirs: string[] = [];
  const basins: LocalBasin[] = [];
  try {
    pgc = await startStoreCluster();
    const url = await pgc.createDatabase('basin');
    const sqliteDir = await claimDataDir(ctx);
    dirs.push(sqliteDir);
    const pgDir = await claimDataDir(ctx);
    dirs.push(pgDir);
    const sqlite = await LocalBasin.start(
      sqliteDir,
      join(ctx.tmpDir, 'store-create-sqlite.log'),
      ctx.settings.basinNodeArgs,
      flags,
    );
    basins.push(sqlite);
    const pgFlags = [...flags, '--store-url', url];
    const first = await LocalBasin.start(
      pgDir,
      join(ctx.tmpDir, 'store-create-pg-0.log'),
      ctx.settings.basinNodeArgs,
      pgFlags,
    );
    basins.push(first);
    const inst = installationOf(pgDir);
    for (let i = 1; i < 3; i++) {
      const port = await freePort();
      const launched = inst.launch({
        args: ['--port', String(port), ...pgFlags],
        bootstrapKey: first.process.bearerKey,
        logPath: join(ctx.tmpDir, `store-create-pg-${i}.log`),
        nodeArgs: ctx.settings.basinNodeArgs,
      });
      const proc = await answering(
        launched,
        `http://127.0.0.1:${port}/v1`,
        first.process.bearerKey,
      );
      basins.push(LocalBasin.of(proc, pgDir));
    }
    const pgBasins = basins.slice(1);
    const leaderPid = await (async () => {
      for (let i = 0; i < 200; i++) {
        const res = await (pgc as StorePostgres).sql('SELECT holder FROM leadership', [], 'basin');
        const pid = Number(
          (res.rows[0] as { holder?: string } | undefined)?.holder?.split('/').pop(),
        );
        if (pgBasins.some((b) => b.process.pid === pid)) return pid;
        await sleep(50);
      }
      throw new Error('no process leads');
    })();
    const leader = pgBasins.find((b) => b.process.pid === leaderPid) as LocalBasin;
    const follower = pgBasins.find((b) => b !== leader) as LocalBasin;

    // Warm-up: each installation's template build, cold caches.
    for (const b of [sqlite, follower]) {
      const warm = await b.create({ name: 'bench-warmup', ...BODY });
      await b.waitReady(warm, pollMs, 180_000);
      await b.deleteAndWait(warm, 60_000);
    }

    const sides = {
      sqlite,
      'postgres, via a follower': follower,
      'postgres, via the leader': leader,
    } as const;
    type Side = keyof typeof sides;
    const series = new Map<Side, number[]>();
    const rows: string[][] = [];
    let n = 0;
    for (let round = 1; round <= rounds; round++) {
      for (const side of shuffled(Object.keys(sides) as Side[])) {
        const b = sides[side];
        await execFileP('sync');
        const t0 = performance.now();
        const id = await b.create({ name: `bench-${++n}`, ...BODY });
        const postMs = performance.now() - t0;
        await b.waitReady(id, pollMs, 60_000);
        const ms = performance.now() - t0;
        await b.deleteAndWait(id, 60_000);
        (series.get(side) ?? series.set(side, []).get(side)!).push(ms);
        rows.push([String(round), side, fixed(ms, 0), fixed(postMs, 0)]);
      }
    }
    console.log(
      `\n${rounds} rounds, a POSTGRES service each (shared size, no addons), GET polled every ` +
        `${pollMs} ms, a sync before each; flags ${flags.join(' ')}; leader pid ${leaderPid}`,
    );
    table(['round', 'store', 'ms', 'POST ms'], rows);
    const summary = [...series].map(([side, xs]) => {
      const sorted = [...xs].sort((a, b) => a - b);
      return [
        side,
        fixed(median(xs), 0),
        fixed(percentile(sorted, 90), 0),
        fixed(sorted[0] ?? NaN, 0),
        fixed(sorted.at(-1) ?? NaN, 0),
      ];
    });
    console.log('');
    table(['store', 'median ms', 'p90 ms', 'min ms', 'max ms'], summary);
    const base = median(series.get('sqlite') ?? []);
    const ratios = (['postgres, via a follower', 'postgres, via the leader'] as const).map(
      (side) => median(series.get(side) ?? []) / base,
    );
    const headline =
      `create-to-READY on the PostgreSQL store: ${ratios.map((r) => r.toFixed(2)).join(' (via a follower), ')} ` +
      `(via the leader) of SQLite's ${fixed(base, 0)} ms (target <= ${TARGET})`;
    console.log(headline);
    const met = ratios.every((r) => r <= TARGET);
    if (!met) warn(`create-to-READY on PostgreSQL is more than ${TARGET}x SQLite's.`);
    return { headline, metTarget: met };
  } finally {
    for (const b of basins) await b.stop().catch(() => undefined);
    for (const d of dirs) await releaseDataDir(d);
    await pgc?.stop();
  }
}

function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
