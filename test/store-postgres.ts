// Test support: a throwaway PostgreSQL 15 cluster to hold a Basin store
// (test/contract/store.postgres.test.ts, the e2e tests of --store-url).
// Run as root, it runs PostgreSQL as the `postgres` OS user in a temporary
// directory, on a free loopback port with trust authentication (nothing but
// the test can reach 127.0.0.1 here), and removes it all on stop. The
// postmaster is spawned directly rather than through pg_ctl, so that this
// process is its parent and reaps it: this container's init does not reap
// orphans. (Its postmaster helpers are test/harness/postmaster.ts, shared with
// test/local/scratch-postgres.ts.)

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import pg from 'pg';
import { freePort, stopPostmaster, waitPostmasterReady } from './harness/postmaster.js';

const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface StorePostgres {
  port: number;
  /** The postmaster's. */
  pid: number;
  /** postgres://postgres@127.0.0.1:<port>/<database>. */
  url(database?: string): string;
  /** Makes an empty database, and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Runs SQL as the superuser on `database`. */
  sql(text: string, values?: unknown[], database?: string): Promise<pg.QueryResult>;
  /** Stops the cluster (fast shutdown, then SIGKILL) and removes its directory. */
  stop(): Promise<void>;
}

/** A cluster that the test's end stops and removes, whatever the test's outcome. */
export async function startStorePostgres(t: {
  after: TestContext['after'];
}): Promise<StorePostgres> {
  const pgc = await startStoreCluster();
  t.after(() => pgc.stop());
  return pgc;
}

/** A cluster the caller stops (the benchmarks, which have no test context). */
export async function startStoreCluster(): Promise<StorePostgres> {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
  const root = mkdtempSync(join(tmpdir(), 'basin-store-pg-'));
  let child: ChildProcess | undefined;
  const stop = async () => {
    if (child) await stopPostmaster(child);
    rmSync(root, { recursive: true, force: true });
  };
  try {
    chownSync(root, uid, gid);
    const pgdata = join(root, 'pgdata');
    const runAs = { uid, gid, cwd: root, stdio: 'pipe' as const };
    execFileSync(
      join(PG_BIN, 'initdb'),
      [
        ...[
          '-D',
          pgdata,
          '-U',
          'postgres',
          '-A',
          'trust',
          '-N',
          '-E',
          'UTF8',
          '--locale',
          'C.UTF-8',
        ],
        // A natural-language default collation (ICU's en-US: 'a' before 'B'), so that
        // the store's byte-wise sorts are tested, not given.
        ...['--locale-provider', 'icu', '--icu-locale', 'en-US'],
      ],
      runAs,
    );
    const port = await freePort();
    const settings: Record<string, string> = {
      port: String(port),
      listen_addresses: '127.0.0.1',
      unix_socket_directories: root,
      fsync: 'off',
    };
    const args = [
      '-D',
      pgdata,
      ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    ];
    child = spawn(join(PG_BIN, 'postgres'), args, { ...runAs, detached: true });
    const proc = child;
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    proc.stdout?.resume();
    await waitPostmasterReady(pgdata, proc, () => stderr, 60_000);
    const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
    const sql = async (text: string, values: unknown[] = [], database = 'postgres') => {
      const client = new pg.Client({ connectionString: url(database) });
      await client.connect();
      try {
        return await client.query(text, values);
      } finally {
        await client.end();
      }
    };
    return {
      port,
      pid: proc.pid!,
      url,
      sql,
      async createDatabase(name) {
        await sql(`CREATE DATABASE ${name}`);
        return url(name);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
