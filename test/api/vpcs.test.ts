// VPCs: the CRUD cycle, every kind of bad input, and the rules that keep a
// VPC while something still uses it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, startBasin, type TestBasin } from '../helpers.js';

type Reply = Awaited<ReturnType<TestBasin['call']>>;

function assertError(res: Reply, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: status (body ${JSON.stringify(res.body)})`);
  assert.equal(res.body?.code, code, `${what}: code`);
  assert.equal(typeof res.body.message, 'string', `${what}: message`);
  assert.ok(res.body.message.length > 10, `${what}: message is a sentence`);
}

const valid = { name: 'prod-net', cidr: '10.0.0.0/16', region_code: 'us-east-1' };

async function waitReady(b: TestBasin, serviceId: string) {
  await eventually(
    async () =>
      (await b.call('GET', `/v1/projects/${b.projectId}/services/${serviceId}`)).body.status ===
      'READY',
    `service ${serviceId} READY`,
  );
}

test('a VPC is created, listed, read, renamed and deleted', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;

  const empty = await b.call('GET', base);
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.body, []);

  const created = await b.call('POST', base, valid);
  assert.equal(created.status, 201);
  assert.match(created.body.id, /^[0-9]+$/, 'VPC ids are numeric strings');
  assert.deepEqual(created.body, { id: created.body.id, ...valid });
  const id = created.body.id as string;

  const second = await b.call('POST', base, {
    name: 'staging',
    cidr: '172.16.0.0/20',
    region_code: 'eu-west-1',
  });
  assert.equal(second.status, 201);
  assert.notEqual(second.body.id, id);

  const list = await b.call('GET', base);
  assert.equal(list.status, 200);
  const byId = (a: { id: string }, z: { id: string }) => a.id.localeCompare(z.id);
  assert.deepEqual([...list.body].sort(byId), [created.body, second.body].sort(byId));

  const got = await b.call('GET', `${base}/${id}`);
  assert.equal(got.status, 200);
  assert.deepEqual(got.body, created.body);

  const renamed = await b.call('POST', `${base}/${id}/rename`, { name: 'renamed' });
  assert.equal(renamed.status, 200);
  assert.deepEqual(renamed.body, { ...created.body, name: 'renamed' });
  assert.equal((await b.call('GET', `${base}/${id}`)).body.name, 'renamed');

  const deleted = await b.call('DELETE', `${base}/${id}`);
  assert.equal(deleted.status, 204);
  assert.equal(deleted.body, undefined, '204 has no body');

  assertError(await b.call('GET', `${base}/${id}`), 404, 'NOT_FOUND', 'GET after delete');
  assertError(await b.call('DELETE', `${base}/${id}`), 404, 'NOT_FOUND', 'second DELETE');
  assertError(
    await b.call('POST', `${base}/${id}/rename`, { name: 'x' }),
    404,
    'NOT_FOUND',
    'rename after delete',
  );
  assert.deepEqual(
    (await b.call('GET', base)).body.map((v: { id: string }) => v.id),
    [second.body.id],
  );
});

test('CIDRs are accepted in canonical form, /16 to /28, in every private range', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  for (const cidr of ['10.0.0.0/16', '10.255.255.240/28', '172.31.0.0/16', '192.168.1.0/24']) {
    const res = await b.call('POST', base, { ...valid, cidr });
    assert.equal(res.status, 201, `${cidr}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.cidr, cidr);
  }
});

test('names: 128 characters are accepted, 129 are not', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  const n128 = 'n'.repeat(128);
  const ok = await b.call('POST', base, { ...valid, name: n128 });
  assert.equal(ok.status, 201);
  assert.equal(ok.body.name, n128);

  const long = await b.call('POST', base, { ...valid, name: 'n'.repeat(129) });
  assertError(long, 400, 'INVALID_REQUEST', '129-character name');
  assert.match(long.body.message, /name/);
  assert.match(long.body.message, /128/);

  const renameLong = await b.call('POST', `${base}/${ok.body.id}/rename`, {
    name: 'n'.repeat(129),
  });
  assertError(renameLong, 400, 'INVALID_REQUEST', 'rename to 129 characters');
  assert.match(renameLong.body.message, /128/);
  const rename128 = await b.call('POST', `${base}/${ok.body.id}/rename`, { name: 'm'.repeat(128) });
  assert.equal(rename128.status, 200);
  // The failed rename changed nothing, the good one did.
  assert.equal((await b.call('GET', `${base}/${ok.body.id}`)).body.name, 'm'.repeat(128));
});

test('bad VPC create bodies are 400 INVALID_REQUEST naming what is wrong', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  const cases: Array<[string, unknown, RegExp]> = [
    ['missing name', { cidr: valid.cidr, region_code: valid.region_code }, /name/],
    ['missing cidr', { name: valid.name, region_code: valid.region_code }, /cidr/],
    ['missing region_code', { name: valid.name, cidr: valid.cidr }, /region_code/],
    ['empty object', {}, /required|must have/],
    ['number name', { ...valid, name: 42 }, /name/],
    ['number cidr', { ...valid, cidr: 10 }, /cidr/],
    ['null region_code', { ...valid, region_code: null }, /region_code/],
    ['array name', { ...valid, name: ['a'] }, /name/],
    ['empty name', { ...valid, name: '' }, /name/],
    ['blank name', { ...valid, name: '   ' }, /name/],
    ['name with a control character', { ...valid, name: 'a\u0007b' }, /name/],
    ['cidr without prefix', { ...valid, cidr: '10.0.0.0' }, /cidr/],
    ['cidr prefix 33', { ...valid, cidr: '10.0.0.0/33' }, /cidr/],
    ['cidr octet 300', { ...valid, cidr: '300.0.0.0/16' }, /cidr/],
    ['cidr not an address', { ...valid, cidr: 'abc' }, /cidr/],
    ['cidr empty', { ...valid, cidr: '' }, /cidr/],
    ['cidr IPv6', { ...valid, cidr: 'fd00::/64' }, /cidr/],
    ['cidr with leading zeros', { ...valid, cidr: '010.0.0.0/16' }, /cidr/],
    ['cidr with spaces', { ...valid, cidr: ' 10.0.0.0/16' }, /cidr/],
    ['host bits set', { ...valid, cidr: '10.0.0.1/16' }, /host bits.*10\.0\.0\.0\/16/],
    ['prefix /8 too wide', { ...valid, cidr: '10.0.0.0/8' }, /\/16.*\/28/],
    ['prefix /15 too wide', { ...valid, cidr: '10.0.0.0/15' }, /\/16.*\/28/],
    ['prefix /29 too narrow', { ...valid, cidr: '10.0.0.0/29' }, /\/16.*\/28/],
    ['public range', { ...valid, cidr: '8.8.0.0/16' }, /private/],
    ['public range next to 172.16/12', { ...valid, cidr: '172.32.0.0/16' }, /private/],
    ['unknown region', { ...valid, region_code: 'mars-north-1' }, /region_code.*us-east-1/],
    ['empty region', { ...valid, region_code: '' }, /region_code/],
    ['unknown extra field', { ...valid, colour: 'blue' }, /unknown field "colour"/],
  ];
  for (const [what, body, message] of cases) {
    const res = await b.call('POST', base, body);
    assertError(res, 400, 'INVALID_REQUEST', what);
    assert.match(res.body.message, message, `${what}: message ${JSON.stringify(res.body.message)}`);
  }
  assert.deepEqual((await b.call('GET', base)).body, [], 'no bad request created a VPC');
});

test('bad VPC rename bodies are 400 and leave the name alone', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  const id = (await b.call('POST', base, valid)).body.id as string;
  const cases: Array<[string, unknown]> = [
    ['no body', undefined],
    ['empty object', {}],
    ['number name', { name: 7 }],
    ['empty name', { name: '' }],
    ['unknown extra field', { name: 'x', cidr: '10.1.0.0/16' }],
  ];
  for (const [what, body] of cases) {
    assertError(
      await b.call('POST', `${base}/${id}/rename`, body),
      400,
      'INVALID_REQUEST',
      `rename: ${what}`,
    );
  }
  assert.equal((await b.call('GET', `${base}/${id}`)).body.name, valid.name);
});

test('unknown VPC ids are 404 NOT_FOUND', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  for (const [method, url, body] of [
    ['GET', `${base}/999999`, undefined],
    ['DELETE', `${base}/999999`, undefined],
    ['POST', `${base}/999999/rename`, { name: 'x' }],
    ['GET', `${base}/not-a-number`, undefined],
    ['GET', `/v1/projects/nosuchproject/vpcs`, undefined],
    ['POST', `/v1/projects/nosuchproject/vpcs`, valid],
  ] as const) {
    const res = await b.call(method, url, body);
    assertError(res, 404, 'NOT_FOUND', `${method} ${url}`);
  }
});

test('a VPC with a service attached cannot be deleted until the service is detached', async (t) => {
  const b = await startBasin(t);
  const p = `/v1/projects/${b.projectId}`;
  const vpc = await b.call('POST', `${p}/vpcs`, valid);
  const vpcId = vpc.body.id as string;
  const svc = await b.call('POST', `${p}/services`, { name: 'db', region_code: 'us-east-1' });
  assert.equal(svc.status, 202);
  const serviceId = svc.body.service_id as string;
  await waitReady(b, serviceId);

  const attach = await b.call('POST', `${p}/services/${serviceId}/attachToVPC`, { vpc_id: vpcId });
  assert.equal(attach.status, 202, JSON.stringify(attach.body));
  assert.equal(typeof attach.body.message, 'string');
  await waitReady(b, serviceId);
  const attached = await b.call('GET', `${p}/services/${serviceId}`);
  assert.equal(attached.body.vpcEndpoint?.vpc_id, vpcId);

  const refused = await b.call('DELETE', `${p}/vpcs/${vpcId}`);
  assertError(refused, 409, 'CONFLICT', 'delete VPC with a service');
  assert.match(refused.body.message, /detach/i, 'the message says what to do');
  assert.equal((await b.call('GET', `${p}/vpcs/${vpcId}`)).status, 200, 'the VPC is still there');

  const detach = await b.call('POST', `${p}/services/${serviceId}/detachFromVPC`, {
    vpc_id: vpcId,
  });
  assert.equal(detach.status, 202, JSON.stringify(detach.body));
  await waitReady(b, serviceId);
  const detached = await b.call('GET', `${p}/services/${serviceId}`);
  assert.equal(detached.body.vpcEndpoint, undefined);

  const deleted = await b.call('DELETE', `${p}/vpcs/${vpcId}`);
  assert.equal(deleted.status, 204);
  assert.equal(deleted.body, undefined);
  assertError(await b.call('GET', `${p}/vpcs/${vpcId}`), 404, 'NOT_FOUND', 'GET after delete');
});

test('a VPC with a peering cannot be deleted until the peering is deleted', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  const vpcId = (await b.call('POST', base, valid)).body.id as string;
  const peering = await b.call('POST', `${base}/${vpcId}/peerings`, {
    peer_account_id: '123456789012',
    peer_region_code: 'us-west-2',
    peer_vpc_id: 'vpc-0123456789abcdef0',
  });
  assert.equal(peering.status, 201);

  const refused = await b.call('DELETE', `${base}/${vpcId}`);
  assertError(refused, 409, 'CONFLICT', 'delete VPC with a peering');
  assert.match(refused.body.message, /peering/);
  assert.equal((await b.call('GET', `${base}/${vpcId}`)).status, 200);

  assert.equal(
    (await b.call('DELETE', `${base}/${vpcId}/peerings/${peering.body.id}`)).status,
    204,
  );
  assert.equal((await b.call('DELETE', `${base}/${vpcId}`)).status, 204);
  assert.equal((await b.call('GET', `${base}/${vpcId}`)).status, 404);
});

test('a CIDR that overlaps another VPC of the project in the same region is a 409', async (t) => {
  const b = await startBasin(t);
  const base = `/v1/projects/${b.projectId}/vpcs`;
  const first = await b.call('POST', base, valid);
  assert.equal(first.status, 201);
  for (const cidr of ['10.0.0.0/16', '10.0.4.0/24', '10.0.255.240/28']) {
    const res = await b.call('POST', base, { ...valid, name: 'clash', cidr });
    assertError(res, 409, 'CONFLICT', cidr);
    assert.match(
      res.body.message,
      new RegExp(`overlaps 10\\.0\\.0\\.0/16 of VPC ${first.body.id}`),
    );
  }
  // Disjoint blocks, and the same block in another region, are fine.
  assert.equal((await b.call('POST', base, { ...valid, cidr: '10.1.0.0/16' })).status, 201);
  assert.equal((await b.call('POST', base, { ...valid, region_code: 'eu-west-1' })).status, 201);
  // Once the VPC is gone, its block is free again.
  assert.equal((await b.call('DELETE', `${base}/${first.body.id}`)).status, 204);
  assert.equal((await b.call('POST', base, { ...valid, cidr: '10.0.4.0/24' })).status, 201);
});
