// What the HA end-to-end tests read of a service's nodes from the host, the
// witness beside the API: which nodes run (their postmaster.pid), a query
// as a node's superuser over its socket, the processes of a node, and a
// writer that remembers which of its commits were acknowledged.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Layout } from '../../src/drivers/local/layout.js';
import type { BasinProcess } from '../harness/basin-api.js';
import { conninfo, psql } from './clients.js';

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

/** The running node of service `id` whose data is a primary's (no standby.signal). */
export function primaryNode(layout: Layout, id: string): RunningNode {
  const primary = runningNodes(layout, id).find(
    (n) => !existsSync(`${layout.pgdata({ id, node: n.index })}/standby.signal`),
  );
  assert.ok(primary, `service ${id} has a running primary`);
  return primary;
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
 * Writers still running: stopped when the test file's tests end, so a test
 * that failed before stopping its own does not keep the process alive.
 */
const loops = new Set<() => void>();
after(() => loops.forEach((end) => end()));

/**
 * Commits rows numbered from `from` into `w (i)` through `port` until
 * stopped; remembers the acknowledged ones.
 */
export function writer(port: number, password: string, from = 1) {
  const acked: number[] = [];
  let stop = false;
  loops.add(() => (stop = true));
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
      .call('GET', `${b.servicePath(id)}/logs?source=basin`)
      .catch(() => undefined);
    const lines = (res?.body?.logs as string[] | undefined) ?? [];
    parts.push(`basin's entries in the logs of ${id}, newest first:\n${lines.join('\n')}`);
  }
  return parts.join('\n\n');
}

/** The SQL syncHaService runs by default: the table writer() writes to. */
const WRITER_TABLE = 'CREATE TABLE w (i int PRIMARY KEY)';

/**
 * A shared POSTGRES service with one HA replica, made synchronous, READY,
 * with `setup` run on it (by default an empty table `w (i int PRIMARY KEY)`
 * for writer()); its id goes into `ids` (for explain()).
 */
export async function syncHaService(
  b: BasinProcess,
  name: string,
  ids: string[] = [],
  setup = WRITER_TABLE,
): Promise<{ id: string; password: string; port: number }> {
  const created = await b.call('POST', b.servicePath(), {
    name,
    addons: [],
    cpu_millis: 'shared',
    memory_gbs: 'shared',
    replica_count: 1,
  });
  assert.equal(created.status, 202, created.text);
  const id: string = created.body.service_id;
  ids.push(id);
  const password: string = created.body.initial_password;
  const port: number = (await b.waitForStatus(id, 'READY', 180_000)).endpoint.port;
  const sync = await b.call('POST', `${b.servicePath(id)}/setHA`, { sync_replica_count: 1 });
  assert.equal(sync.status, 202, sync.text);
  await b.waitForStatus(id, 'READY', 120_000);
  await psql(conninfo(port), password, setup);
  return { id, password, port };
}

/** Basin's own entries of a service's (or a set's) logs, newest first. */
export async function basinLogs(b: BasinProcess, id: string): Promise<string[]> {
  const res = await b.call('GET', `${b.servicePath(id)}/logs?source=basin`);
  assert.equal(res.status, 200, res.text);
  return res.body.logs as string[];
}

/** The service's read replica set `rsId` as listed, undefined once gone. */
export async function replicaSet(b: BasinProcess, serviceId: string, rsId: string): Promise<any> {
  const res = await b.call('GET', `${b.servicePath(serviceId)}/replicaSets`);
  assert.equal(res.status, 200, res.text);
  return (res.body as { id: string }[]).find((r) => r.id === rsId);
}

/**
 * A read replica set `name` of two 500-millis nodes on the service: answered
 * 202 `creating`, then listed as active. Its id goes into `ids` (for explain()).
 */
export async function activeReplicaSet(
  b: BasinProcess,
  serviceId: string,
  name: string,
  ids: string[] = [],
): Promise<{ id: string; port: number }> {
  const made = await b.call('POST', `${b.servicePath(serviceId)}/replicaSets`, {
    name,
    nodes: 2,
    cpu_millis: 500,
    memory_gbs: 2,
  });
  assert.equal(made.status, 202, made.text);
  assert.equal(made.body.status, 'creating');
  const id: string = made.body.id;
  ids.push(id);
  await replicaSetActive(b, serviceId, id);
  return { id, port: made.body.endpoint.port };
}

/** Waits until the service's read replica set `rsId` is listed as active. */
export async function replicaSetActive(
  b: BasinProcess,
  serviceId: string,
  rsId: string,
): Promise<void> {
  await b.waitFor(
    async () => (await replicaSet(b, serviceId, rsId))?.status === 'active',
    'the replica set to be active',
    180_000,
  );
}
