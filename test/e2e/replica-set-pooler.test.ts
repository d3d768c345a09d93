// A read replica set's connection pooler through Basin as shipped (`node
// dist/main.js`, the local driver, real PostgreSQL, PgBouncer and HAProxy),
// through the API and real clients: enabled, the set shows its
// `connection_pooler.endpoint`; through it, in session and in transaction
// mode, reads return what the primary committed and writes are refused (the
// nodes are standbys); its server connections spread over the set's nodes
// (it reaches them through the set's endpoint); it runs as the set's OS
// user, confined; it follows the service's VPC and password; a restarted
// Basin adopts it; a killed one is started again; disabled, it stops and its
// port refuses; it goes with its set. Clients inside and outside the VPC are
// made with addresses on this host's loopback interface, removed after.

import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import { conninfo, loopbackAddresses, pgClient, portOpen, psql, queryFrom } from './clients.js';
import { activeReplicaSet, replicaSet } from './ha-nodes.js';
import { expectedPoolerProcesses, poolerPgbouncers } from './pgbouncer-processes.js';

/** Blocks no other test uses (ha-pooler-vpc and vpc-access have 10.213.79 and .77). */
const VPC_CIDR = '10.213.81.0/24';
const INSIDE = '10.213.81.1';
const OUTSIDE = '10.213.82.1';

/** The error a connection from `source` ends with; throws if it is accepted. */
async function refusedFrom(
  source: string,
  port: number,
  password: string,
  database = 'tsdb',
): Promise<string> {
  try {
    await queryFrom(source, port, password, 'SELECT 1', database);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`a connection from ${source} to port ${port} was accepted`);
}

/** The port a node listens on, from its postmaster.pid. */
const nodePort = (layout: Layout, id: string, node: number) =>
  Number(readFileSync(`${layout.pgdata({ id, node })}/postmaster.pid`, 'utf8').split('\n')[3]);

test(
  "a read replica set's pooler on the local driver: reads in both modes, no writes, its VPC and password, adoption, disable",
  { timeout: 900_000 },
  async (t) => {
    loopbackAddresses(t, INSIDE, OUTSIDE);
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    let b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const created = await b.call('POST', b.servicePath(), {
      name: 'primary',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    let password: string = created.body.initial_password;
    const port: number = (await b.waitForStatus(id, 'READY', 180_000)).endpoint.port;
    await psql(conninfo(port), password, 'CREATE TABLE r (v text); INSERT INTO r VALUES ($$a$$)');

    const { id: rsId } = await activeReplicaSet(b, id, 'reporting');
    const rsPath = `${b.servicePath(id)}/replicaSets/${rsId}`;
    const poolerDir = layout.pooler(rsId).dir;
    const bouncers = () => poolerPgbouncers(poolerDir);
    // The set's nodes have 500 millicores (activeReplicaSet): one process.
    const processes = await expectedPoolerProcesses({ shared: false, cpuMillis: 500 });

    const on = await b.call('POST', `${rsPath}/enablePooler`);
    assert.equal(on.status, 200, on.text);
    const shown = await replicaSet(b, id, rsId);
    const endpoint = shown.connection_pooler?.endpoint;
    assert.ok(endpoint, `connection_pooler.endpoint once enabled: ${JSON.stringify(shown)}`);
    const poolerPort: number = endpoint.port;
    assert.notEqual(poolerPort, shown.endpoint.port);
    assert.deepEqual(
      (await b.call('GET', b.servicePath(rsId))).body.connection_pooler,
      shown.connection_pooler,
      'the set seen as a service shows the same pooler',
    );
    await b.waitFor(async () => bouncers().length === processes, "the set's PgBouncers to run");

    await t.test('reads in both modes return what the primary committed', async () => {
      await psql(conninfo(port), password, 'INSERT INTO r VALUES ($$b$$)');
      for (const dbname of ['tsdb', 'tsdb_transaction']) {
        const via = conninfo(poolerPort, { dbname });
        await b.waitFor(
          async () =>
            (await psql(via, password, 'SELECT string_agg(v, $$,$$ ORDER BY v) FROM r').catch(
              () => '',
            )) === 'a,b',
          `${dbname} through the set's pooler to read the new row`,
          60_000,
        );
        assert.equal(await psql(via, password, 'SELECT pg_is_in_recovery()'), 't', dbname);
      }
      // TLS with the set's certificate: verify-full against the installation's CA.
      const verified = conninfo(poolerPort, {
        host: 'localhost',
        sslmode: 'verify-full',
        sslrootcert: layout.caCert,
      });
      assert.equal(await psql(verified, password, 'SELECT count(*) FROM r'), '2');
    });

    await t.test('writes through it are refused: the set is read-only', async () => {
      for (const dbname of ['tsdb', 'tsdb_transaction']) {
        await assert.rejects(
          psql(conninfo(poolerPort, { dbname }), password, 'INSERT INTO r VALUES ($$x$$)'),
          /read-only transaction/,
          dbname,
        );
      }
      assert.equal(await psql(conninfo(port), password, 'SELECT count(*) FROM r'), '2');
    });

    await t.test("its server connections go through the set's endpoint to both nodes", async () => {
      // Session clients at once hold a server connection each, which
      // HAProxy puts on the node with the fewest (leastconn, counting the
      // transaction pool's too): four of them cannot all be on one node.
      const clients = await Promise.all(
        [0, 1, 2, 3].map(() => pgClient(poolerPort, password, undefined, { database: 'tsdb' })),
      );
      try {
        const ports = await Promise.all(
          clients.map(async (c) => (await c.query('SELECT inet_server_port() AS p')).rows[0].p),
        );
        assert.deepEqual(
          [...new Set(ports)].sort(),
          [nodePort(layout, rsId, 0), nodePort(layout, rsId, 1)].sort(),
          `server ports ${ports.join(', ')}`,
        );
      } finally {
        await Promise.all(clients.map((c) => c.end()));
      }
    });

    await t.test("PgBouncer runs as the set's OS user, confined", async () => {
      for (const pid of bouncers()) {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        const uids = /^Uid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/).map(Number);
        assert.deepEqual(uids, Array(4).fill(statSync(layout.pgdata({ id: rsId, node: 0 })).uid));
        assert.notEqual(uids?.[0], statSync(layout.pgdata({ id, node: 0 })).uid);
        assert.match(status, /^NoNewPrivs:\s+1$/m);
      }
    });

    await t.test("in the service's VPC: the VPC's block only, as the set's endpoint", async () => {
      const vpc = await b.call('POST', `/projects/${b.projectId}/vpcs`, {
        name: 'net',
        cidr: VPC_CIDR,
        region_code: 'us-east-1',
      });
      assert.equal(vpc.status, 201, vpc.text);
      const res = await b.call('POST', `${b.servicePath(id)}/attachToVPC`, { vpc_id: vpc.body.id });
      assert.equal(res.status, 202, res.text);
      await b.waitForStatus(id, 'READY', 120_000);
      // The set converges after its service: then outside the block is refused.
      await b.waitFor(
        () =>
          refusedFrom(OUTSIDE, poolerPort, password).then(
            (m) => /pg_hba|not allowed|rejected|no authentication method/i.test(m),
            () => false,
          ),
        "the set's pooler to refuse addresses outside the VPC",
      );
      assert.match(
        await refusedFrom('127.0.0.1', poolerPort, password, 'tsdb_transaction'),
        /pg_hba|not allowed|rejected|no authentication method/i,
      );
      assert.match(
        await refusedFrom(OUTSIDE, shown.endpoint.port, password),
        /terminated|closed|ECONNRESET|reset/i,
      );
      // From inside, through the set's pooler (which itself reaches the
      // endpoint from loopback) in both modes, and through its endpoint.
      for (const database of ['tsdb', 'tsdb_transaction']) {
        const rows = await queryFrom(
          INSIDE,
          poolerPort,
          password,
          'SELECT count(*)::int AS n FROM r',
          database,
        );
        assert.equal(rows[0]?.n, 2, database);
      }
      await queryFrom(INSIDE, shown.endpoint.port, password, 'SELECT 1');

      const out = await b.call('POST', `${b.servicePath(id)}/detachFromVPC`, {
        vpc_id: vpc.body.id,
      });
      assert.equal(out.status, 202, out.text);
      await b.waitForStatus(id, 'READY', 120_000);
      await b.waitFor(
        () =>
          queryFrom(OUTSIDE, poolerPort, password, 'SELECT 1').then(
            () => true,
            () => false,
          ),
        "the set's pooler to admit everyone again",
      );
    });

    await t.test('updatePassword: the old password is refused, the new one works', async () => {
      const res = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
        password: 'the-set-pooler-follows',
      });
      assert.equal(res.status, 204, res.text);
      const old = password;
      password = 'the-set-pooler-follows';
      // The set's nodes replay the new password: waited for at the set's own
      // endpoint. Polled through the pooler instead, every attempt before the
      // replay is a failed login there, and at load twenty of them within a
      // minute got this address blocked for five (the pooler's guard), which
      // failed the next steps in a full run.
      await b.waitFor(
        () =>
          queryFrom('127.0.0.1', shown.endpoint.port, password, 'SELECT 1', 'tsdb').then(
            () => true,
            () => false,
          ),
        "the set's nodes to take the new password",
      );
      for (const database of ['tsdb', 'tsdb_transaction']) {
        await b.waitFor(
          () =>
            refusedFrom('127.0.0.1', poolerPort, old, database).then(
              (m) => /authentication failed/.test(m),
              () => false,
            ),
          `${database} through the set's pooler to refuse the old password`,
        );
        // The new one, once the set's nodes have replayed it.
        await b.waitFor(
          () =>
            queryFrom('127.0.0.1', poolerPort, password, 'SELECT 1', database).then(
              () => true,
              () => false,
            ),
          `${database} through the set's pooler to take the new password`,
        );
      }
    });

    await t.test('a restarted Basin adopts the running pooler, not a second one', async () => {
      const pids = bouncers();
      assert.equal(pids.length, processes);
      assert.deepEqual(await b.stop(), { code: 0, signal: null });
      // Basin is gone; the set's pooler is not.
      assert.equal(
        (await queryFrom('127.0.0.1', poolerPort, password, 'SELECT 1 AS one'))[0]?.one,
        1,
      );
      b = await inst.start();
      const after = await replicaSet(b, id, rsId);
      assert.equal(after.status, 'active');
      assert.equal(after.connection_pooler.endpoint.port, poolerPort);
      // A converge of the new Basin (the service's password again) keeps it.
      const res = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
        password: 'after-the-restart-too',
      });
      assert.equal(res.status, 204, res.text);
      password = 'after-the-restart-too';
      await b.waitFor(
        () =>
          queryFrom('127.0.0.1', poolerPort, password, 'SELECT 1').then(
            () => true,
            () => false,
          ),
        'the new password to work through the adopted pooler',
      );
      assert.deepEqual(bouncers(), pids);
    });

    await t.test('a killed PgBouncer is started again', async () => {
      const pid = bouncers()[0] as number;
      process.kill(pid, 'SIGKILL');
      await b.waitFor(async () => {
        const now = bouncers();
        return now.length === processes && !now.includes(pid) && (await portOpen(poolerPort));
      }, 'a new PgBouncer for the set');
      await b.waitFor(
        () =>
          queryFrom('127.0.0.1', poolerPort, password, 'SELECT 1').then(
            () => true,
            () => false,
          ),
        'reads through the new pooler',
      );
    });

    await t.test('disabled, it stops and its port refuses; the set is untouched', async () => {
      const off = await b.call('POST', `${rsPath}/disablePooler`);
      assert.equal(off.status, 200, off.text);
      assert.equal((await replicaSet(b, id, rsId)).connection_pooler, undefined);
      await b.waitFor(async () => bouncers().length === 0, "the set's PgBouncers to stop");
      assert.equal(await portOpen(poolerPort), false);
      assert.equal(
        (
          await queryFrom(
            '127.0.0.1',
            shown.endpoint.port,
            password,
            'SELECT count(*)::int AS n FROM r',
          )
        )[0]?.n,
        2,
      );
    });

    await t.test('it goes with its set', async () => {
      assert.equal((await b.call('POST', `${rsPath}/enablePooler`)).status, 200);
      await b.waitFor(
        () =>
          queryFrom('127.0.0.1', poolerPort, password, 'SELECT 1').then(
            () => true,
            () => false,
          ),
        'the pooler back on the same port',
      );
      const del = await b.call('DELETE', rsPath);
      assert.equal(del.status, 202, del.text);
      await b.waitFor(
        async () => (await replicaSet(b, id, rsId)) === undefined,
        'the set to go',
        120_000,
      );
      assert.deepEqual(bouncers(), []);
      assert.equal(await portOpen(poolerPort), false);
    });

    assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
    await b.waitGone(id);
  },
);
