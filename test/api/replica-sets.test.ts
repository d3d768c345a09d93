import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ReplicaSetSpec } from '../../src/drivers/driver.js';
import { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import type { Progress } from '../../src/domain/progress.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';
import {
  assertError,
  getService,
  pausedService,
  readyService,
  serviceUrl,
  waitGone,
} from './service-helpers.js';

const rsBody = { name: 'readers', nodes: 2, cpu_millis: 1000, memory_gbs: 4 };
const setsUrl = (b: TestBasin, svc: string) => `${serviceUrl(b, svc)}/replicaSets`;
const setUrl = (b: TestBasin, svc: string, rs: string) => `${setsUrl(b, svc)}/${rs}`;

async function listSets(b: TestBasin, svc: string): Promise<any[]> {
  const res = await b.call('GET', setsUrl(b, svc));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

function waitForSet(b: TestBasin, svc: string, rs: string, status: string): Promise<any> {
  return eventually(async () => {
    const found = (await listSets(b, svc)).find((r) => r.id === rs);
    return found?.status === status ? found : undefined;
  }, `replica set ${rs} ${status}`);
}

async function createSet(b: TestBasin, svc: string, body: unknown = rsBody): Promise<any> {
  const res = await b.call('POST', setsUrl(b, svc), body);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body;
}

test('create: 202 creating → active; listed, shown in the service, readable as a standby service', async (t) => {
  const b = await startBasin(t);
  const svc = await readyService(b, { name: 'primary', environment_tag: 'PROD', addons: [] });
  assert.deepEqual(await listSets(b, svc.id), []);

  const rs = await createSet(b, svc.id);
  assert.match(rs.id, /^[a-z0-9]{10}$/);
  assert.equal(rs.name, 'readers');
  assert.equal(rs.nodes, 2);
  assert.equal(rs.cpu_millis, 1000);
  assert.equal(rs.memory_gbs, 4);
  assert.equal(rs.status, 'creating');
  assert.equal(rs.endpoint.host, svc.ready.endpoint.host);
  assert.ok(Number.isInteger(rs.endpoint.port));
  assert.notEqual(rs.endpoint.port, svc.ready.endpoint.port);
  assert.deepEqual(rs.metadata, { environment: 'PROD' }, 'inherits the service environment');
  assert.equal(rs.connection_pooler, undefined);

  const active = await waitForSet(b, svc.id, rs.id, 'active');
  assert.deepEqual(active, { ...rs, status: 'active' });
  const list = await listSets(b, svc.id);
  assert.deepEqual(list, [active]);
  assert.deepEqual((await getService(b, svc.id)).read_replica_sets, [active]);

  // The replica set seen as a service: a standby of its primary.
  const view = await getService(b, rs.id);
  assert.equal(view.service_id, rs.id);
  assert.equal(view.project_id, b.projectId);
  assert.equal(view.name, 'readers');
  assert.equal(view.status, 'READY');
  assert.equal(view.service_type, 'POSTGRES');
  assert.equal(view.region_code, svc.ready.region_code);
  assert.deepEqual(view.forked_from, {
    is_standby: true,
    project_id: b.projectId,
    service_id: svc.id,
  });
  assert.deepEqual(view.endpoint, rs.endpoint);
  assert.deepEqual(view.resources[0].spec, { cpu_millis: 1000, memory_gbs: 4, volume_type: 'sim' });
  assert.deepEqual(view.metadata, { environment: 'PROD' });
  assert.equal(view.initial_password, undefined);
  // It is not listed among the services.
  const services = (await b.call('GET', `/v1/projects/${b.projectId}/services`)).body;
  assert.deepEqual(
    services.map((s: any) => s.service_id),
    [svc.id],
  );

  // A second replica set.
  const two = await createSet(b, svc.id, {
    name: 'more',
    nodes: 1,
    cpu_millis: 500,
    memory_gbs: 2,
  });
  await waitForSet(b, svc.id, two.id, 'active');
  assert.deepEqual((await listSets(b, svc.id)).map((r) => r.id).sort(), [rs.id, two.id].sort());
});

test('resize, pooler, environment and delete of a replica set', async (t) => {
  const b = await startBasin(t);
  const svc = await readyService(b);
  const rs = await createSet(b, svc.id);
  await waitForSet(b, svc.id, rs.id, 'active');
  const url = setUrl(b, svc.id, rs.id);

  const resize = await b.call('POST', `${url}/resize`, { cpu_millis: '2000', memory_gbs: '8' });
  assert.equal(resize.status, 202);
  assert.deepEqual(Object.keys(resize.body), ['message']);
  assert.match(resize.body.message, new RegExp(rs.id));
  const resized = await waitForSet(b, svc.id, rs.id, 'active');
  assert.equal(resized.cpu_millis, 2000);
  assert.equal(resized.memory_gbs, 8);
  assertError(
    await b.call('POST', `${url}/resize`, { cpu_millis: '2000', memory_gbs: '8' }),
    409,
    'CONFLICT',
    /already has/,
  );
  // Back down to the smallest size.
  assert.equal(
    (await b.call('POST', `${url}/resize`, { cpu_millis: '500', memory_gbs: '2' })).status,
    202,
  );
  assert.equal((await waitForSet(b, svc.id, rs.id, 'active')).memory_gbs, 2);

  const on = await b.call('POST', `${url}/enablePooler`);
  assert.equal(on.status, 200);
  assert.deepEqual(Object.keys(on.body), ['message']);
  const pooled = (await listSets(b, svc.id))[0];
  assert.equal(pooled.connection_pooler.endpoint.host, rs.endpoint.host);
  assert.notEqual(pooled.connection_pooler.endpoint.port, rs.endpoint.port);
  assert.deepEqual((await getService(b, rs.id)).connection_pooler, pooled.connection_pooler);
  assertError(await b.call('POST', `${url}/enablePooler`), 409, 'CONFLICT', /already enabled/);
  const off = await b.call('POST', `${url}/disablePooler`);
  assert.equal(off.status, 200);
  assert.deepEqual(Object.keys(off.body), ['message']);
  assert.equal((await listSets(b, svc.id))[0].connection_pooler, undefined);
  assertError(await b.call('POST', `${url}/disablePooler`), 409, 'CONFLICT', /already disabled/);
  // The primary's pooler is a different thing and stays off.
  assert.equal((await getService(b, svc.id)).connection_pooler, undefined);

  const env = await b.call('POST', `${url}/setEnvironment`, { environment: 'PROD' });
  assert.equal(env.status, 200);
  assert.deepEqual(Object.keys(env.body), ['message']);
  assert.deepEqual((await listSets(b, svc.id))[0].metadata, { environment: 'PROD' });
  assert.deepEqual(
    (await getService(b, svc.id)).metadata,
    { environment: 'DEV' },
    'primary unchanged',
  );
  for (const body of [{ environment: 'QA' }, {}, { environment: 'PROD', x: 1 }]) {
    assertError(await b.call('POST', `${url}/setEnvironment`, body), 400, 'INVALID_REQUEST');
  }
  await b.basin.engine.idle();
  assert.equal((await listSets(b, svc.id))[0].status, 'active');

  const del = await b.call('DELETE', url);
  assert.equal(del.status, 202);
  assert.equal(del.body, undefined);
  await eventually(async () => (await listSets(b, svc.id)).length === 0, 'replica set gone');
  assert.deepEqual((await getService(b, svc.id)).read_replica_sets, []);
  assertError(await b.call('GET', serviceUrl(b, rs.id)), 404, 'NOT_FOUND');
  assertError(await b.call('DELETE', url), 404, 'NOT_FOUND');
  assert.equal((await getService(b, svc.id)).status, 'READY');
});

test('bad replica set requests: 400 for bodies, 409 for states, 404 for unknown ids', async (t) => {
  const b = await startBasin(t);
  const svc = await readyService(b);
  const bad: [unknown, RegExp?][] = [
    [{ ...rsBody, cpu_millis: '1000' }, /cpu_millis/],
    [{ ...rsBody, memory_gbs: '4' }, /memory_gbs/],
    [{ ...rsBody, nodes: 0 }, /nodes/],
    [{ ...rsBody, nodes: -1 }, /nodes/],
    [{ ...rsBody, nodes: 1.5 }, /nodes/],
    [{ ...rsBody, nodes: 11 }, /nodes must be a whole number from 1 to 10/],
    [{ ...rsBody, nodes: '2' }, /nodes/],
    [{ ...rsBody, cpu_millis: 3000 }, /No size offers 3000m CPU/],
    [{ ...rsBody, cpu_millis: 1000, memory_gbs: 8 }, /No size offers 1000m CPU with 8 GB memory/],
    [{ ...rsBody, cpu_millis: 0 }, /cpu_millis/],
    [{ ...rsBody, memory_gbs: -4 }, /memory_gbs/],
    [{ ...rsBody, cpu_millis: 'shared', memory_gbs: 'shared' }, /cpu_millis/],
    [{ nodes: 2, cpu_millis: 1000, memory_gbs: 4 }, /name/],
    [{ ...rsBody, name: '' }, /name must not be empty/],
    [{ ...rsBody, name: 'x'.repeat(129) }, /at most 128/],
    [{ name: 'r', cpu_millis: 1000, memory_gbs: 4 }, /nodes/],
    [{ name: 'r', nodes: 1, memory_gbs: 4 }, /cpu_millis/],
    [{ name: 'r', nodes: 1, cpu_millis: 1000 }, /memory_gbs/],
    [{ ...rsBody, region_code: 'us-east-1' }, /region_code|additional/],
  ];
  for (const [body, message] of bad) {
    const res = await b.call('POST', setsUrl(b, svc.id), body);
    assert.equal(
      res.status,
      400,
      `${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body)}`,
    );
    assertError(res, 400, 'INVALID_REQUEST', message);
  }
  assertError(await b.call('POST', setsUrl(b, svc.id)), 400, 'INVALID_REQUEST');
  assert.deepEqual(await listSets(b, svc.id), []);

  // On a paused or unknown service.
  const paused = await pausedService(b);
  assertError(
    await b.call('POST', setsUrl(b, paused), rsBody),
    409,
    'CONFLICT',
    /add a read replica set to service .* while it is PAUSED/,
  );
  assertError(await b.call('POST', setsUrl(b, 'nosuchsvc1'), rsBody), 404, 'NOT_FOUND');
  assertError(await b.call('GET', setsUrl(b, 'nosuchsvc1')), 404, 'NOT_FOUND');

  // Unknown replica sets, and a replica set addressed under another service.
  const rs = await createSet(b, svc.id);
  await waitForSet(b, svc.id, rs.id, 'active');
  const other = await readyService(b, { name: 'other' });
  for (const [svcId, rsId] of [
    [svc.id, 'nosuchrs01'],
    [other.id, rs.id],
  ] as const) {
    const url = setUrl(b, svcId, rsId);
    assertError(await b.call('DELETE', url), 404, 'NOT_FOUND', /Read replica set/);
    assertError(
      await b.call('POST', `${url}/resize`, { cpu_millis: '2000', memory_gbs: '8' }),
      404,
      'NOT_FOUND',
    );
    assertError(await b.call('POST', `${url}/enablePooler`), 404, 'NOT_FOUND');
    assertError(await b.call('POST', `${url}/disablePooler`), 404, 'NOT_FOUND');
    assertError(
      await b.call('POST', `${url}/setEnvironment`, { environment: 'PROD' }),
      404,
      'NOT_FOUND',
    );
  }
  assertError(await b.call('GET', serviceUrl(b, 'nosuchrs01')), 404, 'NOT_FOUND');

  // Bad resize bodies (strings, like a service resize).
  const url = setUrl(b, svc.id, rs.id);
  for (const [body, message] of [
    [{ cpu_millis: 2000, memory_gbs: 8 }, /cpu_millis/],
    [{ cpu_millis: '2000' }, /memory_gbs/],
    [{ cpu_millis: 'shared', memory_gbs: 'shared' }, /shared size is only for creating or forking/],
    [{ cpu_millis: '3000', memory_gbs: '12' }, /No size offers/],
  ] as [unknown, RegExp][]) {
    assertError(await b.call('POST', `${url}/resize`, body), 400, 'INVALID_REQUEST', message);
  }
  const after = (await listSets(b, svc.id))[0];
  assert.equal(after.status, 'active');
  assert.equal(after.cpu_millis, 1000);
});

test('service endpoints that change a service refuse a replica set id with a 409 naming its path', async (t) => {
  const b = await startBasin(t);
  const svc = await readyService(b);
  const rs = await createSet(b, svc.id);
  await waitForSet(b, svc.id, rs.id, 'active');
  const vpc = await b.call('POST', `/v1/projects/${b.projectId}/vpcs`, {
    name: 'net',
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(vpc.status, 201);

  const url = serviceUrl(b, rs.id);
  const requests: [string, string, unknown?][] = [
    ['DELETE', url],
    ['POST', `${url}/stop`],
    ['POST', `${url}/start`],
    ['POST', `${url}/resize`, { cpu_millis: '2000', memory_gbs: '8' }],
    ['POST', `${url}/setHA`, { replica_count: 1 }],
    ['POST', `${url}/forkService`, { fork_strategy: 'NOW' }],
    ['POST', `${url}/attachToVPC`, { vpc_id: vpc.body.id }],
    ['POST', `${url}/detachFromVPC`, { vpc_id: vpc.body.id }],
    ['POST', `${url}/enablePooler`],
    ['POST', `${url}/disablePooler`],
    ['POST', `${url}/updatePassword`, { password: 'long enough' }],
    ['POST', `${url}/setEnvironment`, { environment: 'PROD' }],
    ['POST', `${url}/replicaSets`, rsBody],
  ];
  const path = `/projects/${b.projectId}/services/${svc.id}/replicaSets/${rs.id}`;
  for (const [method, u, body] of requests) {
    const res = await b.call(method, u, body);
    assert.equal(res.status, 409, `${method} ${u} → ${res.status} ${JSON.stringify(res.body)}`);
    assertError(res, 409, 'CONFLICT');
    assert.ok(res.body.message.includes(path), res.body.message);
  }
  // Nothing changed.
  const after = (await listSets(b, svc.id))[0];
  assert.equal(after.status, 'active');
  assert.equal(after.connection_pooler, undefined);
  assert.deepEqual(after.metadata, { environment: 'DEV' });
  // Logs can be read through the service view.
  const logs = await b.call('GET', `${url}/logs`);
  assert.equal(logs.status, 200);
  assert.ok(logs.body.logs.length > 0);
});

test('transitional replica set states: creating, resizing and deleting refuse what they cannot do', async (t) => {
  const b = await startBasin(t, { env: { BASIN_SIM_DELAY_MS: '800' } });
  const svc = await readyService(b);
  const rs = await createSet(b, svc.id);
  assert.equal(rs.status, 'creating');
  const url = setUrl(b, svc.id, rs.id);
  const resizeTo = (cpu: string, mem: string) =>
    b.call('POST', `${url}/resize`, { cpu_millis: cpu, memory_gbs: mem });

  assert.equal((await listSets(b, svc.id))[0].status, 'creating');
  assert.equal((await getService(b, rs.id)).status, 'CONFIGURING');
  assertError(await resizeTo('2000', '8'), 409, 'CONFLICT', /while it is creating/);
  await waitForSet(b, svc.id, rs.id, 'active');
  assert.equal((await getService(b, rs.id)).status, 'READY');

  assert.equal((await resizeTo('2000', '8')).status, 202);
  const resizing = (await listSets(b, svc.id))[0];
  assert.equal(resizing.status, 'resizing');
  assert.equal(resizing.cpu_millis, 2000);
  assertError(await resizeTo('4000', '16'), 409, 'CONFLICT', /while it is resizing/);
  await waitForSet(b, svc.id, rs.id, 'active');

  const del = await b.call('DELETE', url);
  assert.equal(del.status, 202);
  assert.equal((await listSets(b, svc.id))[0].status, 'deleting');
  assert.equal((await getService(b, rs.id)).status, 'DELETING');
  assertError(await b.call('DELETE', url), 409, 'CONFLICT', /already being deleted/);
  assertError(await resizeTo('4000', '16'), 409, 'CONFLICT', /while it is deleting/);
  assertError(await b.call('POST', `${url}/enablePooler`), 409, 'CONFLICT', /while it is deleting/);
  assertError(
    await b.call('POST', `${url}/setEnvironment`, { environment: 'PROD' }),
    409,
    'CONFLICT',
  );
  await eventually(async () => (await listSets(b, svc.id)).length === 0, 'replica set gone');
});

test('deleting a service removes its replica sets', async (t) => {
  const b = await startBasin(t);
  const svc = await readyService(b);
  const keep = await readyService(b, { name: 'keep' });
  const one = await createSet(b, svc.id);
  const two = await createSet(b, svc.id, { ...rsBody, name: 'two' });
  const kept = await createSet(b, keep.id, { ...rsBody, name: 'kept' });
  await waitForSet(b, svc.id, one.id, 'active');
  await waitForSet(b, svc.id, two.id, 'active');
  await waitForSet(b, keep.id, kept.id, 'active');

  assert.equal((await b.call('DELETE', serviceUrl(b, svc.id))).status, 202);
  await waitGone(b, svc.id);
  await b.basin.engine.idle();
  for (const rs of [one, two]) {
    assertError(await b.call('GET', serviceUrl(b, rs.id)), 404, 'NOT_FOUND');
    assert.equal(await b.basin.store.replicaSets.get(rs.id), undefined);
  }
  assertError(await b.call('GET', setsUrl(b, svc.id)), 404, 'NOT_FOUND');
  // The other service's replica set is untouched.
  assert.deepEqual(
    (await listSets(b, keep.id)).map((r) => [r.id, r.status]),
    [[kept.id, 'active']],
  );
});

/** The sim, remembering the last spec each replica set was applied with. */
class RecordingSim extends SimDriver {
  readonly lastSpec = new Map<string, ReplicaSetSpec>();

  constructor() {
    super({ delayMs: 0 });
  }

  override async applyReplicaSet(spec: ReplicaSetSpec): Promise<Progress> {
    this.lastSpec.set(spec.replicaSetId, spec);
    return super.applyReplicaSet(spec);
  }
}

test("a replica set follows its service's password and network: it converges after the service", async (t) => {
  const driver = new RecordingSim();
  const b = await startBasin(t, { options: { driver } });
  const svc = await readyService(b);
  const rs = await createSet(b, svc.id);
  await waitForSet(b, svc.id, rs.id, 'active');
  const before = driver.lastSpec.get(rs.id)?.primary.passwordVerifier;
  assert.ok(before);

  // Its pooler takes the service's password: the new one reaches the set.
  const pw = await b.call('POST', `${serviceUrl(b, svc.id)}/updatePassword`, {
    password: 'the set follows this',
  });
  assert.equal(pw.status, 204);
  const verifier = (await b.basin.store.services.get(svc.id))?.passwordVerifier;
  assert.notEqual(verifier, before);
  await eventually(
    async () => driver.lastSpec.get(rs.id)?.primary.passwordVerifier === verifier,
    "the set applied with the service's new verifier",
  );

  // Its access rules follow the service's VPC.
  const vpc = await b.call('POST', `/v1/projects/${b.projectId}/vpcs`, {
    name: 'net',
    cidr: '10.77.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(vpc.status, 201);
  const attach = await b.call('POST', `${serviceUrl(b, svc.id)}/attachToVPC`, {
    vpc_id: vpc.body.id,
  });
  assert.equal(attach.status, 202);
  await eventually(
    async () => driver.lastSpec.get(rs.id)?.allowedCidrs.includes('10.77.0.0/16'),
    "the set applied with the service's VPC",
  );
  await b.basin.engine.idle();
  assert.equal((await listSets(b, svc.id))[0].status, 'active', 'its status is untouched');
});

/** A sim whose hosts have no room for more than `room` nodes of 1 CPU (what the hosts driver says as a 503), and no set of 0 CPU. */
class RoomSim extends SimDriver {
  asked: { serviceId: string; nodes: number; replicaSetId?: string }[] = [];

  constructor(private readonly room: number) {
    super({ delayMs: 0 });
  }

  replicaSetRefusal(
    serviceId: string,
    size: { cpuMillis: number },
    nodes: number,
    replicaSetId?: string,
  ): Promise<{ invalid?: string; unavailable?: string } | undefined> {
    this.asked.push({ serviceId, nodes, ...(replicaSetId ? { replicaSetId } : {}) });
    const cpus = (size.cpuMillis / 1000) * nodes;
    return Promise.resolve(
      cpus > this.room ? { unavailable: `no host has ${cpus} CPUs free` } : undefined,
    );
  }
}

test('a set no host has room for is refused with a 503 before anything is queued, at create and at resize', async (t) => {
  const driver = new RoomSim(2);
  const b = await startBasin(t, { options: { driver } });
  const svc = await readyService(b);

  const tooBig = await b.call('POST', setsUrl(b, svc.id), { ...rsBody, nodes: 3 });
  assertError(
    tooBig,
    503,
    'UNAVAILABLE',
    /cannot place the read replica set now: no host has 3 CPUs free/,
  );
  assert.deepEqual(await listSets(b, svc.id), [], 'nothing made');

  const rs = await createSet(b, svc.id);
  await waitForSet(b, svc.id, rs.id, 'active');
  const resize = await b.call('POST', `${setUrl(b, svc.id, rs.id)}/resize`, {
    cpu_millis: '2000',
    memory_gbs: '8',
  });
  assertError(
    resize,
    503,
    'UNAVAILABLE',
    /cannot resize the read replica set now: no host has 4 CPUs free/,
  );
  const [kept] = await listSets(b, svc.id);
  assert.equal(kept.status, 'active', 'nothing queued');
  assert.equal(kept.cpu_millis, 1000, 'its size unchanged');
  assert.deepEqual(driver.asked.at(-1), { serviceId: svc.id, nodes: 2, replicaSetId: rs.id });
});
