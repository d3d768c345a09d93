// VPCs as they act on who may connect, against real PostgreSQL and PgBouncer
// through `node dist/main.js`: a service in a VPC admits the VPC's block
// only (its server's pg_hba.conf and its pooler's hba file, reloaded without
// a restart); detached, it admits the public endpoint's CIDRs again. A
// client inside the VPC is made with an address of its block on this host's
// loopback interface, removed after the test.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { postmasterPid } from '../local/helpers.js';
import { installation } from './basin-process.js';
import { loopbackAddresses, pgClient, pgQuery, pgRefused } from './clients.js';
import { gatewayOf } from './service-network.js';

/** A VPC block no host here uses; one address of it goes on `lo` for the test. */
const VPC_CIDR = '10.213.77.0/24';
const INSIDE = '10.213.77.1';

/**
 * Connects as tsdbadmin to `source`:`port` (the host's own address, so the
 * connection comes from it too) and returns the client address the server
 * saw (null through the pooler, which reaches the server over its socket).
 */
async function from(source: string, port: number, password: string, database = 'tsdb') {
  const c = await pgClient(port, password, undefined, { host: source, database });
  try {
    return (await c.query('SELECT host(inet_client_addr()) AS a')).rows[0].a as string;
  } finally {
    await c.end();
  }
}

/** The rules of an hba file that admit clients (no comments, no rejects, no replication). */
function admitting(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .filter((l) => l.startsWith('host') && / all all | all tsdbadmin /.test(l))
    .filter((l) => /scram-sha-256$/.test(l));
}

test(
  'attach and detach change who may connect to a service and its pooler',
  { timeout: 300_000 },
  async (t) => {
    loopbackAddresses(t, INSIDE);
    const inst = await installation(t);
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const vpcs = `/projects/${b.projectId}/vpcs`;

    const vpc = await b.call('POST', vpcs, {
      name: 'net',
      cidr: VPC_CIDR,
      region_code: 'us-east-1',
    });
    assert.equal(vpc.status, 201, vpc.text);
    const clash = await b.call('POST', vpcs, {
      name: 'clash',
      cidr: '10.213.0.0/16',
      region_code: 'us-east-1',
    });
    assert.equal(clash.status, 409, clash.text);
    assert.equal(clash.body.code, 'CONFLICT');
    assert.match(clash.body.message, /overlaps 10\.213\.77\.0\/24/);

    const created = await b.call('POST', b.servicePath(), {
      name: 'private',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    await b.waitForStatus(id, 'READY');
    assert.equal((await b.call('POST', `${b.servicePath(id)}/enablePooler`)).status, 200);
    const svc = await b.waitForStatus(id, 'READY');
    const port: number = svc.endpoint.port;
    const poolerPort: number = svc.connection_pooler.endpoint.port;
    const pgdata = layout.pgdata({ id, node: 0 });
    const hba = `${pgdata}/pg_hba.conf`;
    const poolerHba = layout.pooler(id).hbaFile;
    const pid = postmasterPid(pgdata);

    await t.test('outside any VPC: the public endpoint admits everyone (TLS, SCRAM)', async () => {
      assert.deepEqual(admitting(hba), [
        'hostssl all all 0.0.0.0/0 scram-sha-256',
        'hostssl all all ::/0 scram-sha-256',
      ]);
      // A client on this host's loopback arrives from the service's gateway:
      // a loopback source cannot leave the host into its namespace untranslated.
      assert.equal(await from('127.0.0.1', port, password), gatewayOf(inst.dataDir, id));
      await from('127.0.0.1', poolerPort, password, 'tsdb_transaction');
    });

    await t.test('attached: the VPC block only, reloaded, endpoint published', async () => {
      const res = await b.call('POST', `${b.servicePath(id)}/attachToVPC`, { vpc_id: vpc.body.id });
      assert.equal(res.status, 202, res.text);
      const attached = await b.waitForStatus(id, 'READY');
      assert.deepEqual(attached.vpcEndpoint, {
        host: svc.endpoint.host,
        port,
        vpc_id: vpc.body.id,
      });
      assert.deepEqual(admitting(hba), [`hostssl all all ${VPC_CIDR} scram-sha-256`]);
      assert.deepEqual(admitting(poolerHba), [`hostssl all tsdbadmin ${VPC_CIDR} scram-sha-256`]);
      // Loopback is outside the VPC: refused by the server and by the pooler.
      assert.match(await pgRefused(port, password), /no pg_hba.conf entry/);
      assert.match(
        await pgRefused(poolerPort, password),
        /pg_hba|not allowed|no such|rejected|no authentication method/i,
      );
      // A client inside the VPC's block connects to both.
      assert.equal(await from(INSIDE, port, password), INSIDE);
      await from(INSIDE, poolerPort, password, 'tsdb_transaction');
      assert.equal(postmasterPid(pgdata), pid, 'a reload, not a restart');
    });

    await t.test('detached: public again, no vpcEndpoint', async () => {
      const res = await b.call('POST', `${b.servicePath(id)}/detachFromVPC`, {
        vpc_id: vpc.body.id,
      });
      assert.equal(res.status, 202, res.text);
      const detached = await b.waitForStatus(id, 'READY');
      assert.equal(detached.vpcEndpoint, undefined);
      assert.deepEqual(admitting(hba), [
        'hostssl all all 0.0.0.0/0 scram-sha-256',
        'hostssl all all ::/0 scram-sha-256',
      ]);
      assert.equal((await pgQuery(port, password, 'SELECT 1 AS one'))[0].one, 1);
      await from('127.0.0.1', poolerPort, password);
      assert.equal(postmasterPid(pgdata), pid);
    });

    assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
    await b.waitGone(id);
  },
);
