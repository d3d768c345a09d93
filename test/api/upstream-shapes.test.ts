// What clients generated from the vendor's newest OpenAPI document read
// (issue 11): integers on the wire, both spellings of vpc_endpoint and
// last_cursor, a shared service's spec without sizes, GET /v1/auth/info for
// both kinds of credential, and POST …/rename.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  addUserToProject,
  createUser,
  issueCredential,
  revokeCredential,
  setUserEmail,
} from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { API_KEY, startBasin, type TestBasin } from '../helpers.js';
import {
  assertError,
  createService,
  getService,
  readyService,
  serviceUrl,
  waitForStatus,
} from './service-helpers.js';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

async function as(b: TestBasin, authorization: string | undefined, url: string) {
  const res = await b.basin.app.inject({
    method: 'GET',
    url,
    headers: authorization === undefined ? {} : { authorization },
  });
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

/** Every number anywhere in `value`, with its path. */
function numbers(value: unknown, path = '$'): [string, number][] {
  if (typeof value === 'number') return [[path, value]];
  if (Array.isArray(value)) return value.flatMap((v, i) => numbers(v, `${path}[${i}]`));
  if (value && typeof value === 'object')
    return Object.entries(value).flatMap(([k, v]) => numbers(v, `${path}.${k}`));
  return [];
}

test('integers on the wire: metrics are whole megabytes, every number an integer', async (t) => {
  let now = Date.now();
  const b = await startBasin(t, { options: { clock: () => now } });
  const { id } = await readyService(b, { name: 'm', cpu_millis: '1000', memory_gbs: '4' });
  // The sim's storage grows by tenths of a megabyte (30.1 MB is what broke
  // Go clients). A sample is whole one time in ten, so the clock moves on a
  // minute at a time until the raw sample is a fraction.
  now += 61 * 60_000;
  let raw = b.basin.driver.metrics({ kind: 'service', id });
  for (let i = 0; i < 60 && raw && Number.isInteger(raw.storageMb); i++) {
    now += 60_000;
    raw = b.basin.driver.metrics({ kind: 'service', id });
  }
  assert.ok(raw && !Number.isInteger(raw.storageMb), `a fractional sample: ${raw?.storageMb}`);
  const body = await getService(b, id);
  assert.equal(body.metrics.storage_mb, Math.round(raw.storageMb));
  const found = numbers(body);
  assert.ok(found.length >= 8, JSON.stringify(found));
  for (const [path, n] of found) assert.ok(Number.isInteger(n), `${path} = ${n}`);
  const list = await b.call('GET', `/v1/projects/${b.projectId}/services`);
  for (const [path, n] of numbers(list.body)) assert.ok(Number.isInteger(n), `${path} = ${n}`);
});

test('a shared service: resources[].spec has no cpu_millis or memory_gbs', async (t) => {
  const b = await startBasin(t);
  const c = await createService(b, { name: 's', cpu_millis: 'shared', memory_gbs: 'shared' });
  assert.deepEqual(c.resources, [{ id: c.service_id, spec: { volume_type: 'sim' } }]);
  const ready = await waitForStatus(b, c.service_id, 'READY');
  assert.deepEqual(ready.resources[0].spec, { volume_type: 'sim' });
});

test('vpc_endpoint is sent beside vpcEndpoint, with the same value', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const vpc = await b.call('POST', `/v1/projects/${b.projectId}/vpcs`, {
    name: 'net',
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(vpc.status, 201);
  const attach = await b.call('POST', `${serviceUrl(b, id)}/attachToVPC`, { vpc_id: vpc.body.id });
  assert.equal(attach.status, 202);
  const svc = await getService(b, id);
  assert.deepEqual(svc.vpc_endpoint, {
    host: 'localhost',
    port: svc.endpoint.port,
    vpc_id: vpc.body.id,
  });
  assert.deepEqual(svc.vpcEndpoint, svc.vpc_endpoint);
  await b.call('POST', `${serviceUrl(b, id)}/detachFromVPC`, { vpc_id: vpc.body.id });
  const detached = await getService(b, id);
  assert.equal(detached.vpc_endpoint, undefined);
  assert.equal(detached.vpcEndpoint, undefined);
});

test('last_cursor is sent beside lastCursor, and pages the same way', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  let cursor: string | undefined;
  let pages = 0;
  do {
    const q = cursor === undefined ? '' : `?cursor=${encodeURIComponent(cursor)}`;
    const res = await b.call('GET', `${serviceUrl(b, id)}/logs${q}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.last_cursor, res.body.lastCursor);
    cursor = res.body.last_cursor;
    pages++;
  } while (cursor !== undefined && pages < 100);
  assert.ok(pages >= 2, `the sim's history takes more than a page (${pages})`);
  assert.equal(cursor, undefined, 'paging ends');
});

test('auth/info: a project credential is an apiKey issued by the administrator', async (t) => {
  const b = await startBasin(t, { env: { BASIN_ADMIN_EMAIL: 'ops@example.com' } });
  const [cred] = await b.basin.store.credentials.list();
  assert.ok(cred);
  const expected = {
    type: 'apiKey',
    api_key: {
      public_key: cred.accessKey,
      name: 'bootstrap',
      created: cred.createdAt,
      project: { id: b.projectId, name: 'default', plan_type: 'SELF_HOSTED' },
      issuing_user: { id: 'admin', name: 'Administrator', email: 'ops@example.com' },
    },
  };
  // The vendor's deprecated spelling, the same value (issue 23).
  Object.assign(expected, { apiKey: expected.api_key });
  const bearer = await as(b, `Bearer ${API_KEY}`, '/v1/auth/info');
  assert.equal(bearer.status, 200, JSON.stringify(bearer.body));
  assert.deepEqual(bearer.body, expected);
  assert.match(bearer.body.api_key.created, RFC3339);

  // The same through HTTP Basic, for a credential made like `basin credential create`.
  const made = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const basic = `Basic ${Buffer.from(`${made.accessKey}:${made.secretKey}`).toString('base64')}`;
  const viaBasic = await as(b, basic, '/v1/auth/info');
  assert.equal(viaBasic.status, 200);
  assert.equal(viaBasic.body.type, 'apiKey');
  assert.equal(viaBasic.body.api_key.public_key, made.accessKey);
  assert.equal(viaBasic.body.api_key.name, 'ci');
  assert.equal(viaBasic.body.oauth, undefined);
});

test('auth/info: a user token is oauth with its user; an address is always valid', async (t) => {
  const b = await startBasin(t);
  const alice = await createUser(b.basin.store, systemClock, 'alice', 'alice@example.com');
  await addUserToProject(b.basin.store, alice.id, b.projectId);
  const token = await issueCredential(b.basin.store, systemClock, { userId: alice.id }, 'laptop');
  const res = await as(b, `Bearer ${token.bearerKey}`, '/v1/auth/info');
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body, {
    type: 'oauth',
    oauth: { user: { id: alice.id, name: 'alice', email: 'alice@example.com' } },
  });

  // A user made without an address (or before users had one) shows one that
  // parses and is plainly not a mailbox, until `basin user set-email`.
  const bob = await createUser(b.basin.store, systemClock, 'bob');
  const bobs = await issueCredential(b.basin.store, systemClock, { userId: bob.id }, 'ci');
  const before = await as(b, `Bearer ${bobs.bearerKey}`, '/v1/auth/info');
  assert.equal(before.body.oauth.user.email, `${bob.id}@users.basin.localhost`);
  await setUserEmail(b.basin.store, bob.id, 'bob@example.org');
  const after = await as(b, `Bearer ${bobs.bearerKey}`, '/v1/auth/info');
  assert.equal(after.body.oauth.user.email, 'bob@example.org');
});

test('auth/info is authenticated like every route: no, bad or revoked credentials get 401', async (t) => {
  const b = await startBasin(t);
  const made = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'x');
  await revokeCredential(b.basin.store, systemClock, made.id);
  for (const authorization of [
    undefined,
    'Bearer bsn_not-a-key-of-this-basin',
    `Bearer ${made.bearerKey}`,
    `Basic ${Buffer.from(`${made.accessKey}:wrong`).toString('base64')}`,
  ]) {
    const res = await as(b, authorization, '/v1/auth/info');
    assert.equal(res.status, 401, `${authorization}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.code, 'UNAUTHORIZED');
    assert.match(res.body.message, /Bearer|Basic/);
  }
});

test('rename: 200 with the Service; the new name sticks', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b, { name: 'before' });
  const res = await b.call('POST', `${serviceUrl(b, id)}/rename`, { name: 'after' });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.service_id, id);
  assert.equal(res.body.name, 'after');
  assert.equal(res.body.status, 'READY', 'a rename queues no work');
  assert.equal((await getService(b, id)).name, 'after');
  // Also while a service is busy (but not while it is being deleted).
  await b.call('POST', `${serviceUrl(b, id)}/stop`);
  const busy = await b.call('POST', `${serviceUrl(b, id)}/rename`, { name: 'paused' });
  assert.equal(busy.status, 200, JSON.stringify(busy.body));
  assert.equal(busy.body.name, 'paused');
});

test('rename: bad names are 400s that say what to fix; unknown services 404', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b, { name: 'keep' });
  const url = `${serviceUrl(b, id)}/rename`;
  const bad: [unknown, RegExp][] = [
    [{}, /name/],
    [{ name: '' }, /name must not be empty/],
    [{ name: '  ' }, /name must not be empty/],
    [{ name: 'x'.repeat(129) }, /name must be at most 128 characters/],
    [{ name: 'a\u0000b' }, /control characters/],
    [{ name: 5 }, /name/],
    [{ name: 'ok', extra: 1 }, /extra/],
  ];
  for (const [body, message] of bad) {
    assertError(await b.call('POST', url, body), 400, 'INVALID_REQUEST', message);
  }
  assert.equal((await getService(b, id)).name, 'keep');
  assertError(
    await b.call('POST', `${serviceUrl(b, 'nosuchsvc0')}/rename`, { name: 'x' }),
    404,
    'NOT_FOUND',
  );
  assertError(
    await b.call('POST', `/v1/projects/otherproj0/services/${id}/rename`, { name: 'x' }),
    404,
    'NOT_FOUND',
  );
  // (A DELETING service refuses a rename: services.test.ts, with the other requests.)
});
