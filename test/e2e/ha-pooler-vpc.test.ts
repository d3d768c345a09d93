// An HA service (one synchronous replica) with the pooler and a VPC, through Basin as shipped
// (`node dist/main.js`, the local driver, real PostgreSQL, PgBouncer and
// HAProxy): the pooler follows the primary through a kill -9 failover (it
// reaches the recorded primary, re-pointed by the apply after the
// failover), and behind HAProxy, where every node sees its clients as
// loopback, a VPC's access rules still hold: the frontend admits the VPC's
// block only. A client inside the VPC is made with an address of its block
// on this host's loopback interface, removed after the test.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import { loopbackAddresses, pgRefused, queryFrom } from './clients.js';
import { primaryNode, syncHaService } from './ha-nodes.js';

/** A block no host here uses (another than vpc-access.test.ts's, which may run at once). */
const VPC_CIDR = '10.213.79.0/24';
const INSIDE = '10.213.79.1';

test(
  'HA with the pooler and a VPC: the pooler follows a failover; behind HAProxy the VPC rules hold',
  { timeout: 600_000 },
  async (t) => {
    loopbackAddresses(t, INSIDE);
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const { id, password } = await syncHaService(b, 'ha-pooled', [], 'CREATE TABLE t (i int)');
    assert.equal((await b.call('POST', `${b.servicePath(id)}/enablePooler`)).status, 200);
    const svc = await b.waitForStatus(id, 'READY', 120_000);
    const port: number = svc.endpoint.port;
    const poolerPort: number = svc.connection_pooler.endpoint.port;

    await t.test('the pooler reaches the primary, and follows it through a failover', async () => {
      const before = await queryFrom(
        '127.0.0.1',
        poolerPort,
        password,
        'SELECT count(*)::int AS n FROM t',
      );
      assert.equal(before[0]?.n, 0);
      await queryFrom(
        '127.0.0.1',
        poolerPort,
        password,
        'INSERT INTO t VALUES (1)',
        'tsdb_transaction',
      );
      process.kill(primaryNode(layout, id).pid, 'SIGKILL');
      // The failover, as the service's logs tell it, then READY.
      await b.waitFor(async () => {
        const res = await b.call('GET', `${b.servicePath(id)}/logs?source=basin`);
        return (res.body.logs as string[]).some((l) => /READY again: node1 is the primary/.test(l));
      }, 'the failover to node1');
      await b.waitForStatus(id, 'READY', 180_000);
      const rows = await b.waitFor(async () => {
        try {
          await queryFrom('127.0.0.1', poolerPort, password, 'INSERT INTO t VALUES (2)');
          return await queryFrom('127.0.0.1', poolerPort, password, 'SELECT i FROM t ORDER BY i');
        } catch {
          return undefined;
        }
      }, 'a write through the pooler after the failover');
      assert.deepEqual(
        rows.map((r) => r.i),
        [1, 2],
      );
      const recovery = await queryFrom(
        '127.0.0.1',
        poolerPort,
        password,
        'SELECT pg_is_in_recovery() AS rec',
      );
      assert.equal(recovery[0]?.rec, false, 'the pooler reaches the new primary');
    });

    await t.test('in a VPC, the endpoint behind HAProxy admits the VPC block only', async () => {
      const vpc = await b.call('POST', `/projects/${b.projectId}/vpcs`, {
        name: 'net',
        cidr: VPC_CIDR,
        region_code: 'us-east-1',
      });
      assert.equal(vpc.status, 201, vpc.text);
      const res = await b.call('POST', `${b.servicePath(id)}/attachToVPC`, { vpc_id: vpc.body.id });
      assert.equal(res.status, 202, res.text);
      await b.waitForStatus(id, 'READY', 120_000);
      // Loopback is outside the VPC: HAProxy closes the connection before a node sees it.
      assert.match(await pgRefused(port, password), /terminated|closed|ECONNRESET|reset/i);
      assert.match(
        await pgRefused(poolerPort, password),
        /pg_hba|not allowed|rejected|no authentication method/i,
      );
      // From inside the block, through the same endpoint and the pooler: the data.
      const rows = await queryFrom(INSIDE, port, password, 'SELECT count(*)::int AS n FROM t');
      assert.equal(rows[0]?.n, 2);
      await queryFrom(INSIDE, poolerPort, password, 'SELECT 1', 'tsdb_transaction');

      const out = await b.call('POST', `${b.servicePath(id)}/detachFromVPC`, {
        vpc_id: vpc.body.id,
      });
      assert.equal(out.status, 202, out.text);
      await b.waitForStatus(id, 'READY', 120_000);
      const back = await queryFrom('127.0.0.1', port, password, 'SELECT count(*)::int AS n FROM t');
      assert.equal(back[0]?.n, 2, 'public again');
    });

    assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
    await b.waitGone(id);
  },
);
