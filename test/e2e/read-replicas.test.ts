// Read replica sets through Basin as shipped (`node dist/main.js`, the local
// driver, real PostgreSQL and HAProxy), through the API and real clients:
// a set of two nodes becomes `active`; its endpoint (verify-full with the
// installation's CA) answers reads of a row committed on the primary a
// moment earlier, refuses writes (physical standbys: in recovery), and
// spreads connections over both nodes; the set is readable as a Service
// with `forked_from.is_standby`; its logs are its own; it keeps answering
// through a failover of its service; a resize goes node by node and reads
// keep being answered meanwhile; its delete removes its processes, its
// slots on the primary, its files and its OS user.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout } from '../../src/drivers/local/layout.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { processesOf } from '../local/helpers.js';
import { installation } from './basin-process.js';
import { conninfo, pgClient, psql } from './clients.js';
import {
  activeReplicaSet,
  primaryNode,
  replicaSet,
  replicaSetActive,
  runningNodes,
  superuser,
  syncHaService,
} from './ha-nodes.js';

/** The last lines of a node's newest JSON log, for failure messages. */
function logTail(layout: Layout, id: string): string {
  try {
    const dir = layout.logDir({ id, node: 0 });
    const newest = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .sort()
      .at(-1);
    return newest ? readFileSync(`${dir}/${newest}`, 'utf8').split('\n').slice(-8).join('\n') : '';
  } catch (err) {
    return String(err);
  }
}

/**
 * The loops below still running: stopped when the file's tests end, so a
 * test that failed before stopping its own does not keep the process alive.
 */
const loops = new Set<() => void>();
after(() => loops.forEach((end) => end()));

/** Inserts rows into `w` through `port` until stopped, reconnecting on errors. */
function writer(port: number, password: string) {
  let n = 0;
  let stop = false;
  loops.add(() => (stop = true));
  const done = (async () => {
    while (!stop) {
      try {
        const c = await pgClient(port, password);
        try {
          while (!stop) {
            await c.query('INSERT INTO w DEFAULT VALUES');
            n++;
          }
        } finally {
          await c.end().catch(() => {});
        }
      } catch {
        await sleep(50);
      }
    }
  })();
  return {
    count: () => n,
    async stop() {
      stop = true;
      await done;
    },
  };
}

/** Reads through `port` until stopped; counts what was answered and what was not. */
function reader(port: number, password: string) {
  let ok = 0;
  let failed = 0;
  let stop = false;
  loops.add(() => (stop = true));
  const done = (async () => {
    while (!stop) {
      try {
        const c = await pgClient(port, password);
        try {
          await c.query('SELECT count(*) FROM r');
          ok++;
        } finally {
          await c.end();
        }
      } catch {
        failed++;
        await sleep(50);
      }
    }
  })();
  return {
    counts: () => ({ ok, failed }),
    async stop() {
      stop = true;
      await done;
    },
  };
}

test(
  'read replica sets through dist/main.js: reads, no writes, spread, failover, rolling resize, delete',
  { timeout: 900_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const { id, password, port } = await syncHaService(
      b,
      'primary',
      [],
      'CREATE TABLE r (v text); INSERT INTO r VALUES ($$a$$); CREATE TABLE w (at timestamptz DEFAULT now(), pad text DEFAULT repeat($$x$$, 500))',
    );

    const { id: rsId, port: rsPort } = await activeReplicaSet(b, id, 'reporting');

    // Reads of what the primary committed a moment earlier, through the set's endpoint.
    const verified = conninfo(rsPort, {
      host: 'localhost',
      sslmode: 'verify-full',
      sslrootcert: layout.caCert,
    });
    await psql(conninfo(port), password, 'INSERT INTO r VALUES ($$b$$)');
    await b.waitFor(
      async () =>
        (await psql(verified, password, 'SELECT string_agg(v, $$,$$ ORDER BY v) FROM r')) === 'a,b',
      'the replica set to read the new row',
    );
    assert.equal(await psql(verified, password, 'SELECT pg_is_in_recovery()'), 't');
    await assert.rejects(
      psql(verified, password, 'INSERT INTO r VALUES ($$x$$)'),
      /read-only transaction/,
    );

    // Two connections at once: one on each node (leastconn).
    const one = await pgClient(rsPort, password);
    const two = await pgClient(rsPort, password);
    const ports = new Set(
      await Promise.all(
        [one, two].map(async (c) => (await c.query('SELECT inet_server_port() AS p')).rows[0].p),
      ),
    );
    await Promise.all([one.end(), two.end()]);
    assert.deepEqual(
      [...ports].sort(),
      runningNodes(layout, rsId)
        .map((n) => n.port)
        .sort(),
    );

    // The set as a Service view, and its own logs.
    const view = await b.call('GET', b.servicePath(rsId));
    assert.equal(view.status, 200, view.text);
    assert.deepEqual(view.body.forked_from, {
      service_id: id,
      project_id: b.projectId,
      is_standby: true,
    });
    const rsLogs = await b.call('GET', `${b.servicePath(rsId)}/logs?node=1`);
    assert.equal(rsLogs.status, 200, rsLogs.text);
    assert.ok(
      (rsLogs.body.logs as string[]).some((l) =>
        /database system is ready to accept read-only connections/.test(l),
      ),
      rsLogs.text,
    );

    // A failover of the service under writes: the set follows the new primary.
    const writing = writer(port, password);
    await b.waitFor(async () => writing.count() > 20, 'writes before the kill');
    process.kill(primaryNode(layout, id).pid, 'SIGKILL');
    await b.waitFor(
      async () => {
        try {
          await psql(conninfo(port), password, 'INSERT INTO r VALUES ($$c$$)');
          return true;
        } catch {
          return false;
        }
      },
      'a write through the service endpoint after the failover',
      60_000,
    );
    await b.waitFor(
      async () =>
        (await psql(verified, password, 'SELECT count(*) FROM r WHERE v = $$c$$').catch(
          () => '',
        )) === '1',
      () =>
        `the replica set to read a row written after the failover; its node 0 logged:\n${logTail(layout, rsId)}`,
      120_000,
    );
    await b.waitForStatus(id, 'READY', 120_000);
    await writing.stop();

    // A resize goes node by node: reads are answered throughout.
    const r = reader(rsPort, password);
    const resized = await b.call('POST', `${b.servicePath(id)}/replicaSets/${rsId}/resize`, {
      cpu_millis: '1000',
      memory_gbs: '4',
    });
    assert.equal(resized.status, 202, resized.text);
    await replicaSetActive(b, id, rsId);
    const during = r.counts();
    await r.stop();
    assert.ok(during.ok > 0, `reads were answered during the resize (${JSON.stringify(during)})`);
    const resizedNodes = runningNodes(layout, rsId);
    assert.equal(resizedNodes.length, 2);
    for (const n of resizedNodes) assert.equal(await superuser(n, 'SHOW shared_buffers'), '1GB');

    // Delete: processes, slots, files and OS user go; the service is untouched.
    const rsUser = serviceUserName(rsId);
    assert.ok(
      readPasswd().some((u) => u.name === rsUser),
      'the set runs as its own OS user',
    );
    const del = await b.call('DELETE', `${b.servicePath(id)}/replicaSets/${rsId}`);
    assert.equal(del.status, 202, del.text);
    await b.waitFor(
      async () => (await replicaSet(b, id, rsId)) === undefined,
      'the set to go',
      120_000,
    );
    assert.equal(processesOf(layout.instanceDir(rsId)).length, 0);
    assert.ok(!existsSync(layout.instanceDir(rsId)), 'its files are removed');
    assert.ok(!readPasswd().some((u) => u.name === rsUser), 'its OS user is removed');
    assert.equal(
      await superuser(
        primaryNode(layout, id),
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'rs%'",
      ),
      '0',
    );
    assert.equal(await psql(conninfo(port), password, 'SELECT count(*) FROM r'), '3');
  },
);
