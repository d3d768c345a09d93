// Killing the server (kill -9) in the middle of operations loses nothing: on
// restart, every operation that was accepted completes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, tempDir } from '../helpers.js';
import { startServerProcess } from './server-process.js';

test('operations interrupted by kill -9 complete after a restart', async (t) => {
  const dataDir = tempDir(t);
  // Slow sim: every state change takes 1.5 s, so the kill lands mid-operation.
  const first = await startServerProcess(dataDir, { BASIN_SIM_DELAY_MS: '1500' });
  t.after(() => first.stop());
  const projectId = (await first.call('GET', '/v1/projects')).body[0].id;
  const base = `/v1/projects/${projectId}/services`;

  // One service that will be READY before the kill, to stop and to delete.
  const ready = (await first.call('POST', base, { name: 'ready' })).body.service_id;
  const doomed = (await first.call('POST', base, { name: 'doomed' })).body.service_id;
  await eventually(
    async () => (await first.call('GET', `${base}/${ready}`)).body.status === 'READY',
    'READY',
    15_000,
  );
  await eventually(
    async () => (await first.call('GET', `${base}/${doomed}`)).body.status === 'READY',
    'READY',
    15_000,
  );

  // Now start work and kill the server while all of it is in flight.
  const fresh = (await first.call('POST', base, { name: 'fresh' })).body.service_id;
  assert.equal((await first.call('POST', `${base}/${ready}/stop`)).status, 202);
  assert.equal((await first.call('DELETE', `${base}/${doomed}`)).status, 202);
  const rs = await first.call('POST', `${base}/${ready}/replicaSets`, {
    name: 'r',
    nodes: 1,
    cpu_millis: 500,
    memory_gbs: 2,
  });
  assert.equal(rs.status, 409, 'a PAUSING service takes no replica set'); // the stop above won
  const vpc = await first.call('POST', `/v1/projects/${projectId}/vpcs`, {
    name: 'v',
    cidr: '10.1.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(vpc.status, 201);
  const peering = await first.call(
    'POST',
    `/v1/projects/${projectId}/vpcs/${vpc.body.id}/peerings`,
    {
      peer_account_id: '123456789012',
      peer_region_code: 'us-east-1',
      peer_vpc_id: 'vpc-1',
    },
  );
  assert.equal(peering.status, 201);
  const states = {
    fresh: (await first.call('GET', `${base}/${fresh}`)).body.status,
    ready: (await first.call('GET', `${base}/${ready}`)).body.status,
    doomed: (await first.call('GET', `${base}/${doomed}`)).body.status,
  };
  assert.ok(['QUEUED', 'CONFIGURING'].includes(states.fresh), `fresh is ${states.fresh}`);
  assert.equal(states.ready, 'PAUSING');
  assert.equal(states.doomed, 'DELETING');
  await first.crash();

  const second = await startServerProcess(dataDir, { BASIN_SIM_DELAY_MS: '100' });
  t.after(() => second.stop());
  await eventually(
    async () => (await second.call('GET', `${base}/${fresh}`)).body.status === 'READY',
    'fresh READY',
    15_000,
  );
  await eventually(
    async () => (await second.call('GET', `${base}/${ready}`)).body.status === 'PAUSED',
    'PAUSED',
    15_000,
  );
  await eventually(
    async () => (await second.call('GET', `${base}/${doomed}`)).status === 404,
    'doomed gone',
    15_000,
  );
  const list = (await second.call('GET', base)).body
    .map((s: { service_id: string }) => s.service_id)
    .sort();
  assert.deepEqual(list, [fresh, ready].sort());
  // The data written before the kill is all there.
  const vpcs = (await second.call('GET', `/v1/projects/${projectId}/vpcs`)).body;
  assert.deepEqual(
    vpcs.map((v: { id: string }) => v.id),
    [vpc.body.id],
  );
  const p = await eventually(async () => {
    const got = (
      await second.call(
        'GET',
        `/v1/projects/${projectId}/vpcs/${vpc.body.id}/peerings/${peering.body.id}`,
      )
    ).body;
    return got.status === 'active' ? got : undefined;
  }, 'peering active');
  assert.match(p.provisioned_id, /^pcx-/);
  // The bootstrap credential was not issued twice: same single project.
  assert.equal((await second.call('GET', '/v1/projects')).body.length, 1);
});
