// The README walkthrough through the TypeScript client as shipped: imported
// as `basin/client` (the package's own export, so dist/client and the
// "exports" map are what is tested), against `node dist/main.js` on the sim
// driver. Every call is typed by the generated client: a client out of step
// with the API fails `npm run check`, one that answers wrongly fails here.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type * as Client from '../../src/client/index.js';
import { installation } from './basin-process.js';

/** Every number anywhere in `value` is an integer (what Go clients parse). */
function assertIntegers(value: unknown, path = '$'): void {
  if (typeof value === 'number') assert.ok(Number.isInteger(value), `${path} = ${value}`);
  else if (Array.isArray(value)) value.forEach((v, i) => assertIntegers(v, `${path}[${i}]`));
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) assertIntegers(v, `${path}.${k}`);
}

test(
  'the README walkthrough through basin/client, against dist/main.js (sim)',
  { timeout: 120_000 },
  async (t) => {
    // The package's own name: resolved through package.json "exports" to dist/client.
    const { createBasinClient, BasinError } = (await import(
      'basin/client' as string
    )) as typeof Client;
    const inst = await installation(t, { driver: 'sim', env: { BASIN_SIM_DELAY_MS: '0' } });
    const b = await inst.start();
    const basin = createBasinClient({ url: b.url, apiKey: b.bearerKey });

    const [project] = await basin.GET('/v1/projects');
    assert.deepEqual(project, { id: b.projectId, name: 'default' });
    const P = { project_id: b.projectId };
    const me = await basin.GET('/v1/auth/info');
    assert.equal(me.type, 'apiKey');
    assert.equal(me.api_key?.project.id, b.projectId);
    assert.equal(me.api_key?.issuing_user.email, 'admin@basin.localhost');

    // A service: QUEUED with its initial password, then READY.
    const created = await basin.POST('/v1/projects/{project_id}/services', {
      params: { path: P },
      body: { name: 'metrics', cpu_millis: '1000', memory_gbs: '4' },
    });
    assert.equal(created.status, 'QUEUED');
    assert.equal(typeof created.initial_password, 'string');
    const S = { ...P, service_id: created.service_id as string };
    const one = { params: { path: S } };
    const ready = await basin.waitFor(created, 'READY');
    assert.equal(ready.initial_password, undefined);
    assertIntegers(ready);
    assert.deepEqual(ready.resources?.[0]?.spec, {
      cpu_millis: 1000,
      memory_gbs: 4,
      volume_type: 'sim',
    });

    // Stop, start, resize, HA.
    const s = '/v1/projects/{project_id}/services/{service_id}' as const;
    assert.equal((await basin.POST(`${s}/stop`, one)).status, 'PAUSING');
    await basin.waitFor(created, 'PAUSED');
    assert.equal((await basin.POST(`${s}/start`, one)).status, 'RESUMING');
    await basin.waitFor(created, 'READY');
    await basin.POST(`${s}/resize`, { ...one, body: { cpu_millis: '2000', memory_gbs: '8' } });
    const resized = await basin.waitFor(created, 'READY');
    assert.equal(resized.resources?.[0]?.spec.cpu_millis, 2000);
    await basin.POST(`${s}/setHA`, { ...one, body: { replica_count: 2, sync_replica_count: 1 } });
    const ha = await basin.waitFor(created, 'READY');
    assert.deepEqual(ha.ha_replicas, { replica_count: 2, sync_replica_count: 1 });

    // Password, environment, pooler, rename.
    const pw = await basin.POST(`${s}/updatePassword`, {
      ...one,
      body: { password: 'a-new-long-password' },
    });
    assert.equal(pw, undefined, '204, no body');
    await basin.POST(`${s}/setEnvironment`, { ...one, body: { environment: 'PROD' } });
    await basin.POST(`${s}/enablePooler`, one);
    const renamed = await basin.POST(`${s}/rename`, { ...one, body: { name: 'metrics-eu' } });
    assert.equal(renamed.name, 'metrics-eu');
    const configured = await basin.GET(s, one);
    assert.equal(configured.metadata?.environment, 'PROD');
    assert.equal(typeof configured.connection_pooler?.endpoint?.port, 'number');

    // Logs: newest first, every page followed, filters applied.
    const entries: Client.LogEntry[] = [];
    for await (const e of basin.logs(created, { severities: ['ERROR', 'FATAL'] })) entries.push(e);
    assert.ok(entries.length > 0, 'the sim writes errors too');
    for (const e of entries) assert.ok(['ERROR', 'FATAL'].includes(e.severity), e.severity);
    const first = await basin.GET(`${s}/logs`, one);
    assert.equal(first.last_cursor, first.lastCursor);

    // Forks: NOW, and PITR to a moment of the service's life (the README's is a minute ago).
    const fork = await basin.POST(`${s}/forkService`, { ...one, body: { fork_strategy: 'NOW' } });
    assert.equal(fork.forked_from?.service_id, S.service_id);
    await basin.waitFor(fork, 'READY');
    const pitr = await basin.POST(`${s}/forkService`, {
      ...one,
      body: {
        fork_strategy: 'PITR',
        target_time: new Date(
          (Date.parse(created.created as string) + Date.now()) / 2,
        ).toISOString(),
      },
    });
    await basin.waitFor(pitr, 'READY');

    // VPCs and peerings.
    const vpc = await basin.POST('/v1/projects/{project_id}/vpcs', {
      params: { path: P },
      body: { name: 'prod-net', cidr: '10.10.0.0/16', region_code: 'us-east-1' },
    });
    await basin.POST(`${s}/attachToVPC`, { ...one, body: { vpc_id: vpc.id as string } });
    const attached = await basin.GET(s, one);
    assert.equal(attached.vpc_endpoint?.vpc_id, vpc.id);
    assert.deepEqual(attached.vpcEndpoint, attached.vpc_endpoint);
    const peering = await basin.POST('/v1/projects/{project_id}/vpcs/{vpc_id}/peerings', {
      params: { path: { ...P, vpc_id: vpc.id as string } },
      body: {
        peer_account_id: '123456789012',
        peer_region_code: 'us-east-1',
        peer_vpc_id: 'vpc-0abc',
      },
    });
    assert.equal(typeof peering.id, 'string');

    // Read replica sets.
    const rs = await basin.POST(`${s}/replicaSets`, {
      ...one,
      body: { name: 'reporting', nodes: 2, cpu_millis: 1000, memory_gbs: 4 },
    });
    assert.equal(rs.status, 'creating');
    await b.waitFor(async () => {
      const sets = await basin.GET(`${s}/replicaSets`, one);
      return sets.find((r) => r.id === rs.id && r.status === 'active');
    }, 'the replica set to be active');

    // Errors carry their code.
    await assert.rejects(
      basin.POST(`${s}/resize`, { ...one, body: { cpu_millis: '3000', memory_gbs: '4' } }),
      (err: unknown) => err instanceof BasinError && err.code === 'INVALID_REQUEST',
    );

    // Delete: 202, DELETING, then gone.
    for (const gone of [fork, pitr, created]) {
      await basin.DELETE(s, { params: { path: { ...P, service_id: gone.service_id as string } } });
      await basin.waitFor(gone, 'DELETED');
    }
    assert.deepEqual(
      await basin.GET('/v1/projects/{project_id}/services', { params: { path: P } }),
      [],
    );
    await assert.rejects(
      basin.GET(s, one),
      (err: unknown) => err instanceof BasinError && err.code === 'NOT_FOUND' && err.status === 404,
    );
  },
);
