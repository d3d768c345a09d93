// What the HA end-to-end tests read of a service's nodes from the host, the
// witness beside the API: which nodes run (their postmaster.pid), a query
// as a node's superuser over its socket, the processes of a node, and a
// writer that remembers which of its commits were acknowledged.

import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Layout } from '../../src/drivers/local/layout.js';
import type { BasinProcess } from './basin-api.js';
import { psql } from './clients.js';

export interface RunningNode {
  index: number;
  pid: number;
  port: number;
  socket: string;
}

/** Each node of service (or replica set) `id` whose postmaster runs, by index. */
export function runningNodes(layout: Layout, id: string): RunningNode[] {
  let names: string[];
  try {
    names = readdirSync(layout.instanceDir(id));
  } catch {
    return [];
  }
  return names
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .sort((a, b) => a - b)
    .flatMap((index) => {
      const ref = { id, node: index };
      const pidFile = `${layout.pgdata(ref)}/postmaster.pid`;
      if (!existsSync(pidFile)) return [];
      const lines = readFileSync(pidFile, 'utf8').split('\n');
      const pid = Number(lines[0]);
      if (!isLive(pid)) return [];
      return [{ index, pid, port: Number(lines[3]), socket: layout.socketDir(ref) }];
    });
}

/** A query as the node's superuser over its socket (root maps to postgres by peer). */
export function superuser(node: { port: number; socket: string }, sql: string): Promise<string> {
  return psql(`host=${node.socket} port=${node.port} user=postgres dbname=postgres`, '', sql);
}

/** The same, in the node's `tsdb` database. */
export function superuserTsdb(node: { port: number; socket: string }, sql: string) {
  return psql(`host=${node.socket} port=${node.port} user=postgres dbname=tsdb`, '', sql);
}

/** Whether `pid` runs (a zombie does not). */
export function isLive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Every live process working in `pgdata` (a postmaster and its children). */
export function clusterPids(pgdata: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`) === pgdata && isLive(pid);
      } catch {
        return false;
      }
    });
}

/**
 * Commits rows numbered from `from` into `w (i)` through `port` until
 * stopped; remembers the acknowledged ones.
 */
export function writer(port: number, password: string, from = 1) {
  const acked: number[] = [];
  let stop = false;
  let client: pg.Client | undefined;
  const done = (async () => {
    for (let i = from; !stop; i++) {
      try {
        if (!client) {
          client = new pg.Client({
            host: '127.0.0.1',
            port,
            user: 'tsdbadmin',
            database: 'tsdb',
            password,
            ssl: { rejectUnauthorized: false },
            connectionTimeoutMillis: 2_000,
            query_timeout: 5_000,
          });
          client.on('error', () => {});
          await client.connect();
        }
        await client.query('INSERT INTO w (i) VALUES ($1)', [i]);
        acked.push(i);
      } catch {
        void client?.end().catch(() => {});
        client = undefined;
        await sleep(50);
      }
    }
    await client?.end().catch(() => {});
  })();
  return {
    acked,
    async stop() {
      stop = true;
      await done;
    },
  };
}

/**
 * What a failed HA test prints: Basin's own lines but its access log (the
 * polls drown everything else in its tail), and the `basin: …` entries of
 * the logs of each of `ids` (services or replica sets).
 */
export async function explain(b: BasinProcess, ids: string[]): Promise<string> {
  const own = b
    .output()
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.includes('"msg":"request"'))
    .slice(-80)
    .join('\n');
  const parts = [`Basin (pid ${b.pid}), its lines but requests:\n${own}`];
  for (const id of ids) {
    const res = await b
      .call('GET', `${b.servicePath(id)}/logs?search=basin`)
      .catch(() => undefined);
    const lines = (res?.body?.logs as string[] | undefined) ?? [];
    parts.push(`basin's entries in the logs of ${id}, newest first:\n${lines.join('\n')}`);
  }
  return parts.join('\n\n');
}
