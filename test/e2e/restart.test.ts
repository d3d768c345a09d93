// Killing the server (kill -9) in the middle of operations loses nothing: on
// restart, every operation that was accepted completes. Basin as shipped
// (dist/main.js) on the sim driver, slowed down so the kill lands mid-way.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';

test(
  'operations interrupted by kill -9 complete after a restart',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim' });
    // Slow sim: every state change takes 1.5 s, so the kill lands mid-operation.
    const first = await inst.start({ env: { BASIN_SIM_DELAY_MS: '1500' } });
    const projectId = first.projectId;
    const base = first.servicePath();

    // One service that will be READY before the kill, to stop and to delete.
    const ready = (await first.call('POST', base, { name: 'ready' })).body.service_id;
    const doomed = (await first.call('POST', base, { name: 'doomed' })).body.service_id;
    await first.waitForStatus(ready, 'READY');
    await first.waitForStatus(doomed, 'READY');

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
    const vpc = await first.call('POST', `/projects/${projectId}/vpcs`, {
      name: 'v',
      cidr: '10.1.0.0/16',
      region_code: 'us-east-1',
    });
    assert.equal(vpc.status, 201);
    const peering = await first.call(
      'POST',
      `/projects/${projectId}/vpcs/${vpc.body.id}/peerings`,
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
    await first.kill();

    const second = await inst.start({ env: { BASIN_SIM_DELAY_MS: '100' } });
    await second.waitForStatus(fresh, 'READY');
    await second.waitForStatus(ready, 'PAUSED');
    await second.waitGone(doomed);
    const list = (await second.call('GET', base)).body
      .map((s: { service_id: string }) => s.service_id)
      .sort();
    assert.deepEqual(list, [fresh, ready].sort());
    // The data written before the kill is all there.
    const vpcs = (await second.call('GET', `/projects/${projectId}/vpcs`)).body;
    assert.deepEqual(
      vpcs.map((v: { id: string }) => v.id),
      [vpc.body.id],
    );
    const p = await second.waitFor(async () => {
      const got = (
        await second.call(
          'GET',
          `/projects/${projectId}/vpcs/${vpc.body.id}/peerings/${peering.body.id}`,
        )
      ).body;
      return got.status === 'active' ? got : undefined;
    }, 'peering active');
    assert.match(p.provisioned_id, /^pcx-/);
    // The bootstrap credential was not issued twice: same single project.
    assert.equal((await second.call('GET', '/projects')).body.length, 1);
  },
);
