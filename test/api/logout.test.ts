// POST /v1/auth/logout: a user token is revoked, a project credential is not;
// 204 either way, with or without the upstream body.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addUserToProject, createUser, issueCredential } from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { API_KEY, startBasin, type TestBasin } from '../helpers.js';
import { assertError } from './service-helpers.js';

async function send(
  b: TestBasin,
  authorization: string,
  method: string,
  url: string,
  body?: unknown,
) {
  const res = await b.basin.app.inject({
    method: method as 'POST',
    url,
    headers: {
      authorization,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return {
    status: res.statusCode,
    body: res.body ? JSON.parse(res.body) : undefined,
    headers: res.headers,
  };
}

async function userToken(b: TestBasin, name: string) {
  const user = await createUser(b.basin.store, systemClock, name, `${name}@example.com`);
  await addUserToProject(b.basin.store, user.id, b.projectId);
  const cred = await issueCredential(b.basin.store, systemClock, { userId: user.id }, 'laptop');
  return { cred, bearer: `Bearer ${cred.bearerKey}` };
}

test('logout revokes the calling user token at once; other tokens keep working', async (t) => {
  const b = await startBasin(t);
  const alice = await userToken(b, 'alice');
  const bob = await userToken(b, 'bob');
  assert.equal((await send(b, alice.bearer, 'GET', '/v1/projects')).status, 200);

  const out = await send(b, alice.bearer, 'POST', '/v1/auth/logout', {
    refresh_token: 'whatever-the-client-holds',
  });
  assert.equal(out.status, 204);
  assert.equal(out.body, undefined, '204 has no body');
  assert.notEqual((await b.basin.store.credentials.get(alice.cred.id))?.revokedAt, null);

  assertError(await send(b, alice.bearer, 'GET', '/v1/projects'), 401, 'UNAUTHORIZED');
  // Its access/secret pair is the same credential: refused too.
  const basic = `Basic ${Buffer.from(`${alice.cred.accessKey}:${alice.cred.secretKey}`).toString('base64')}`;
  assertError(await send(b, basic, 'GET', '/v1/projects'), 401, 'UNAUTHORIZED');
  // Logging out again is a request with a revoked credential.
  assertError(await send(b, alice.bearer, 'POST', '/v1/auth/logout'), 401, 'UNAUTHORIZED');

  assert.equal((await send(b, bob.bearer, 'GET', '/v1/projects')).status, 200);
});

test('logout with a project credential answers 204 and keeps it: it is the project key, not a session', async (t) => {
  const b = await startBasin(t);
  const key = `Bearer ${API_KEY}`;
  assert.equal((await send(b, key, 'POST', '/v1/auth/logout')).status, 204);
  assert.equal((await send(b, key, 'POST', '/v1/auth/logout', {})).status, 204);
  const still = await send(b, key, 'GET', `/v1/projects/${b.projectId}/services`);
  assert.equal(still.status, 200);
  const info = await send(b, key, 'GET', '/v1/auth/info');
  assert.equal(info.body.type, 'apiKey');
});

test('logout: bad bodies are 400s that name the field; no credential is a 401', async (t) => {
  const b = await startBasin(t);
  const key = `Bearer ${API_KEY}`;
  assertError(
    await send(b, key, 'POST', '/v1/auth/logout', { refresh_token: 42 }),
    400,
    'INVALID_REQUEST',
    /refresh_token/,
  );
  assertError(
    await send(b, key, 'POST', '/v1/auth/logout', { token: 'x' }),
    400,
    'INVALID_REQUEST',
    /token/,
  );
  const anonymous = await b.basin.app.inject({ method: 'POST', url: '/v1/auth/logout' });
  assert.equal(anonymous.statusCode, 401);
  assert.equal(JSON.parse(anonymous.body).code, 'UNAUTHORIZED');
});
