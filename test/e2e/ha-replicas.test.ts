// HA replicas through Basin as shipped (`node dist/main.js`, the local
// driver, real PostgreSQL and HAProxy), driven only through the API and
// real clients, with the files and processes of the host as the witness:
// a service created with a replica streams to a standby through the
// service's endpoint (HAProxy, TLS passed through: verify-full with the
// installation's CA still holds); with sync_replica_count 1 the primary
// sees a quorum standby; a writer keeps committing through the same
// endpoint while the primary's postmaster is killed with -9, the service
// is READY again, every acknowledged row is there, the old primary has
// become a standby that refuses writes, and the service's logs tell each
// step; Basin killed with -9 and the new primary killed while it is away:
// the restarted Basin adopts HAProxy and fails over by itself; lowering
// replica_count to 0 removes the standby's processes, slot and files, and
// the proxy, and the endpoint keeps working.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { processesOf } from '../local/helpers.js';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';
import { basinLogs, runningNodes, superuser, writer } from './ha-nodes.js';

test(
  'HA replicas through dist/main.js: a streaming standby behind a stable endpoint, sync, kill -9 failover, removal',
  { timeout: 600_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    let b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const created = await b.call('POST', b.servicePath(), {
      name: 'ha',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      replica_count: 1,
    });
    assert.equal(created.status, 202, created.text);
    assert.deepEqual(created.body.ha_replicas, { replica_count: 1, sync_replica_count: 0 });
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    const ready = await b.waitForStatus(id, 'READY', 180_000);
    const port: number = ready.endpoint.port;

    // The endpoint is HAProxy's; the server's own certificate comes through it.
    const verified = conninfo(port, {
      host: 'localhost',
      sslmode: 'verify-full',
      sslrootcert: layout.caCert,
    });
    await psql(verified, password, 'CREATE TABLE w (i int PRIMARY KEY); INSERT INTO w VALUES (0)');
    let running = runningNodes(layout, id);
    assert.deepEqual(
      running.map((n) => n.index),
      [0, 1],
    );
    assert.ok(
      running.every((n) => n.port !== port),
      'every node has a port of its own',
    );
    const [primary, standby] = running as [(typeof running)[0], (typeof running)[0]];
    assert.equal(await superuser(primary, 'SELECT pg_is_in_recovery()'), 'f');
    assert.equal(await superuser(standby, 'SELECT pg_is_in_recovery()'), 't');
    assert.equal(
      await superuser(primary, 'SELECT slot_name, active FROM pg_replication_slots'),
      'node1|t',
    );

    // One synchronous replica: the primary's standby is a quorum one.
    const sync = await b.call('POST', `${b.servicePath(id)}/setHA`, { sync_replica_count: 1 });
    assert.equal(sync.status, 202, sync.text);
    await b.waitForStatus(id, 'READY', 120_000);
    assert.equal(
      await superuser(
        primary,
        "SELECT application_name, sync_state FROM pg_stat_replication WHERE state = 'streaming'",
      ),
      'node1|quorum',
    );
    const got = await b.call('GET', b.servicePath(id));
    assert.deepEqual(got.body.ha_replicas, { replica_count: 1, sync_replica_count: 1 });

    // kill -9 of the primary while a writer commits through the endpoint.
    const w = writer(port, password);
    await b.waitFor(async () => w.acked.length > 50, 'the writer to commit');
    const killedAt = w.acked.length;
    process.kill(primary.pid, 'SIGKILL');
    await b.waitFor(
      async () => w.acked.length > killedAt + 50,
      'writes through the same endpoint after the primary was killed',
      60_000,
    );
    await b.waitForStatus(id, 'READY', 120_000);
    await w.stop();
    const rows = new Set(
      (await psql(verified, password, 'SELECT i FROM w')).split('\n').map(Number),
    );
    const lost = w.acked.filter((i) => !rows.has(i));
    assert.deepEqual(lost, [], 'every acknowledged commit survived the failover');

    // node1 is the primary; node0 follows it and never accepts a write again.
    running = await b.waitFor(async () => {
      const now = runningNodes(layout, id);
      return now.length === 2 ? now : undefined;
    }, 'the old primary to rejoin');
    const [oldPrimary, newPrimary] = running as [(typeof running)[0], (typeof running)[0]];
    assert.equal(await superuser(newPrimary, 'SELECT pg_is_in_recovery()'), 'f');
    assert.equal(await superuser(oldPrimary, 'SELECT pg_is_in_recovery()'), 't');
    await assert.rejects(
      psql(conninfo(oldPrimary.port), password, 'INSERT INTO w VALUES (-1)'),
      /read-only transaction/,
    );
    const entries = await basinLogs(b, id);
    assert.ok(
      entries.some((l) => /basin: the primary node0 is down; it is fenced/.test(l)),
      entries.join('\n'),
    );
    assert.ok(
      entries.some((l) => /basin: promoting node1, the most advanced synchronous standby/.test(l)),
      entries.join('\n'),
    );
    assert.ok(
      entries.some((l) => /basin: READY again: node1 is the primary/.test(l)),
      entries.join('\n'),
    );

    // Basin killed, then the primary while Basin is away: the next Basin
    // adopts the running HAProxy and standby, and fails over on its own.
    const proxyPid = readFileSync(`${layout.root}/haproxy/run/haproxy.pid`, 'utf8').trim();
    await b.kill();
    process.kill(newPrimary.pid, 'SIGKILL');
    b = await inst.start();
    await b.waitFor(
      async () => (await basinLogs(b, id)).some((l) => /basin: promoting node0/.test(l)),
      'a failover to node0 by the restarted Basin',
      60_000,
    );
    await b.waitForStatus(id, 'READY', 120_000);
    assert.equal(
      readFileSync(`${layout.root}/haproxy/run/haproxy.pid`, 'utf8').trim(),
      proxyPid,
      'the restarted Basin adopted the running HAProxy',
    );
    await psql(verified, password, 'INSERT INTO w VALUES (-2)');
    const back = runningNodes(layout, id);
    assert.equal(await superuser(back[0]!, 'SELECT pg_is_in_recovery()'), 'f');

    // No replica: the standby's processes, slot and files go, and the proxy;
    // the primary takes the endpoint's port itself.
    const none = await b.call('POST', `${b.servicePath(id)}/setHA`, { replica_count: 0 });
    assert.equal(none.status, 202, none.text);
    await b.waitForStatus(id, 'READY', 120_000);
    assert.equal(processesOf(layout.pgdata({ id, node: 1 })).length, 0);
    assert.ok(!existsSync(layout.nodeDir({ id, node: 1 })), 'the standby files are removed');
    const only = runningNodes(layout, id);
    assert.deepEqual(
      only.map((n) => [n.index, n.port]),
      [[0, port]],
    );
    assert.equal(await superuser(only[0]!, 'SELECT count(*) FROM pg_replication_slots'), '0');
    assert.equal(
      processesOf(`${layout.root}/haproxy`).length,
      0,
      'HAProxy stops when no service needs it',
    );
    assert.equal(
      await psql(verified, password, 'SELECT count(*) > 50 FROM w'),
      't',
      'the data is there, through the same endpoint',
    );

    const del = await b.call('DELETE', b.servicePath(id));
    assert.equal(del.status, 202, del.text);
    await b.waitGone(id, 120_000);
  },
);
