// VPC peerings: requested as `pending`, accepted by the network provisioner
// (`active` with a provisioned id), listed, read and deleted; never visible
// outside their VPC's project.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createProject, issueCredential } from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { createSimDriver } from '../../src/drivers/sim/sim-driver.js';
import type { NetworkProvisioner, ProvisionResult } from '../../src/engine/network-provisioner.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';

type Reply = Awaited<ReturnType<TestBasin['call']>>;

function assertError(res: Reply, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: status (body ${JSON.stringify(res.body)})`);
  assert.equal(res.body?.code, code, `${what}: code`);
  assert.equal(typeof res.body.message, 'string', `${what}: message`);
  assert.ok(res.body.message.length > 10, `${what}: message is a sentence`);
}

const request = {
  peer_account_id: '123456789012',
  peer_region_code: 'us-west-2',
  peer_vpc_id: 'vpc-0123456789abcdef0',
};

async function newVpc(b: TestBasin, cidr = '10.0.0.0/16'): Promise<string> {
  const res = await b.call('POST', `/v1/projects/${b.projectId}/vpcs`, {
    name: `net-${cidr}`,
    cidr,
    region_code: 'us-east-1',
  });
  assert.equal(res.status, 201);
  return res.body.id as string;
}

test('a peering is created, becomes active, is listed and read, and is deleted', async (t) => {
  const b = await startBasin(t);
  const vpcId = await newVpc(b);
  const base = `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`;

  assert.deepEqual((await b.call('GET', base)).body, []);

  const created = await b.call('POST', base, request);
  assert.equal(created.status, 201);
  assert.match(created.body.id, /^[0-9]+$/, 'peering ids are numeric strings');
  assert.ok(['pending', 'active'].includes(created.body.status), created.body.status);
  assert.equal(created.body.peer_account_id, request.peer_account_id);
  assert.equal(created.body.peer_region_code, request.peer_region_code);
  assert.equal(created.body.peer_vpc_id, request.peer_vpc_id);
  assert.equal(created.body.error_message, undefined);
  const id = created.body.id as string;

  const active = await eventually(async () => {
    const res = await b.call('GET', `${base}/${id}`);
    return res.status === 200 && res.body.status === 'active' ? res.body : undefined;
  }, 'peering active');
  assert.equal(typeof active.provisioned_id, 'string');
  assert.ok(active.provisioned_id.length > 0);
  assert.equal(active.error_message, undefined);
  assert.deepEqual(active, {
    id,
    status: 'active',
    provisioned_id: active.provisioned_id,
    ...request,
  });

  const list = await b.call('GET', base);
  assert.equal(list.status, 200);
  assert.deepEqual(list.body, [active]);

  const deleted = await b.call('DELETE', `${base}/${id}`);
  assert.equal(deleted.status, 204);
  assert.equal(deleted.body, undefined, '204 has no body');

  assertError(await b.call('GET', `${base}/${id}`), 404, 'NOT_FOUND', 'GET after delete');
  assertError(await b.call('DELETE', `${base}/${id}`), 404, 'NOT_FOUND', 'second DELETE');
  assert.deepEqual((await b.call('GET', base)).body, []);
});

test('several peerings of a VPC are listed; each VPC lists only its own', async (t) => {
  const b = await startBasin(t);
  const vpcA = await newVpc(b, '10.0.0.0/16');
  const vpcB = await newVpc(b, '10.1.0.0/16');
  const p = `/v1/projects/${b.projectId}/vpcs`;
  const a1 = await b.call('POST', `${p}/${vpcA}/peerings`, request);
  const a2 = await b.call('POST', `${p}/${vpcA}/peerings`, { ...request, peer_vpc_id: 'vpc-2' });
  const b1 = await b.call('POST', `${p}/${vpcB}/peerings`, { ...request, peer_vpc_id: 'vpc-3' });
  for (const r of [a1, a2, b1]) assert.equal(r.status, 201);

  const listA = await b.call('GET', `${p}/${vpcA}/peerings`);
  assert.deepEqual(
    listA.body.map((x: { id: string }) => x.id).sort(),
    [a1.body.id, a2.body.id].sort(),
  );
  const listB = await b.call('GET', `${p}/${vpcB}/peerings`);
  assert.deepEqual(
    listB.body.map((x: { id: string; peer_vpc_id: string }) => [x.id, x.peer_vpc_id]),
    [[b1.body.id, 'vpc-3']],
  );

  // A peering is only reachable under its own VPC.
  for (const [method, url] of [
    ['GET', `${p}/${vpcB}/peerings/${a1.body.id}`],
    ['DELETE', `${p}/${vpcB}/peerings/${a1.body.id}`],
  ] as const) {
    assertError(await b.call(method, url), 404, 'NOT_FOUND', `${method} under the wrong VPC`);
  }
  assert.equal((await b.call('GET', `${p}/${vpcA}/peerings/${a1.body.id}`)).status, 200);
});

test('peerings in a VPC of another project are 404', async (t) => {
  const b = await startBasin(t);
  const vpcId = await newVpc(b);
  const base = `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`;
  const peering = await b.call('POST', base, request);
  assert.equal(peering.status, 201);

  const other = await createProject(b.basin.store, systemClock, 'other');
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: other.id }, 'o');
  const as = async (method: string, url: string, body?: unknown) => {
    const res = await b.basin.app.inject({
      method: method as 'GET',
      url,
      headers: {
        authorization: `Bearer ${cred.bearerKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
    return {
      status: res.statusCode,
      body: res.body ? JSON.parse(res.body) : undefined,
      headers: {},
    };
  };
  for (const [method, url, body] of [
    ['POST', base, request],
    ['GET', base, undefined],
    ['GET', `${base}/${peering.body.id}`, undefined],
    ['DELETE', `${base}/${peering.body.id}`, undefined],
    // Its own project in the path, the other project's VPC.
    ['POST', `/v1/projects/${other.id}/vpcs/${vpcId}/peerings`, request],
    ['GET', `/v1/projects/${other.id}/vpcs/${vpcId}/peerings/${peering.body.id}`, undefined],
  ] as const) {
    assertError(
      await as(method, url, body),
      404,
      'NOT_FOUND',
      `${method} ${url} by another project`,
    );
  }
  // Nothing was added or removed.
  const list = await b.call('GET', base);
  assert.deepEqual(
    list.body.map((x: { id: string }) => x.id),
    [peering.body.id],
  );
});

test('bad peering bodies are 400 INVALID_REQUEST naming the field', async (t) => {
  const b = await startBasin(t);
  const vpcId = await newVpc(b);
  const base = `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`;
  const cases: Array<[string, unknown, RegExp]> = [];
  for (const field of Object.keys(request) as Array<keyof typeof request>) {
    const rest: Partial<typeof request> = { ...request };
    delete rest[field];
    cases.push([`missing ${field}`, rest, new RegExp(field)]);
    cases.push([`number ${field}`, { ...request, [field]: 12 }, new RegExp(field)]);
    cases.push([`empty ${field}`, { ...request, [field]: '' }, new RegExp(field)]);
    cases.push([`null ${field}`, { ...request, [field]: null }, new RegExp(field)]);
  }
  cases.push(['empty object', {}, /required/]);
  cases.push(['no body', undefined, /object|body/]);
  cases.push(['unknown extra field', { ...request, cidr: '10.0.0.0/16' }, /unknown field "cidr"/]);
  cases.push(['too long account id', { ...request, peer_account_id: '1'.repeat(129) }, /128/]);
  for (const [what, body, message] of cases) {
    const res = await b.call('POST', base, body);
    assertError(res, 400, 'INVALID_REQUEST', what);
    assert.match(res.body.message, message, `${what}: ${JSON.stringify(res.body.message)}`);
  }
  assert.deepEqual((await b.call('GET', base)).body, [], 'no bad request created a peering');
});

test('peerings of an unknown VPC, and unknown peerings, are 404', async (t) => {
  const b = await startBasin(t);
  const vpcId = await newVpc(b);
  const p = `/v1/projects/${b.projectId}/vpcs`;
  for (const [method, url, body] of [
    ['POST', `${p}/424242/peerings`, request],
    ['GET', `${p}/424242/peerings`, undefined],
    ['GET', `${p}/424242/peerings/1`, undefined],
    ['DELETE', `${p}/424242/peerings/1`, undefined],
    ['GET', `${p}/${vpcId}/peerings/424242`, undefined],
    ['DELETE', `${p}/${vpcId}/peerings/424242`, undefined],
    ['POST', `/v1/projects/nosuchproject/vpcs/${vpcId}/peerings`, request],
  ] as const) {
    const res = await b.call(method, url, body);
    assertError(res, 404, 'NOT_FOUND', `${method} ${url}`);
  }
  // A deleted VPC's peerings are gone with it.
  assert.equal((await b.call('DELETE', `${p}/${vpcId}`)).status, 204);
  assertError(
    await b.call('POST', `${p}/${vpcId}/peerings`, request),
    404,
    'NOT_FOUND',
    'peering on a deleted VPC',
  );
});

/**
 * A provisioner that holds each peering `pending` until released, then
 * answers as told: so that every status is seen in GET.
 */
function heldProvisioner(answer: ProvisionResult) {
  let released = false;
  const provisioner: NetworkProvisioner = {
    async provision() {
      return released ? answer : { done: false, retryAfterMs: 10, reason: 'building the link' };
    },
  };
  return { provisioner, release: () => (released = true) };
}

/** A sim driver that remembers the last spec applied to each service. */
function recordingSim() {
  const driver = createSimDriver({ delayMs: 0, clock: systemClock });
  const specs = new Map<string, ServiceSpec>();
  const apply = driver.applyService.bind(driver);
  driver.applyService = (spec) => {
    specs.set(spec.serviceId, spec);
    return apply(spec);
  };
  return { driver, cidrs: (id: string) => specs.get(id)?.allowedCidrs };
}

test('an active peering opens its VPC’s services to the peer network; deleting it closes them again', async (t) => {
  const held = heldProvisioner({
    done: true,
    status: 'active',
    provisionedId: 'pcx-1',
    errorMessage: null,
    // A public block is never admitted: only private ones a VPC could have.
    peerCidrs: ['10.50.0.0/16', '8.8.8.0/24'],
  });
  const sim = recordingSim();
  const b = await startBasin(t, { options: { driver: sim.driver, provisioner: held.provisioner } });
  const vpcId = await newVpc(b, '10.0.0.0/16');
  const services = `/v1/projects/${b.projectId}/services`;
  const created = await b.call('POST', services, { name: 'db' });
  const id = created.body.service_id as string;
  const ready = () =>
    eventually(
      async () => (await b.call('GET', `${services}/${id}`)).body.status === 'READY',
      'READY',
    );
  await ready();
  assert.equal(
    (await b.call('POST', `${services}/${id}/attachToVPC`, { vpc_id: vpcId })).status,
    202,
  );
  await ready();
  await b.basin.engine.idle();
  assert.deepEqual(sim.cidrs(id), ['10.0.0.0/16']);

  const base = `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`;
  const created2 = await b.call('POST', base, request);
  assert.equal(created2.status, 201);
  assert.equal(created2.body.status, 'pending');
  const peering = `${base}/${created2.body.id}`;
  // Pending for as long as the provisioner builds the link: GET shows it.
  await new Promise((r) => setTimeout(r, 50));
  assert.equal((await b.call('GET', peering)).body.status, 'pending');
  assert.deepEqual(sim.cidrs(id), ['10.0.0.0/16'], 'nothing opens before it is active');
  held.release();
  await eventually(async () => (await b.call('GET', peering)).body.status === 'active', 'active');
  await b.basin.engine.idle();
  assert.deepEqual(sim.cidrs(id), ['10.0.0.0/16', '10.50.0.0/16']);
  assert.equal((await b.call('GET', `${services}/${id}`)).body.status, 'READY');

  assert.equal((await b.call('DELETE', peering)).status, 204);
  await b.basin.engine.idle();
  assert.deepEqual(sim.cidrs(id), ['10.0.0.0/16']);
});

test('a failed peering shows failed with its reason and opens nothing', async (t) => {
  const held = heldProvisioner({
    done: true,
    status: 'failed',
    provisionedId: null,
    errorMessage: 'the peer account refused the link',
    peerCidrs: ['10.50.0.0/16'],
  });
  const sim = recordingSim();
  const b = await startBasin(t, { options: { driver: sim.driver, provisioner: held.provisioner } });
  const vpcId = await newVpc(b, '10.0.0.0/16');
  const services = `/v1/projects/${b.projectId}/services`;
  const id = (await b.call('POST', services, { name: 'db' })).body.service_id as string;
  await eventually(
    async () => (await b.call('GET', `${services}/${id}`)).body.status === 'READY',
    'READY',
  );
  await b.call('POST', `${services}/${id}/attachToVPC`, { vpc_id: vpcId });
  const base = `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`;
  const peering = `${base}/${(await b.call('POST', base, request)).body.id}`;
  assert.equal((await b.call('GET', peering)).body.status, 'pending');
  held.release();
  const failed = await eventually(async () => {
    const res = await b.call('GET', peering);
    return res.body.status === 'failed' ? res.body : undefined;
  }, 'failed');
  assert.equal(failed.error_message, 'the peer account refused the link');
  await b.basin.engine.idle();
  assert.deepEqual(sim.cidrs(id), ['10.0.0.0/16']);
});
