// pgbench as the benchmarks run it: the person's PG* settings left out, the
// password in the environment (never on a command line), the throughput
// read from its summary.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { pgEnv } from './env.js';

const run = promisify(execFile);

export interface PgbenchRun {
  /** Transactions per second without the initial connection time; NaN for `-i`. */
  tps: number;
}

/** pgbench `args` against the libpq connection string `conn` as tsdbadmin. */
export async function pgbench(conn: string, password: string, args: string[]): Promise<PgbenchRun> {
  const { stdout, stderr } = await run('pgbench', [...args, conn], {
    env: { ...pgEnv(), PGPASSWORD: password },
    maxBuffer: 16 * 1024 * 1024,
  }).catch((err: { stderr?: string }) => {
    throw new Error(`pgbench ${args.join(' ')} failed: ${err.stderr ?? String(err)}`);
  });
  if (args.includes('-i')) return { tps: NaN };
  const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1]);
  if (!Number.isFinite(tps)) throw new Error(`no tps in pgbench's output: ${stdout}${stderr}`);
  return { tps };
}
