// The PgBouncers Basin runs, as /proc shows them: how the pooler tests see
// that they run (as many as Basin runs on this host), that a restarted
// Basin adopted them (the same pids), and that they are gone once disabled
// or deleted; and their pools, summed over a pooler's processes.

import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { poolerProcessCount } from '../../src/drivers/local/config/pooler-conf.js';
import { pgbouncerInstall } from '../../src/drivers/local/endpoints/pgbouncer-install.js';

/** Live pgbouncer processes run with `ini` (a pooler's pgbouncer.ini). */
export function pgbouncers(ini: string): number[] {
  return pgbouncersWith((argv) => argv.includes(ini));
}

/**
 * Live pgbouncer processes of the pooler whose files are in `dir` (run with
 * any of its inis: pgbouncer.ini, pgbouncer-<i>.ini), sorted by pid.
 */
export function poolerPgbouncers(dir: string): number[] {
  const ini = new RegExp(`^${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/pgbouncer(-\\d+)?\\.ini$`);
  return pgbouncersWith((argv) => ini.test(argv.filter(Boolean).at(-1) ?? '')).sort(
    (a, b) => a - b,
  );
}

function pgbouncersWith(match: (argv: string[]) => boolean): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
      if (/pgbouncer$/.test(argv[0] ?? '') && match(argv) && state !== 'Z') {
        pids.push(Number(name));
      }
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

/** How many processes Basin runs the pooler of a service (or set) of `size` with on this host. */
export async function expectedPoolerProcesses(
  size = { shared: true, cpuMillis: 0 },
): Promise<number> {
  const install = await pgbouncerInstall(() => {});
  return poolerProcessCount(size, os.availableParallelism(), install.peering);
}

type PoolRow = Record<string, string | null> & { database: string };

/**
 * SHOW POOLS of every process of a pooler, each read on its own socket as
 * Basin's stats user (the port reaches one process, the kernel's pick),
 * and summed by database.
 */
export async function showPoolsSummed(
  files: { dir: string; stats: string },
  port: number,
): Promise<Map<string, Record<string, number>>> {
  const { secret } = JSON.parse(readFileSync(files.stats, 'utf8')) as { secret: string };
  const sockets = readdirSync(files.dir).filter((f) => /^s\d+$/.test(f));
  const sums = new Map<string, Record<string, number>>();
  for (const s of sockets) {
    const c = new pg.Client({
      host: join(files.dir, s),
      port,
      user: 'basin_stats',
      password: secret,
      database: 'pgbouncer',
    });
    c.on('error', () => {});
    await c.connect();
    try {
      for (const row of (await c.query<PoolRow>('SHOW POOLS')).rows) {
        const sum = sums.get(row.database) ?? {};
        for (const [k, v] of Object.entries(row)) {
          const n = Number(v);
          if (k !== 'database' && Number.isFinite(n)) sum[k] = (sum[k] ?? 0) + n;
        }
        sums.set(row.database, sum);
      }
    } finally {
      await c.end().catch(() => {});
    }
  }
  return sums;
}
