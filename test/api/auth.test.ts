// Authentication and project isolation: every endpoint needs credentials, both
// schemes work, and a caller never learns of resources outside its projects.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  addUserToProject,
  createProject,
  createUser,
  issueCredential,
  revokeCredential,
} from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { API_KEY, startBasin, type TestBasin } from '../helpers.js';

interface Reply {
  status: number;
  body: any;
}

/** A request with exactly the headers given (no default credential). */
async function send(
  b: TestBasin,
  method: string,
  url: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Reply> {
  const res = await b.basin.app.inject({
    method: method as 'GET',
    url,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

function assertError(res: Reply, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: status (body ${JSON.stringify(res.body)})`);
  assert.equal(res.body?.code, code, `${what}: code`);
  assert.equal(typeof res.body.message, 'string', `${what}: message`);
  assert.ok(res.body.message.length > 10, `${what}: message is a sentence`);
  assert.deepEqual(Object.keys(res.body).sort(), ['code', 'message'], `${what}: body keys`);
}

function assertUnauthorized(res: Reply, what: string): void {
  assertError(res, 401, 'UNAUTHORIZED', what);
  // Every 401 tells the caller how to authenticate.
  assert.match(res.body.message, /Bearer|Basic/, `${what}: message names a scheme`);
}

async function createVpc(b: TestBasin, projectId = b.projectId, name = 'net') {
  const res = await b.call('POST', `/v1/projects/${projectId}/vpcs`, {
    name,
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.id as string;
}

/** The three endpoints the matrix runs on: a GET without, a GET with a path id, a POST with a body. */
function endpoints(b: TestBasin, vpcId: string) {
  return [
    { method: 'GET', url: '/v1/projects', body: undefined, ok: 200 },
    { method: 'GET', url: `/v1/projects/${b.projectId}/vpcs/${vpcId}`, body: undefined, ok: 200 },
    { method: 'POST', url: `/v1/projects/${b.projectId}/services`, body: { name: 'db' }, ok: 202 },
  ];
}

test('requests without credentials are 401 UNAUTHORIZED with a message telling how to authenticate', async (t) => {
  const b = await startBasin(t);
  const vpcId = await createVpc(b);
  for (const e of endpoints(b, vpcId)) {
    const res = await send(b, e.method, e.url, {}, e.body);
    assertUnauthorized(res, `${e.method} ${e.url} without Authorization`);
    assert.match(res.body.message, /Authorization/);
    assert.match(res.body.message, /Bearer/);
    assert.match(res.body.message, /Basic/);
  }
  // Nothing was created by the rejected POST.
  assert.deepEqual((await b.call('GET', `/v1/projects/${b.projectId}/services`)).body, []);
});

test('bad, malformed and unknown credentials are 401 on every endpoint', async (t) => {
  const b = await startBasin(t);
  const vpcId = await createVpc(b);
  const good = await issueCredential(
    b.basin.store,
    systemClock,
    { projectId: b.projectId },
    'matrix',
  );
  const cases: Array<[string, string]> = [
    ['unknown bearer key', 'Bearer not-a-key-anyone-issued'],
    ['bearer key with a wrong last character', `Bearer ${API_KEY.slice(0, -1)}X`],
    ['Basic with a wrong secret', basic(good.accessKey, `${good.secretKey}x`)],
    ['Basic with an unknown access key', basic('AKNOSUCHKEY', good.secretKey)],
    ['Basic with the bearer key as the secret', basic(good.accessKey, good.bearerKey)],
    ['Basic that is not base64', 'Basic !!!not*base64!!!'],
    ['Basic without a colon', `Basic ${Buffer.from(good.accessKey).toString('base64')}`],
    ['Basic with an empty access key', basic('', good.secretKey)],
    ['Basic with nothing after it', 'Basic'],
    ['Bearer with nothing after it', 'Bearer'],
    ['Bearer with only spaces after it', 'Bearer    '],
    ['an unknown scheme', 'Token x'],
    ['a bare key without a scheme', API_KEY],
    ['the secret key used as a bearer key', `Bearer ${good.secretKey}`],
  ];
  for (const [what, authorization] of cases) {
    for (const e of endpoints(b, vpcId)) {
      const res = await send(b, e.method, e.url, { authorization }, e.body);
      assertUnauthorized(res, `${what} on ${e.method} ${e.url}`);
    }
  }
  assert.deepEqual((await b.call('GET', `/v1/projects/${b.projectId}/services`)).body, []);

  const scheme = await send(b, 'GET', '/v1/projects', { authorization: 'Token x' });
  assert.match(scheme.body.message, /Token/, 'the message names the scheme it did not accept');
});

test('valid Bearer and Basic credentials are accepted on every endpoint', async (t) => {
  const b = await startBasin(t);
  const vpcId = await createVpc(b);
  const cred = await issueCredential(
    b.basin.store,
    systemClock,
    { projectId: b.projectId },
    'both-schemes',
  );
  const headers = [
    { authorization: basic(cred.accessKey, cred.secretKey) },
    { authorization: `Bearer ${cred.bearerKey}` },
    // Schemes are case-insensitive (RFC 9110 §11.1).
    { authorization: `bearer ${cred.bearerKey}` },
    {
      authorization: `BASIC ${Buffer.from(`${cred.accessKey}:${cred.secretKey}`).toString('base64')}`,
    },
  ];
  for (const h of headers) {
    for (const e of endpoints(b, vpcId)) {
      const res = await send(b, e.method, e.url, h, e.body);
      assert.equal(res.status, e.ok, `${h.authorization.split(' ')[0]} on ${e.method} ${e.url}`);
    }
    const projects = await send(b, 'GET', '/v1/projects', h);
    assert.deepEqual(projects.body, [{ id: b.projectId, name: 'default' }]);
    const vpc = await send(b, 'GET', `/v1/projects/${b.projectId}/vpcs/${vpcId}`, h);
    assert.equal(vpc.body.id, vpcId);
    assert.equal(vpc.body.name, 'net');
  }
  const services = await b.call('GET', `/v1/projects/${b.projectId}/services`);
  assert.equal(services.body.length, headers.length, 'each accepted POST created a service');
});

test("a second project's credential cannot see, change or learn of the first project's resources", async (t) => {
  const b = await startBasin(t);
  const vpcId = await createVpc(b);
  const svc = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 'db' });
  assert.equal(svc.status, 202);
  const serviceId = svc.body.service_id as string;
  const peering = await b.call('POST', `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`, {
    peer_account_id: '123456789012',
    peer_region_code: 'us-east-1',
    peer_vpc_id: 'vpc-0abc',
  });
  assert.equal(peering.status, 201);
  const peeringId = peering.body.id as string;

  const other = await createProject(b.basin.store, systemClock, 'other');
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: other.id }, 'other');
  for (const authorization of [`Bearer ${cred.bearerKey}`, basic(cred.accessKey, cred.secretKey)]) {
    const h = { authorization };
    const projects = await send(b, 'GET', '/v1/projects', h);
    assert.equal(projects.status, 200);
    assert.deepEqual(projects.body, [{ id: other.id, name: 'other' }]);

    const p = `/v1/projects/${b.projectId}`;
    const attempts: Array<[string, string, unknown]> = [
      ['GET', `${p}/vpcs`, undefined],
      ['GET', `${p}/vpcs/${vpcId}`, undefined],
      ['DELETE', `${p}/vpcs/${vpcId}`, undefined],
      ['POST', `${p}/vpcs/${vpcId}/rename`, { name: 'stolen' }],
      ['POST', `${p}/vpcs`, { name: 'x', cidr: '10.1.0.0/16', region_code: 'us-east-1' }],
      ['GET', `${p}/vpcs/${vpcId}/peerings`, undefined],
      ['GET', `${p}/vpcs/${vpcId}/peerings/${peeringId}`, undefined],
      ['DELETE', `${p}/vpcs/${vpcId}/peerings/${peeringId}`, undefined],
      ['GET', `${p}/services`, undefined],
      ['POST', `${p}/services`, { name: 'intruder' }],
      ['GET', `${p}/services/${serviceId}`, undefined],
      ['DELETE', `${p}/services/${serviceId}`, undefined],
      ['POST', `${p}/services/${serviceId}/stop`, undefined],
      ['GET', `${p}/services/${serviceId}/logs`, undefined],
      // The caller's own project in the path, the other project's resource id.
      ['GET', `/v1/projects/${other.id}/vpcs/${vpcId}`, undefined],
      ['DELETE', `/v1/projects/${other.id}/vpcs/${vpcId}`, undefined],
      ['POST', `/v1/projects/${other.id}/vpcs/${vpcId}/rename`, { name: 'stolen' }],
      ['GET', `/v1/projects/${other.id}/services/${serviceId}`, undefined],
      ['DELETE', `/v1/projects/${other.id}/services/${serviceId}`, undefined],
      [
        'POST',
        `/v1/projects/${other.id}/vpcs/${vpcId}/peerings`,
        {
          peer_account_id: '1',
          peer_region_code: 'us-east-1',
          peer_vpc_id: 'vpc-1',
        },
      ],
    ];
    for (const [method, url, body] of attempts) {
      const res = await send(b, method, url, h, body);
      assertError(res, 404, 'NOT_FOUND', `${method} ${url} by another project`);
    }

    // The answer for a hidden project is the answer for one that does not exist.
    const hidden = await send(b, 'GET', `${p}/vpcs/${vpcId}`, h);
    const missing = await send(b, 'GET', `/v1/projects/nosuchproj/vpcs/${vpcId}`, h);
    assert.equal(hidden.status, missing.status);
    assert.equal(
      hidden.body.message.replace(b.projectId, '<id>'),
      missing.body.message.replace('nosuchproj', '<id>'),
    );
  }

  // Nothing changed for the owner.
  const vpc = await b.call('GET', `/v1/projects/${b.projectId}/vpcs/${vpcId}`);
  assert.equal(vpc.status, 200);
  assert.equal(vpc.body.name, 'net');
  const peerings = await b.call('GET', `/v1/projects/${b.projectId}/vpcs/${vpcId}/peerings`);
  assert.deepEqual(
    peerings.body.map((x: { id: string }) => x.id),
    [peeringId],
  );
  const services = await b.call('GET', `/v1/projects/${b.projectId}/services`);
  assert.deepEqual(
    services.body.map((s: { service_id: string; name: string }) => [s.service_id, s.name]),
    [[serviceId, 'db']],
  );
  const own = await b.call('GET', `/v1/projects/${b.projectId}/services/${serviceId}`);
  assert.notEqual(own.body.status, 'DELETING');
  // And the other project has nothing either.
  const theirs = await send(b, 'GET', `/v1/projects/${other.id}/vpcs`, {
    authorization: `Bearer ${cred.bearerKey}`,
  });
  assert.deepEqual(theirs.body, []);
});

test('a user token sees every project its user belongs to, and no other', async (t) => {
  const b = await startBasin(t);
  const vpc1 = await createVpc(b, b.projectId, 'first');
  const second = await createProject(b.basin.store, systemClock, 'second');
  const third = await createProject(b.basin.store, systemClock, 'third');
  const user = await createUser(b.basin.store, systemClock, 'alice');
  await addUserToProject(b.basin.store, user.id, b.projectId);
  await addUserToProject(b.basin.store, user.id, second.id);
  const cred = await issueCredential(b.basin.store, systemClock, { userId: user.id }, 'alice-cli');

  for (const authorization of [`Bearer ${cred.bearerKey}`, basic(cred.accessKey, cred.secretKey)]) {
    const h = { authorization };
    const projects = await send(b, 'GET', '/v1/projects', h);
    assert.equal(projects.status, 200);
    const byId = (a: { id: string }, z: { id: string }) => a.id.localeCompare(z.id);
    assert.deepEqual(
      [...projects.body].sort(byId),
      [
        { id: b.projectId, name: 'default' },
        { id: second.id, name: 'second' },
      ].sort(byId),
    );
    assert.equal((await send(b, 'GET', `/v1/projects/${third.id}/vpcs`, h)).status, 404);
  }

  const h = { authorization: `Bearer ${cred.bearerKey}` };
  const created = await send(b, 'POST', `/v1/projects/${second.id}/vpcs`, h, {
    name: 'second-net',
    cidr: '192.168.0.0/24',
    region_code: 'eu-west-1',
  });
  assert.equal(created.status, 201);
  const vpc2 = created.body.id as string;

  const read1 = await send(b, 'GET', `/v1/projects/${b.projectId}/vpcs/${vpc1}`, h);
  assert.equal(read1.status, 200);
  assert.equal(read1.body.name, 'first');
  const read2 = await send(b, 'GET', `/v1/projects/${second.id}/vpcs/${vpc2}`, h);
  assert.equal(read2.status, 200);
  assert.deepEqual(read2.body, {
    id: vpc2,
    name: 'second-net',
    cidr: '192.168.0.0/24',
    region_code: 'eu-west-1',
  });
  // Each VPC is only reachable under its own project.
  assertError(
    await send(b, 'GET', `/v1/projects/${second.id}/vpcs/${vpc1}`, h),
    404,
    'NOT_FOUND',
    'VPC of project 1 under project 2',
  );
  // The bootstrap (project) credential still sees only its project.
  const own = await b.call('GET', '/v1/projects');
  assert.deepEqual(own.body, [{ id: b.projectId, name: 'default' }]);
  assert.equal((await b.call('GET', `/v1/projects/${second.id}/vpcs/${vpc2}`)).status, 404);
});

test('a revoked credential is 401 in both schemes', async (t) => {
  const b = await startBasin(t);
  const vpcId = await createVpc(b);
  const cred = await issueCredential(
    b.basin.store,
    systemClock,
    { projectId: b.projectId },
    'short-lived',
  );
  const both = [`Bearer ${cred.bearerKey}`, basic(cred.accessKey, cred.secretKey)];
  for (const authorization of both) {
    assert.equal((await send(b, 'GET', '/v1/projects', { authorization })).status, 200);
  }
  await revokeCredential(b.basin.store, systemClock, cred.id);
  for (const authorization of both) {
    for (const e of endpoints(b, vpcId)) {
      const res = await send(b, e.method, e.url, { authorization }, e.body);
      assertUnauthorized(res, `revoked ${authorization.split(' ')[0]} on ${e.method} ${e.url}`);
    }
  }
  // Other credentials are untouched.
  assert.equal((await b.call('GET', '/v1/projects')).status, 200);
});
