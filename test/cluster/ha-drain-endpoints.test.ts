// An HA service's endpoint on every database host, drained ones included
// (docs/decisions.md, "Draining a host"), and a read replica set of the
// service while the service's own nodes move (the combination of
// ha-drain.test.ts and replica-sets-ha-drain.test.ts), on the namespace
// topology: four database hosts h1-h4, each in a zone of its own (etcd on
// three of them). An HA service of two nodes on two of them (S1, S2), a
// set of two nodes on the other two (R1, R2); reads through the set's
// endpoint on S1's address all along, every one answered.
//
// 1. `basin host drain S1`, then `basin host drain S2`: the service's
//    nodes move, one each onto R1 and R2 (beside the set's nodes: no other
//    host is left), without a stop. Neither drained host ever held the
//    service's new nodes, and yet through each one's address (its HAProxy)
//    the service's port reaches the new primary and takes a write
//    (verify-full): a drained host's endpoint is kept current. The set
//    follows the new primary (a row written then is read through it).
// 2. The set, then the service, deleted: no database host, drained or
//    not, serves their ports any more.
//
// Not here yet: draining a host that holds a node of the service's and one
// of the set's (both move, but the service then stayed CONFIGURING in 2 of
// 4 runs, its primary cutting a standby's connection every 4-5 s; not
// understood: docs/decisions.md, "Read replica sets across hosts"). That
// step is on the branch rrha-combined, to come back with its fix.

import assert from 'node:assert/strict';
import { accepts } from '../../src/lib/port-probe.js';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';
import { haServiceWithSet } from './ha-set-topology.js';

const PREFIX = 'rrhb';
/** The topology's subnet, 10.231.32.0/24: its own, as the tests run in parallel. */
const NET = 32;
const HOSTS = [1, 2, 3, 4];
// No host is lost here: a long --host-lost-after keeps a loaded machine's
// late heartbeats from taking a host for lost mid-drain (a delete then
// skips its endpoint: docs/decisions.md, HA across hosts, to come).
const ARGS = ['--host-lost-after', '30s', '--reconcile-interval-ms', '1000'];

const step = (what: string) =>
  console.log(`ha-drain-endpoints: ${new Date().toISOString()} ${what}`);

/** Whether something accepts a TCP connection at host:port (false: refused, or no answer in 3 s). */
const listening = (host: string, port: number) => accepts({ host, port }, 3000);

test(
  "an HA service's endpoint on drained hosts keeps leading to its primary after its nodes moved, and is removed with the service; its read replica set serves while the service's nodes and its own move",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: HOSTS.length,
      driver: 'hosts',
      args: ARGS,
    });
    const { b, cli, address } = c;
    const set = await haServiceWithSet(c, HOSTS, step);
    const { id, password, port, rsId, rsPort, conn, stateOf, rows } = set;
    const listed = () => set.listed(b);
    const hostsOf = async (like: string) => (await rows(like)).map((r) => r.host);
    const [S1, S2] = (await hostsOf(id)).sort() as [number, number];
    const [R1, R2] = (await hostsOf(rsId)).sort() as [number, number];
    assert.deepEqual([S1, S2, R1, R2].sort(), HOSTS, `service on h${S1}, h${S2}, set on h${R1}, h${R2}`); // prettier-ignore
    step(`the service on h${S1}, h${S2}, the set on h${R1}, h${R2}`);
    const sql = (i: number, p: number, q: string) => psql(conn(i, p), password, q);
    // S1's endpoint leads to the primary at once, right after its HAProxy
    // was reloaded for the set's endpoint: the servers' states are kept
    // across a reload (docs/decisions.md, "HA across hosts", Endpoints),
    // where HAProxy 2.6 alone would take the standby listed first as up
    // for a second or two (a write refused as read-only).
    assert.equal(await sql(S1, port, 'SELECT pg_is_in_recovery()'), 'f');
    await sql(S1, port, "CREATE TABLE r (v text); INSERT INTO r VALUES ('a')");

    // Reads through the set's endpoint on S1's address, all along.
    let reading = true;
    let reads = 0;
    const failures: string[] = [];
    const reader = (async () => {
      while (reading) {
        try {
          assert.equal(await sql(S1, rsPort, "SELECT count(*) > 0 FROM r WHERE v = 'a'"), 't');
          reads++;
        } catch (err) {
          failures.push(`${new Date().toISOString()} ${(err as Error).message}`);
          await sleep(100);
        }
      }
    })();
    t.after(() => {
      reading = false; // a failed test's reader ends with it
    });
    const logs = async () => (await b.call('GET', `${b.servicePath(id)}/logs`)).text;

    // 1. S1, then S2 drained: the service's nodes move onto R1 and R2.
    for (const S of [S1, S2]) {
      assert.match(
        await cli('host', 'drain', `h${S}`),
        /1 with HA replicas move their node\(s\) there without a stop/,
      );
      await until(async () => (await stateOf(S)) === 'DRAINED', 300_000).catch(async () =>
        assert.fail(await logs()),
      );
      await b.waitForStatus(id, 'READY', 300_000);
      step(`h${S} DRAINED`);
    }
    assert.deepEqual((await hostsOf(id)).sort(), [R1, R2]);
    // Through each drained host's address, the service's port leads to the
    // new primary (on R1 or R2, which the drained hosts never held) and
    // takes a write; the set follows it.
    for (const S of [S1, S2]) {
      await until(
        async () => (await sql(S, port, 'SELECT pg_is_in_recovery()').catch(() => '')) === 'f',
        60_000,
      );
      await sql(S, port, `INSERT INTO r VALUES ('via h${S}')`);
    }
    const written = `a,via h${Math.min(S1, S2)},via h${Math.max(S1, S2)}`;
    await until(
      async () =>
        (await sql(S2, rsPort, "SELECT string_agg(v, ',' ORDER BY v) FROM r").catch(() => '')) === written, // prettier-ignore
      120_000,
    );
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 120_000);
    assert.deepEqual((await hostsOf(rsId)).sort(), [R1, R2]);

    reading = false;
    await reader;
    t.diagnostic(`${reads} reads through the set, ${failures.length} failed`);
    assert.deepEqual(failures, [], 'every read through the set answered while the nodes moved');
    assert.ok(reads > 0);

    // 2. The set, then the service, deleted: no host serves their ports.
    const gone = await b.call('DELETE', `${b.servicePath(id)}/replicaSets/${rsId}`);
    assert.equal(gone.status, 202, gone.text);
    await b.waitFor(async () => (await listed()) === undefined, 'the set to go', 180_000);
    const deleted = await b.call('DELETE', b.servicePath(id));
    assert.equal(deleted.status, 202, deleted.text);
    await b.waitFor(
      async () => (await b.call('GET', b.servicePath(id))).status === 404,
      'the service to go',
      180_000,
    );
    for (const i of HOSTS) {
      await until(async () => !(await listening(address(i), port)), 30_000).catch(() =>
        assert.fail(`h${i} still serves the service's port ${port}`),
      );
      assert.equal(await listening(address(i), rsPort), false, `h${i} serves the set's port`);
    }
    console.log(`ha-drain-endpoints: done (load: ${readFileSync('/proc/loadavg', 'utf8').trim()})`); // prettier-ignore
    await b.stop();
  },
);
