// A read replica set of an HA service across hosts when its nodes' hosts
// are drained (docs/decisions.md, "Read replica sets across hosts" and
// "Draining a host"), on the namespace topology: four database hosts
// h1-h4, each in a zone of its own (etcd on three of them), no repository
// host (neither an HA service nor its sets need one). An HA service of two
// nodes (Patroni) on two of them (S1, S2), and a set of two nodes on the
// other two (R1, R2), which placement leaves it.
//
// 1. `basin host drain R1`: the set's node there is rebuilt on R2 (the
//    only host that is not the service's), while every read through the
//    set's endpoint (verify-full) answers; R1 is DRAINED and keeps nothing
//    of it (files, OS user); the primary holds no slot of the set's (an HA
//    service's set has none: Patroni owns its slots) and one WAL sender
//    per set node; a row written after the move is read back through the
//    set's endpoint, on R1's address too; the service keeps its primary
//    and its standby.
// 2. `basin host drain R1 --undo`, then `basin host drain R2`: both nodes
//    move back to R1, one at a time. The control plane is killed with
//    kill -9 while the first one moves (its row names R1 and the host it
//    left), and started again with the same flags: the moves complete
//    from the rows alone, exactly one copy of each node is left (on R1,
//    one WAL sender each on the primary), R2 is DRAINED, and a row written
//    then is read back through the set's endpoint.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';
import { haServiceWithSet } from './ha-set-topology.js';

const PREFIX = 'rrha';
/** The topology's subnet, 10.231.24.0/24: its own, as the tests run in parallel. */
const NET = 24;
const HOSTS = [1, 2, 3, 4];
// No host is lost here: a long --host-lost-after keeps a loaded machine's
// late heartbeats from taking a host for lost mid-drain (a delete then
// skips its endpoint: docs/decisions.md, HA across hosts, to come).
const ARGS = ['--host-lost-after', '30s', '--reconcile-interval-ms', '1000'];

const step = (what: string) =>
  console.log(`replica-sets-ha-drain: ${new Date().toISOString()} ${what}`);

test(
  'a read replica set of an HA service: its node moves off a drained host while the set serves; a kill -9 of the control plane in the middle of a move, and the move completes',
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: HOSTS.length,
      driver: 'hosts',
      args: ARGS,
    });
    const { cli } = c;
    let b = c.b;
    const set = await haServiceWithSet(c, HOSTS, step);
    const { id, password, port, rsId, rsPort, conn, stateOf, rows: rowsOf } = set;
    const listed = () => set.listed(b);
    const S = (await rowsOf(id)).map((r) => r.host).sort();
    const [R1, R2] = (await rowsOf(rsId)).map((r) => r.host).sort() as [number, number];
    assert.equal(S.length, 2);
    assert.ok(
      R1 !== R2 && !S.includes(R1) && !S.includes(R2),
      `service on h${S.join(', h')}, set on h${R1}, h${R2}`,
    );
    const via = S[0] as number;
    step(`the service on h${S.join(', h')}, the set on h${R1}, h${R2}`);
    const setDirs = (i: number) => {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      return existsSync(instances)
        ? readdirSync(instances).filter((d) => d.startsWith(`${rsId}n`))
        : [];
    };
    const sql = (i: number, p: number, q: string) => psql(conn(i, p), password, q);
    await sql(via, port, "CREATE TABLE r (v text); INSERT INTO r VALUES ('a')");
    // What the primary holds for the set: slots (none: Patroni owns its
    // cluster's) and WAL senders (one per node, by application_name).
    const onPrimary = () =>
      sql(
        via,
        port,
        `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'rs\\_%') || ':' || ` +
          `coalesce((SELECT string_agg(application_name, ',' ORDER BY application_name) FROM pg_stat_replication WHERE state = 'streaming' AND application_name LIKE 'rs\\_%'), '')`,
      );
    const senders = `0:rs_${rsId}_0,rs_${rsId}_1`;
    await until(async () => (await onPrimary()) === senders, 120_000);
    // The service keeps a primary and a streaming standby (Patroni's).
    const standbys = () =>
      sql(via, port, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name LIKE 'node%'"); // prettier-ignore

    // Reads through the set's endpoint on a host of the service's (never
    // drained here), for as long as `reading`.
    let reading = true;
    let reads = 0;
    const failures: string[] = [];
    const reader = (async () => {
      while (reading) {
        try {
          assert.equal(await sql(via, rsPort, "SELECT count(*) > 0 FROM r WHERE v = 'a'"), 't');
          reads++;
        } catch (err) {
          failures.push(`${new Date().toISOString()} ${(err as Error).message}`);
          await sleep(100);
        }
      }
    })();
    const stopReading = async (what: string) => {
      reading = false;
      await reader;
      t.diagnostic(`${what}: ${reads} reads through the set, ${failures.length} failed`);
    };

    // 1. R1 drained: its node is rebuilt on R2 while the other serves.
    const out = await cli('host', 'drain', `h${R1}`);
    assert.match(out, /1 node\(s\) of 1 read replica set\(s\) move/);
    await until(async () => (await stateOf(R1)) === 'DRAINED', 240_000);
    await until(async () => {
      const rows = await rowsOf(rsId);
      return rows.length === 2 && rows.every((r) => r.host === R2 && r.from === null);
    }, 240_000);
    step(`h${R1} DRAINED, both set nodes on h${R2}`);
    // Both nodes serve (each answers from its own namespace's address).
    const seen = new Set<string>();
    await until(async () => {
      seen.add(await sql(via, rsPort, 'SELECT inet_server_addr()'));
      return seen.size === 2;
    }, 120_000);
    await stopReading('step 1');
    assert.deepEqual(failures, [], 'every read through the set answered during the move');
    assert.ok(reads > 0);
    // Nothing of it is left on R1; the primary streams to each node once.
    await until(
      async () =>
        setDirs(R1).length === 0 && !c.users(R1).some((u) => u.name.startsWith(`basin-${rsId}`)),
      120_000,
    );
    assert.deepEqual(setDirs(R2).sort(), [`${rsId}n0`, `${rsId}n1`]);
    await until(async () => (await onPrimary()) === senders, 120_000);
    // A row written after the move is read back through the set's
    // endpoint, on a host of the service's and on the drained host.
    await sql(via, port, "INSERT INTO r VALUES ('b')");
    for (const at of [via, R1]) {
      await until(
        async () =>
          (await sql(at, rsPort, "SELECT string_agg(v, ',' ORDER BY v) FROM r").catch(() => '')) === 'a,b', // prettier-ignore
        60_000,
      );
    }
    assert.equal((await listed())?.status, 'active');
    assert.equal(await standbys(), '1');
    assert.equal((await b.call('GET', b.servicePath(id))).body.status, 'READY');
    assert.deepEqual(
      (await rowsOf(id)).map((r) => r.host).sort(),
      S,
      "the service's nodes stay where they are",
    );
    const setLogs = async () => (await b.call('GET', `${b.servicePath(rsId)}/logs`)).text;
    assert.match(
      await setLogs(),
      new RegExp(`host h${R1} \\([0-9.]+\\) is being drained: node\\d of this read replica set moves to host h${R2}`), // prettier-ignore
    );

    // 2. Both nodes move back to R1 (R2 drained); the control plane is
    // killed with kill -9 in the middle of the first move, and started again.
    assert.match(await cli('host', 'drain', `h${R1}`, '--undo'), /takes services again/);
    assert.match(
      await cli('host', 'drain', `h${R2}`),
      /2 node\(s\) of 1 read replica set\(s\) move/,
    );
    let moving: { id: string; host: number; from: number | null } | undefined;
    await until(async () => {
      moving = (await rowsOf(rsId)).find((r) => r.from !== null);
      return moving !== undefined;
    }, 120_000);
    await b.kill();
    assert.equal(moving?.host, R1);
    assert.equal(moving?.from, R2);
    // What the kill left: the moving node's row names R1, its copy is still
    // on R2 (its grace not over) or gone, its new one not made yet.
    const index = Number(moving?.id.slice(`${rsId}:node`.length));
    t.diagnostic(
      `killed while node${index} moved: on h${R2} ${setDirs(R2).join(', ') || 'nothing'}, on h${R1} ${setDirs(R1).join(', ') || 'nothing'}`,
    );
    step(`the control plane killed with kill -9 while node${index} moved`);
    b = await c.inst.start({
      args: ['--host-listen', c.controlPlane.replace(/^https:\/\//, ''), ...ARGS],
    });
    await until(async () => (await stateOf(R2)) === 'DRAINED', 300_000).catch(async () =>
      assert.fail(await setLogs()),
    );
    await until(async () => {
      const rows = await rowsOf(rsId);
      return rows.length === 2 && rows.every((r) => r.host === R1 && r.from === null);
    }, 240_000);
    step(`h${R2} DRAINED, both set nodes on h${R1}`);
    // Exactly one copy of each node: both on R1, nothing on R2, one WAL
    // sender each on the primary, no slot.
    await until(
      async () =>
        setDirs(R2).length === 0 && !c.users(R2).some((u) => u.name.startsWith(`basin-${rsId}`)),
      120_000,
    );
    assert.deepEqual(setDirs(R1).sort(), [`${rsId}n0`, `${rsId}n1`]);
    await until(async () => (await onPrimary()) === senders, 120_000);
    await sql(via, port, "INSERT INTO r VALUES ('c')");
    const rowsOnPrimary = await sql(via, port, "SELECT string_agg(v, ',' ORDER BY v) FROM r");
    assert.equal(rowsOnPrimary, 'a,b,c');
    const both = new Set<string>();
    await until(async () => {
      const [addr, got] = (
        await sql(
          via,
          rsPort,
          "SELECT inet_server_addr(), (SELECT string_agg(v, ',' ORDER BY v) FROM r)",
        ).catch(() => '|')
      ).split('|');
      if (got === rowsOnPrimary && addr) both.add(addr);
      return both.size === 2;
    }, 120_000);
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 120_000);
    assert.equal(await standbys(), '1');
    await b.waitForStatus(id, 'READY', 120_000);
    console.log(
      `replica-sets-ha-drain: done (load: ${readFileSync('/proc/loadavg', 'utf8').trim()})`,
    );
    await b.stop();
  },
);
