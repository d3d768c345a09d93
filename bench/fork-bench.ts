// Shared by the fork and backup benchmarks (fork-now, fork-pitr,
// backup-write): a Basin with the local driver and backups that stay out of
// the way unless asked for, a service and a TLS connection to it, and what
// the floors need to know of it (its data directory, stanza and OS user).

import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { InstallationPaths } from '../test/harness/installation-paths.js';
import { LocalBasin, type ServiceBody } from './local-basin.js';

export interface BenchService {
  id: string;
  password: string;
  port: number;
}

/** A Basin whose backups run as `flags` say (by default: one at first READY, then daily). */
export function startForkBasin(
  dataDir: string,
  logPath: string,
  nodeArgs: readonly string[],
  flags: readonly string[] = ['--backup-schedule', '1d', '--pitr-window', '1d'],
): Promise<LocalBasin> {
  // BENCH_REPOSITORY_SERVERS=on: each service's repository with a server of its own.
  const servers = process.env.BENCH_REPOSITORY_SERVERS;
  const all = servers ? [...flags, '--repository-servers', servers] : flags;
  return LocalBasin.start(dataDir, logPath, nodeArgs, all);
}

/** Creates a service and waits until it is READY. */
export async function readyService(basin: LocalBasin, body: ServiceBody): Promise<BenchService> {
  const { id, password } = await basin.createService(body);
  const svc = await basin.waitReady(id, 20, 180_000);
  return { id, password, port: svc.endpoint?.port ?? 0 };
}

/** A fork made by readyFork, and how long it took. */
export interface TimedFork extends BenchService {
  /** From the request to READY. */
  ms: number;
  /** From the request until its data was in place (restored or copied, not yet started). */
  placedMs: number;
}

/**
 * Forks `parent` and waits until the fork is READY, polling GET every
 * `pollMs` as a client would; meanwhile watches the fork's data directory,
 * which the driver renames into place once its data is complete.
 */
export async function readyFork(
  basin: LocalBasin,
  parent: string,
  body: object,
  pollMs = 15,
): Promise<TimedFork> {
  const t0 = performance.now();
  const { id, password } = await basin.fork(parent, body);
  const version = join(basin.pgdata(id), 'PG_VERSION');
  let placedMs: number | undefined;
  const svc = await basin.waitReady(id, pollMs, 600_000, () => {
    placedMs ??= existsSync(version) ? performance.now() - t0 : undefined;
  });
  const ms = performance.now() - t0;
  return { id, password, port: svc.endpoint?.port ?? 0, ms, placedMs: placedMs ?? ms };
}

/** A TLS connection as tsdbadmin; the caller ends it. */
export async function connect(s: BenchService): Promise<pg.Client> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port: s.port,
    user: 'tsdbadmin',
    password: s.password,
    database: 'tsdb',
    ssl: { rejectUnauthorized: false },
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

export async function sql(s: BenchService, text: string): Promise<Record<string, unknown>[]> {
  const c = await connect(s);
  try {
    return (await c.query(text)).rows as Record<string, unknown>[];
  } finally {
    await c.end();
  }
}

/**
 * Waits until the service's first backup has completed: from then on a PITR
 * fork to the future is refused with the recovery window (400), not for
 * want of a backup (409). Returns the window's start.
 */
export async function firstBackup(basin: LocalBasin, id: string): Promise<string> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    const res = await basin.request('POST', `/${id}/forkService`, {
      fork_strategy: 'PITR',
      target_time: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const m = /between (\S+) and now/.exec(res.text);
    if (res.status === 400 && m) return m[1] as string;
    if (res.status !== 409 || Date.now() > deadline) {
      throw new Error(`no backup of ${id}: ${res.status} ${res.text}`);
    }
    await sleep(200);
  }
}

/** Where the local driver keeps a service's things, and its OS user's ids. */
export function serviceFiles(basin: LocalBasin, id: string) {
  const paths = new InstallationPaths(basin.dataDir);
  const pgdata = paths.pgdata(id);
  const st = statSync(pgdata);
  // Where it has a repository server, its backups run as the repository's user.
  const repoUid = existsSync(paths.repository(id)) ? statSync(paths.repository(id)).uid : undefined;
  return { pgdata, uid: st.uid, gid: st.gid, conf: paths.backupConf(id), repoUid };
}
