// Test support: a throwaway PostgreSQL 15 cluster, for the tests of log reading
// and metrics sampling against the real thing. Run as root, it runs PostgreSQL
// as the `postgres` OS user (PostgreSQL refuses to run as root). The postmaster
// is spawned directly rather than through pg_ctl, so that this process is its
// parent and reaps it: this container's init does not reap orphans.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, stopPostmaster, waitPostmasterReady } from '../harness/postmaster.js';

export const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface ScratchPostgres {
  pgdata: string;
  logDir: string;
  socketDir: string;
  port: number;
  /** The postmaster's. */
  pid: number;
  /** Stops the cluster (fast shutdown, then SIGKILL) and removes its directory. */
  stop(): Promise<void>;
}

/** initdb's and starts a cluster with `settings` (name → value) added to the command line. */
export async function startScratchPostgres(
  settings: Record<string, string> = {},
): Promise<ScratchPostgres> {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
  const root = mkdtempSync(join(tmpdir(), 'basin-scratch-pg-'));
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
      ['-D', pgdata, '-U', 'postgres', '-A', 'trust', '-N'],
      runAs,
    );
    const port = await freePort();
    const all: Record<string, string> = {
      port: String(port),
      listen_addresses: '',
      unix_socket_directories: root,
      logging_collector: 'on',
      log_destination: 'jsonlog',
      log_directory: 'log',
      log_filename: 'postgresql-%Y%m%d-%H%M%S.log',
      log_timezone: 'UTC',
      ...settings,
    };
    const args = ['-D', pgdata, ...Object.entries(all).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
    child = spawn(join(PG_BIN, 'postgres'), args, { ...runAs, detached: true });
    const proc = child;
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    proc.stdout?.resume();
    await waitPostmasterReady(pgdata, proc, () => stderr, 30_000);
    return { pgdata, logDir: join(pgdata, 'log'), socketDir: root, port, pid: proc.pid!, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
