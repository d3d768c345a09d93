// An HA service across three hosts, as the fault tests start from it
// (ha-rejoin, ha-etcd-quorum; ha-partition): the namespace topology with a
// control plane on `--driver hosts` and three agents whose etcd members
// form one cluster, then a service with two HA replicas, one synchronous
// (Patroni's strict synchronous mode), READY. What the tests read of it:
// each node's name and direct address (its host's address and its own
// PostgreSQL port, from its Patroni YAML), which node is primary (the one
// not in recovery), psql connection strings with verify-full against the
// installation's services CA, and a writer that commits through one host's
// endpoint recording each acknowledged commit.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { pgClient, psql } from '../e2e/clients.js';
import { type Cluster, cluster, until } from './cluster.js';

const execFileAsync = promisify(execFile);

export interface HaNode {
  /** Patroni's member name, node<i>. */
  name: string;
  /** Its host's address. */
  host: string;
  /** Its PostgreSQL port there. */
  port: number;
  /** Its host's index in the topology (1-based). */
  hostIndex: number;
  /** The address it listens on in its namespace on that host. */
  inner: string;
}

export interface HaService {
  c: Cluster;
  id: string;
  password: string;
  /** The service's endpoint port (HAProxy's on every host). */
  port: number;
  nodes: HaNode[];
  /** psql's connection string to `at`, verify-full. */
  conn(at: { host: string; port: number }): string;
  /** The service's port on host i. */
  endpointAt(i: number): { host: string; port: number };
  /** The node not in recovery, asked of every node that answers. */
  primary(): Promise<HaNode | undefined>;
  /** psql as tsdbadmin. */
  sql(at: { host: string; port: number }, q: string): Promise<string>;
  /** The service's logs as text. */
  logs(): Promise<string>;
  /** The CA file clients verify with. */
  ca: string;
  /** Prints each node's Patroni log and the service's logs (for a failed run). */
  diagnose(): Promise<void>;
}

interface EtcdView {
  quorum: boolean;
  members: { healthy: boolean }[];
}

export async function haService(
  t: TestContext,
  o: { prefix: string; net: number; args?: string[] },
): Promise<HaService> {
  const c = await cluster(t, {
    prefix: o.prefix,
    net: o.net,
    hosts: 3,
    driver: 'hosts',
    args: ['--host-lost-after', '5s', '--reconcile-interval-ms', '1000', ...(o.args ?? [])],
  });
  const { b, cli, address } = c;
  for (const i of [1, 2, 3]) await c.joinAgent(i, { zone: `z${i}`, heartbeatMs: 500 });
  await until(async () => {
    const e = JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
    return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
  }, 300_000);

  // Created with two HA replicas (a create takes no synchronous count), then one synchronous.
  const created = await b.call('POST', b.servicePath(), { name: 'ha', replica_count: 2 });
  assert.equal(created.status, 202, created.text);
  const id = created.body.service_id as string;
  const password = created.body.initial_password as string;
  await b.waitForStatus(id, 'READY', 600_000);
  const setHa = await b.call('POST', `${b.servicePath(id)}/setHA`, { sync_replica_count: 1 });
  assert.equal(setHa.status, 202, setHa.text);
  await b.waitForStatus(id, 'READY', 300_000);

  const nodes = [1, 2, 3].map((i): HaNode => {
    const instances = join(c.host(i).dataDir, 'local', 'instances');
    const mine = readdirSync(instances).filter((d) => d.startsWith(`${id}n`));
    assert.equal(mine.length, 1, `host ${i}: ${mine.join(', ')}`);
    const yml = readFileSync(join(instances, mine[0] as string, 'patroni', 'patroni.yml'), 'utf8');
    const conf = parse(yml) as {
      name: string;
      postgresql: { connect_address: string; listen: string };
    };
    const [host, port] = conf.postgresql.connect_address.split(':') as [string, string];
    assert.equal(host, address(i));
    const inner = conf.postgresql.listen.split(':')[0] as string;
    return { name: conf.name, host, port: Number(port), hostIndex: i, inner };
  });
  const ca = join(c.inst.dataDir, 'services-ca.crt');
  writeFileSync(ca, await cli('host', 'ca'));
  const conn = (at: { host: string; port: number }) =>
    `host=${at.host} port=${at.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=5`;
  const sql = (at: { host: string; port: number }, q: string) => psql(conn(at), password, q);
  const svc = (await b.call('GET', b.servicePath(id))).body;
  const port = svc.endpoint.port as number;
  return {
    c,
    id,
    password,
    port,
    nodes,
    conn,
    endpointAt: (i) => ({ host: address(i), port }),
    sql,
    ca,
    async primary() {
      const inRecovery = await Promise.all(
        nodes.map((n) => sql(n, 'select pg_is_in_recovery()').catch(() => '')),
      );
      const primaries = nodes.filter((_, k) => inRecovery[k] === 'f');
      assert.ok(primaries.length <= 1, `two primaries: ${primaries.map((n) => n.name).join(', ')}`);
      return primaries[0];
    },
    async diagnose() {
      // HA_DIAGNOSE_DIR: a directory that keeps each node's whole Patroni
      // and PostgreSQL logs after the topology is gone.
      const keep = process.env.HA_DIAGNOSE_DIR;
      for (const i of [1, 2, 3]) {
        const instances = join(c.host(i).dataDir, 'local', 'instances');
        for (const d of existsSync(instances) ? readdirSync(instances) : []) {
          if (keep)
            cpSync(join(instances, d, 'patroni'), join(keep, `h${i}-${d}`), {
              recursive: true,
              filter: (src) =>
                !/\/(base|global|pg_wal|pg_xact|pg_multixact|pg_subtrans|pg_commit_ts|pg_logical|sock)(\/|$)/.test(
                  src,
                ),
            });
          const log = join(instances, d, 'patroni', 'patroni.log');
          // Patroni's decisions, without its idle loops and the tracebacks
          // of checks whose client hung up.
          const lines = existsSync(log)
            ? readFileSync(log, 'utf8')
                .split('\n')
                .filter((l) => /^\d{4}-.* (INFO|WARNING|ERROR|CRITICAL): /.test(l))
                .filter(
                  (l) =>
                    !/no action|Exception happened during processing|Traceback|get_postgresql_status|Failed to get list of machines|Reconnection allowed|Retrying on|Request to server/.test(
                      l,
                    ),
                )
            : [];
          if (lines.length > 0)
            console.error(`--- host ${i} ${d}:\n${lines.slice(-150).join('\n')}`);
          // And the node's PostgreSQL messages (its JSON log).
          const logDir = join(instances, d, 'patroni', 'data', 'pgdata', 'log');
          const files = existsSync(logDir)
            ? readdirSync(logDir)
                .filter((f) => f.endsWith('.json'))
                .sort()
            : [];
          const messages = files.flatMap((f) =>
            readFileSync(join(logDir, f), 'utf8')
              .split('\n')
              .filter((l) => l.startsWith('{'))
              .map((l) => {
                const e = JSON.parse(l) as {
                  timestamp?: string;
                  error_severity?: string;
                  message?: string;
                };
                return `${e.timestamp} ${e.error_severity}: ${e.message}`;
              }),
          );
          if (messages.length > 0)
            console.error(`--- host ${i} ${d} PostgreSQL:\n${messages.slice(-40).join('\n')}`);
        }
      }
      const r = await b
        .call('GET', `${b.servicePath(id)}/logs`)
        .catch((e: Error) => ({ text: e.message }));
      console.error(`--- the service's logs:\n${r.text.slice(-6000)}`);
    },
    async logs() {
      const r = await b.call('GET', `${b.servicePath(id)}/logs`);
      assert.equal(r.status, 200, r.text);
      return r.text;
    },
  };
}

export interface Writer {
  /** The values whose insert was acknowledged, in order. */
  acked: number[];
  /** Each acknowledged insert's time (performance.now()) and the address of the server that took it (a node's namespace address). */
  acks: { at: number; server: string }[];
  /** Stops it; resolves once its last statement has ended. */
  stop(): Promise<void>;
}

/**
 * Commits `insert into w values (i)` for i = 1, 2, … through host
 * `viaHost`'s endpoint (verify-full), reconnecting after any error; the
 * table `w (i int primary key)` must exist.
 */
export function writer(t: TestContext, s: HaService, viaHost: number): Writer {
  const acked: number[] = [];
  const acks: { at: number; server: string }[] = [];
  let writing = true;
  t.after(() => {
    writing = false; // a failed test's writer ends with it
  });
  const ca = readFileSync(s.ca, 'utf8');
  const done = (async () => {
    let client: pg.Client | undefined;
    for (let i = 1; writing; i++) {
      try {
        client ??= await pgClient(s.port, s.password, { ca }, { host: s.c.address(viaHost) });
        const r = await client.query(
          'insert into w values ($1) returning inet_server_addr()::text as a',
          [i],
        );
        acked.push(i);
        acks.push({ at: performance.now(), server: String(r.rows[0]?.a).replace(/\/32$/, '') });
      } catch {
        await client?.end().catch(() => undefined);
        client = undefined;
        await sleep(200);
      }
    }
    await client?.end().catch(() => undefined);
  })();
  return {
    acked,
    acks,
    async stop() {
      writing = false;
      await done;
    },
  };
}

/** The acknowledged values missing from `w` as read at `at`. */
export async function missing(
  s: HaService,
  at: { host: string; port: number },
  acked: number[],
): Promise<number[]> {
  const stored = new Set((await s.sql(at, 'select i from w')).split('\n').map(Number));
  return acked.filter((i) => !stored.has(i));
}

/**
 * psql run inside host i's namespace (a client on that machine) as
 * tsdbadmin; killed after `timeoutMs` (an answer that never came is no
 * acknowledgement). Throws psql's message, or "no answer".
 */
export async function psqlOnHost(
  s: HaService,
  i: number,
  at: { host: string; port: number },
  q: string,
  timeoutMs = 3000,
): Promise<string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')));
  try {
    const { stdout } = await execFileAsync(
      'ip',
      [
        'netns',
        'exec',
        s.c.namespace(i),
        'psql',
        s.conn(at),
        '-XAtq',
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        q,
      ],
      { env: { ...env, PGPASSWORD: s.password }, timeout: timeoutMs, killSignal: 'SIGKILL' },
    );
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; killed?: boolean };
    throw new Error(e.killed ? 'no answer' : e.stderr?.trim() || (err as Error).message);
  }
}
