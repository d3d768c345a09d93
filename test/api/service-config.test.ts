import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startBasin, type TestBasin } from '../helpers.js';
import {
  assertError,
  getService,
  pausedService,
  readyService,
  serviceUrl,
  waitForStatus,
} from './service-helpers.js';

async function createVpc(b: TestBasin, cidr: string, region = 'us-east-1'): Promise<string> {
  const res = await b.call('POST', `/v1/projects/${b.projectId}/vpcs`, {
    name: `net ${cidr}`,
    cidr,
    region_code: region,
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.id;
}

const spec = (s: any) => s.resources[0].spec;

test('resize: 202 CONFIGURING, then READY with the new resources', async (t) => {
  const b = await startBasin(t);
  const { id, ready } = await readyService(b);
  assert.deepEqual(spec(ready), { cpu_millis: 500, memory_gbs: 2, volume_type: 'sim' });

  const res = await b.call('POST', `${serviceUrl(b, id)}/resize`, {
    cpu_millis: '2000',
    memory_gbs: '8',
  });
  assert.equal(res.status, 202);
  assert.equal(res.body.service_id, id);
  assert.equal(res.body.status, 'CONFIGURING');
  assert.equal(res.body.initial_password, undefined);
  assert.deepEqual(spec(res.body), { cpu_millis: 2000, memory_gbs: 8, volume_type: 'sim' });
  const after = await waitForStatus(b, id, 'READY');
  assert.deepEqual(spec(after), { cpu_millis: 2000, memory_gbs: 8, volume_type: 'sim' });

  // The same size again changes nothing: 409.
  assertError(
    await b.call('POST', `${serviceUrl(b, id)}/resize`, { cpu_millis: '2000', memory_gbs: '8' }),
    409,
    'CONFLICT',
    /already has 2000m CPU and 8 GB memory/,
  );
  // A shared service can be resized to a dedicated size.
  const shared = await readyService(b, { name: 's', cpu_millis: 'shared', memory_gbs: 'shared' });
  const up = await b.call('POST', `${serviceUrl(b, shared.id)}/resize`, {
    cpu_millis: '500',
    memory_gbs: '2',
  });
  assert.equal(up.status, 202, JSON.stringify(up.body));
  assert.deepEqual(spec(await waitForStatus(b, shared.id, 'READY')), {
    cpu_millis: 500,
    memory_gbs: 2,
    volume_type: 'sim',
  });
});

test('resize: bad bodies are 400, wrong states 409, unknown services 404', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = `${serviceUrl(b, id)}/resize`;
  const bad: [unknown, RegExp?][] = [
    [{ cpu_millis: 'shared', memory_gbs: 'shared' }, /shared size is only for creating or forking/],
    [{ cpu_millis: '1000', memory_gbs: 'shared' }, /shared/],
    [{ cpu_millis: 1000, memory_gbs: 4 }, /cpu_millis/],
    [{ cpu_millis: '1000', memory_gbs: 4 }, /memory_gbs/],
    [{ cpu_millis: '1000' }, /memory_gbs/],
    [{ memory_gbs: '4' }, /cpu_millis/],
    [{}, undefined],
    [{ cpu_millis: '3000', memory_gbs: '12' }, /No size offers 3000m CPU with 12 GB memory/],
    [{ cpu_millis: '1000', memory_gbs: '8' }, /No size offers/],
    [{ cpu_millis: 'big', memory_gbs: '4' }, /cpu_millis must be a positive number/],
    [{ cpu_millis: '1000', memory_gbs: '4', nodes: 2 }, /nodes|additional/],
  ];
  for (const [body, message] of bad) {
    assertError(await b.call('POST', url, body), 400, 'INVALID_REQUEST', message);
  }
  assertError(await b.call('POST', url), 400, 'INVALID_REQUEST');
  assert.deepEqual(spec(await getService(b, id)), {
    cpu_millis: 500,
    memory_gbs: 2,
    volume_type: 'sim',
  });

  const paused = await pausedService(b);
  assertError(
    await b.call('POST', `${serviceUrl(b, paused)}/resize`, {
      cpu_millis: '1000',
      memory_gbs: '4',
    }),
    409,
    'CONFLICT',
    /while it is PAUSED/,
  );
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/resize`, {
      cpu_millis: '1000',
      memory_gbs: '4',
    }),
    404,
    'NOT_FOUND',
  );
});

test('setHA: 202 CONFIGURING then READY, ha_replicas follow; bad counts are 400', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = `${serviceUrl(b, id)}/setHA`;

  const res = await b.call('POST', url, { replica_count: 2, sync_replica_count: 1 });
  assert.equal(res.status, 202);
  assert.equal(res.body.status, 'CONFIGURING');
  assert.deepEqual(res.body.ha_replicas, { replica_count: 2, sync_replica_count: 1 });
  assert.deepEqual((await waitForStatus(b, id, 'READY')).ha_replicas, {
    replica_count: 2,
    sync_replica_count: 1,
  });

  // Only one field: the other is kept (and the sync count follows a smaller replica count).
  assert.equal((await b.call('POST', url, { replica_count: 3 })).status, 202);
  assert.deepEqual((await waitForStatus(b, id, 'READY')).ha_replicas, {
    replica_count: 3,
    sync_replica_count: 1,
  });
  assert.equal((await b.call('POST', url, { sync_replica_count: 3 })).status, 202);
  assert.deepEqual((await waitForStatus(b, id, 'READY')).ha_replicas, {
    replica_count: 3,
    sync_replica_count: 3,
  });
  assert.equal((await b.call('POST', url, { replica_count: 0 })).status, 202);
  assert.deepEqual((await waitForStatus(b, id, 'READY')).ha_replicas, {
    replica_count: 0,
    sync_replica_count: 0,
  });

  const bad: [unknown, RegExp?][] = [
    [
      { replica_count: 1, sync_replica_count: 2 },
      /sync_replica_count \(2\) cannot exceed replica_count \(1\)/,
    ],
    [{ sync_replica_count: 1 }, /cannot exceed replica_count \(0\)/],
    [{ replica_count: -1 }, /replica_count/],
    [{ sync_replica_count: -1 }, /sync_replica_count/],
    [{ replica_count: 6 }, /replica_count must be a whole number from 0 to 5/],
    [{ replica_count: 1.5 }, /replica_count/],
    [{ replica_count: '2' }, /replica_count/],
    [{ replica_count: 1, extra: true }, /extra|additional/],
  ];
  for (const [body, message] of bad) {
    assertError(await b.call('POST', url, body), 400, 'INVALID_REQUEST', message);
  }
  assert.deepEqual((await getService(b, id)).ha_replicas, {
    replica_count: 0,
    sync_replica_count: 0,
  });

  const paused = await pausedService(b);
  assertError(
    await b.call('POST', `${serviceUrl(b, paused)}/setHA`, { replica_count: 1 }),
    409,
    'CONFLICT',
    /HA configuration .* while it is PAUSED/,
  );
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/setHA`, { replica_count: 1 }),
    404,
    'NOT_FOUND',
  );
});

test('attachToVPC / detachFromVPC: 202 {message}, vpcEndpoint follows; wrong VPCs are refused', async (t) => {
  const b = await startBasin(t);
  const { id, ready } = await readyService(b);
  const url = serviceUrl(b, id);
  const vpc = await createVpc(b, '10.0.0.0/16');
  const other = await createVpc(b, '10.1.0.0/16');
  const faraway = await createVpc(b, '10.2.0.0/16', 'eu-west-1');

  // Detaching a service that is in no VPC.
  assertError(
    await b.call('POST', `${url}/detachFromVPC`, { vpc_id: vpc }),
    409,
    'CONFLICT',
    /not attached/,
  );

  const attach = await b.call('POST', `${url}/attachToVPC`, { vpc_id: vpc });
  assert.equal(attach.status, 202);
  assert.deepEqual(Object.keys(attach.body), ['message']);
  assert.match(attach.body.message, new RegExp(`${id}.*${vpc}`));
  const attached = await getService(b, id);
  assert.equal(attached.status, 'CONFIGURING', 'until its access rules are applied');
  assert.deepEqual(attached.vpcEndpoint, {
    host: ready.endpoint.host,
    port: attached.vpcEndpoint.port,
    vpc_id: vpc,
  });
  assert.ok(Number.isInteger(attached.vpcEndpoint.port));
  await b.basin.engine.idle();
  assert.equal((await getService(b, id)).status, 'READY');

  assertError(
    await b.call('POST', `${url}/attachToVPC`, { vpc_id: vpc }),
    409,
    'CONFLICT',
    /already attached/,
  );
  assertError(
    await b.call('POST', `${url}/attachToVPC`, { vpc_id: other }),
    409,
    'CONFLICT',
    /detach it first/,
  );
  assertError(
    await b.call('POST', `${url}/detachFromVPC`, { vpc_id: other }),
    409,
    'CONFLICT',
    /not attached/,
  );
  assert.equal((await getService(b, id)).vpcEndpoint.vpc_id, vpc);

  const detach = await b.call('POST', `${url}/detachFromVPC`, { vpc_id: vpc });
  assert.equal(detach.status, 202);
  assert.deepEqual(Object.keys(detach.body), ['message']);
  const detached = await getService(b, id);
  assert.equal(detached.vpcEndpoint, undefined);
  assert.equal(detached.status, 'CONFIGURING');
  await b.basin.engine.idle();
  assert.equal((await getService(b, id)).status, 'READY');
  assertError(await b.call('POST', `${url}/detachFromVPC`, { vpc_id: vpc }), 409, 'CONFLICT');

  // A VPC of another region.
  assertError(
    await b.call('POST', `${url}/attachToVPC`, { vpc_id: faraway }),
    409,
    'CONFLICT',
    /eu-west-1.*us-east-1/,
  );
  // Unknown VPCs.
  assertError(
    await b.call('POST', `${url}/attachToVPC`, { vpc_id: '999999999' }),
    404,
    'NOT_FOUND',
    /999999999/,
  );
  assertError(
    await b.call('POST', `${url}/detachFromVPC`, { vpc_id: '999999999' }),
    404,
    'NOT_FOUND',
  );
  // Bad bodies.
  for (const body of [{}, { vpc_id: 5 }, { vpc_id: vpc, extra: 1 }]) {
    assertError(await b.call('POST', `${url}/attachToVPC`, body), 400, 'INVALID_REQUEST');
    assertError(await b.call('POST', `${url}/detachFromVPC`, body), 400, 'INVALID_REQUEST');
  }
  assertError(await b.call('POST', `${url}/attachToVPC`), 400, 'INVALID_REQUEST');
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/attachToVPC`, { vpc_id: vpc }),
    404,
    'NOT_FOUND',
  );
  assert.equal((await getService(b, id)).vpcEndpoint, undefined);

  // Attach again after the detach: fine.
  assert.equal((await b.call('POST', `${url}/attachToVPC`, { vpc_id: other })).status, 202);
  assert.equal((await getService(b, id)).vpcEndpoint.vpc_id, other);
});

test('enablePooler / disablePooler: 200 {message}, the pooler endpoint is shown only while enabled', async (t) => {
  const b = await startBasin(t);
  const { id, ready } = await readyService(b);
  const url = serviceUrl(b, id);
  assert.equal(ready.connection_pooler, undefined);

  const on = await b.call('POST', `${url}/enablePooler`);
  assert.equal(on.status, 200);
  assert.deepEqual(Object.keys(on.body), ['message']);
  assert.match(on.body.message, /enabled/);
  const enabled = await getService(b, id);
  const pooler = enabled.connection_pooler.endpoint;
  assert.equal(pooler.host, ready.endpoint.host);
  assert.ok(Number.isInteger(pooler.port));
  assert.notEqual(pooler.port, ready.endpoint.port);
  assertError(await b.call('POST', `${url}/enablePooler`), 409, 'CONFLICT', /already enabled/);

  const off = await b.call('POST', `${url}/disablePooler`);
  assert.equal(off.status, 200);
  assert.match(off.body.message, /disabled/);
  assert.equal((await getService(b, id)).connection_pooler, undefined);
  assertError(await b.call('POST', `${url}/disablePooler`), 409, 'CONFLICT', /already disabled/);

  // Enabled again, the pooler comes back where clients expect it.
  assert.equal((await b.call('POST', `${url}/enablePooler`, {})).status, 200);
  assert.deepEqual((await getService(b, id)).connection_pooler.endpoint, pooler);
  await b.basin.engine.idle();
  assert.equal((await getService(b, id)).status, 'READY');
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/enablePooler`),
    404,
    'NOT_FOUND',
  );
});

test('updatePassword: 204 with no body; the stored verifier changes; bad passwords are 400', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = `${serviceUrl(b, id)}/updatePassword`;
  const before = (await b.basin.store.services.get(id))?.passwordVerifier;

  const res = await b.call('POST', url, { password: 'correct horse battery' });
  assert.equal(res.status, 204);
  assert.equal(res.body, undefined);
  const after = (await b.basin.store.services.get(id))?.passwordVerifier;
  assert.ok(after && after !== before, 'a new verifier');
  assert.match(after, /^SCRAM-SHA-256\$/);
  assert.ok(!after.includes('correct horse battery'), 'the password itself is not stored');
  await b.basin.engine.idle();
  assert.equal((await getService(b, id)).status, 'READY');

  const bad: [unknown, RegExp?][] = [
    [{ password: 'short' }, /password must be 8 to 256 characters/],
    [{ password: '' }, /password/],
    [{ password: 'x'.repeat(257) }, /password must be 8 to 256 characters/],
    [{ password: 'line\nbreak!' }, /control characters/],
    [{}, /password/],
    [{ password: 12345678 }, /password/],
    [{ password: 'long enough', old: 'x' }, /old|additional/],
  ];
  for (const [body, message] of bad) {
    assertError(await b.call('POST', url, body), 400, 'INVALID_REQUEST', message);
  }
  assertError(await b.call('POST', url), 400, 'INVALID_REQUEST');
  assert.equal((await b.basin.store.services.get(id))?.passwordVerifier, after);
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/updatePassword`, {
      password: 'long enough',
    }),
    404,
    'NOT_FOUND',
  );
  // A paused service's password can be changed.
  const paused = await pausedService(b);
  assert.equal(
    (await b.call('POST', `${serviceUrl(b, paused)}/updatePassword`, { password: 'long enough' }))
      .status,
    204,
  );
});

test('setEnvironment: 200 {message}, metadata follows; bad values are 400', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = `${serviceUrl(b, id)}/setEnvironment`;

  const res = await b.call('POST', url, { environment: 'PROD' });
  assert.equal(res.status, 200);
  assert.deepEqual(Object.keys(res.body), ['message']);
  assert.match(res.body.message, /PROD/);
  const prod = await getService(b, id);
  assert.deepEqual(prod.metadata, { environment: 'PROD' });
  assert.equal(prod.status, 'READY');
  const list = await b.call('GET', `/v1/projects/${b.projectId}/services`);
  assert.deepEqual(list.body[0].metadata, { environment: 'PROD' });

  assert.equal((await b.call('POST', url, { environment: 'DEV' })).status, 200);
  assert.deepEqual((await getService(b, id)).metadata, { environment: 'DEV' });

  for (const body of [
    { environment: 'STAGING' },
    { environment: 'prod' },
    { environment: '' },
    { environment: 1 },
    {},
    { environment: 'PROD', extra: 1 },
  ]) {
    assertError(
      await b.call('POST', url, body),
      400,
      'INVALID_REQUEST',
      /environment|extra|additional/,
    );
  }
  assertError(await b.call('POST', url), 400, 'INVALID_REQUEST');
  assert.deepEqual((await getService(b, id)).metadata, { environment: 'DEV' });
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/setEnvironment`, { environment: 'PROD' }),
    404,
    'NOT_FOUND',
  );
});
