// GETs are answered from the store's read cache (Store.readView) and reused
// presented bodies: these tests poll with a warm cache and check that every
// change, whoever commits it, shows at the very next request, that nothing
// cached crosses projects or credentials, and that metrics stay live.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  addUserToProject,
  createProject,
  createUser,
  issueCredential,
  revokeCredential,
} from '../../src/commands/admin.js';
import type { Service } from '../../src/domain/types.js';
import { systemClock } from '../../src/lib/clock.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { startBasin, type TestBasin } from '../helpers.js';
import { readyService, serviceUrl } from './service-helpers.js';

/** A second handle on the Basin's SQLite file, as the CLI opens it. */
function otherHandle(t: TestContext, b: TestBasin): Store {
  const store = openSqliteStore(join(b.config.dataDir, 'basin.db'));
  t.after(() => store.close());
  return store;
}

async function get(b: TestBasin, url: string, authorization: string) {
  const res = await b.basin.app.inject({ method: 'GET', url, headers: { authorization } });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

/** A body without its metrics: the sim's synthetic usage drifts with the clock. */
function withoutMetrics(body: any) {
  if (body === undefined || body === null || typeof body !== 'object') return body;
  const { metrics: _metrics, ...rest } = body;
  return rest;
}

/** Several GETs that must all be 200 with the same body (metrics aside): the cache is warm afterwards. */
async function poll(b: TestBasin, url: string, authorization: string, times = 3) {
  let body: any;
  for (let i = 0; i < times; i++) {
    const res = await get(b, url, authorization);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    if (body !== undefined) assert.deepEqual(withoutMetrics(res.body), withoutMetrics(body));
    body = res.body;
  }
  return body;
}

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

test('a credential revoked through another handle on the store is refused at the next request, in both schemes', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const schemes = [`Bearer ${cred.bearerKey}`, basic(cred.accessKey, cred.secretKey)];
  for (const authorization of schemes) await poll(b, serviceUrl(b, id), authorization);

  await revokeCredential(otherHandle(t, b), systemClock, cred.id);

  for (const authorization of schemes) {
    const res = await get(b, serviceUrl(b, id), authorization);
    assert.equal(res.status, 401, `${authorization.split(' ')[0]}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.code, 'UNAUTHORIZED');
  }
  // Only that credential.
  await poll(b, serviceUrl(b, id), b.auth.authorization, 1);
});

test('a GET after a write sees the write: through the API, the engine or another handle', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const before = await poll(b, url, b.auth.authorization);
  assert.equal(before.metadata.environment, 'DEV');
  assert.deepEqual(before.read_replica_sets, []);

  const env = await b.call('POST', `${url}/setEnvironment`, { environment: 'PROD' });
  assert.equal(env.status, 200, JSON.stringify(env.body));
  assert.equal((await get(b, url, b.auth.authorization)).body.metadata.environment, 'PROD');

  const rs = await b.call('POST', `${url}/replicaSets`, {
    name: 'readers',
    nodes: 1,
    cpu_millis: 1000,
    memory_gbs: 4,
  });
  assert.equal(rs.status, 202, JSON.stringify(rs.body));
  const withSet = (await get(b, url, b.auth.authorization)).body;
  assert.deepEqual(
    withSet.read_replica_sets.map((s: { id: string }) => s.id),
    [rs.body.id],
  );
  await b.basin.engine.idle();
  const settled = (await get(b, url, b.auth.authorization)).body;
  assert.equal(settled.read_replica_sets[0].status, 'active', 'the engine settled it');

  const other = otherHandle(t, b);
  await other.transaction(async (tx) => {
    const svc = (await tx.services.get(id)) as Service;
    await tx.services.update({ ...svc, name: 'renamed' });
  });
  assert.equal((await get(b, url, b.auth.authorization)).body.name, 'renamed');
});

test('a user added to a project by another handle (the CLI) sees it at once', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const user = await createUser(b.basin.store, systemClock, 'alice');
  const token = await issueCredential(b.basin.store, systemClock, { userId: user.id }, 'laptop');
  const authorization = `Bearer ${token.bearerKey}`;
  const owner = await poll(b, url, b.auth.authorization);
  for (let i = 0; i < 3; i++) assert.equal((await get(b, url, authorization)).status, 404);

  await addUserToProject(otherHandle(t, b), user.id, b.projectId);

  assert.deepEqual(withoutMetrics(await poll(b, url, authorization)), withoutMetrics(owner));
});

test('a cached service never answers another project or a credential of another project', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const other = await createProject(b.basin.store, systemClock, 'other');
  const otherCred = await issueCredential(b.basin.store, systemClock, { projectId: other.id }, 'x');
  const outsider = `Bearer ${otherCred.bearerKey}`;

  for (let i = 0; i < 3; i++) {
    await poll(b, url, b.auth.authorization, 1);
    assert.equal(
      (await get(b, url, outsider)).status,
      404,
      'the service of a project it cannot see',
    );
    const elsewhere = `/v1/projects/${other.id}/services/${id}`;
    assert.equal((await get(b, elsewhere, outsider)).status, 404, 'under its own project');
    assert.equal(
      (await get(b, elsewhere, b.auth.authorization)).status,
      404,
      'a project not its own',
    );
  }
});

test('a failed authentication is never cached as a success', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  await poll(b, url, basic(cred.accessKey, cred.secretKey));
  await poll(b, url, `Bearer ${cred.bearerKey}`);

  for (let i = 0; i < 3; i++) {
    assert.equal((await get(b, url, basic(cred.accessKey, `${cred.secretKey}x`))).status, 401);
    assert.equal((await get(b, url, basic(cred.accessKey, ''))).status, 401);
    assert.equal((await get(b, url, `Bearer ${cred.bearerKey}x`)).status, 401);
    assert.equal((await get(b, url, `Bearer ${cred.bearerKey.slice(0, -1)}`)).status, 401);
  }
  for (let i = 0; i < 200; i++) {
    assert.equal((await get(b, url, `Bearer random-key-${i}`)).status, 401);
  }
  await poll(b, url, `Bearer ${cred.bearerKey}`, 1);
  await poll(b, url, basic(cred.accessKey, cred.secretKey), 1);
});

test('metrics are live while the service is unchanged', async (t) => {
  let now = Date.now();
  const b = await startBasin(t, { options: { clock: () => now } });
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const target = { kind: 'service', id } as const;
  const metricsBody = () => {
    const m = b.basin.driver.metrics(target);
    assert.ok(m, 'the sim has metrics for a READY service');
    return {
      memory_mb: Math.round(m.memoryMb),
      milli_cpu: Math.round(m.milliCpu),
      storage_mb: Math.round(m.storageMb),
    };
  };

  const first = await poll(b, url, b.auth.authorization);
  assert.deepEqual(first.metrics, metricsBody());
  now += 20 * 60_000;
  const later = await poll(b, url, b.auth.authorization);
  assert.deepEqual(later.metrics, metricsBody());
  assert.notDeepEqual(later.metrics, first.metrics, 'twenty minutes later, other figures');
  assert.deepEqual(
    { ...later, metrics: undefined },
    { ...first, metrics: undefined },
    'and nothing else changed',
  );
});
