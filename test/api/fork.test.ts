import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Backup } from '../../src/domain/backups.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';
import {
  assertError,
  getService,
  pausedService,
  readyService,
  serviceUrl,
  servicesUrl,
  waitForStatus,
} from './service-helpers.js';

const fork = (b: TestBasin, id: string, body?: unknown) =>
  b.call('POST', `${serviceUrl(b, id)}/forkService`, body);

/** The parent's first backup, taken once it is READY (the sim takes no time). */
const backedUp = (b: TestBasin, id: string): Promise<Backup> =>
  eventually(async () => (await b.basin.store.backups.listByService(id))[0], `a backup of ${id}`);

/** A moment strictly between the end of the parent's first backup and now. */
async function pastTarget(b: TestBasin, parentId: string): Promise<string> {
  const ended = Date.parse((await backedUp(b, parentId)).stoppedAt);
  while (Date.now() < ended + 20) await new Promise((r) => setTimeout(r, 5));
  return new Date(ended + Math.floor((Date.now() - ended) / 2)).toISOString();
}

test('every fork strategy: 202 QUEUED with its own password and forked_from, then READY', async (t) => {
  const b = await startBasin(t);
  const parent = await readyService(b, {
    name: 'orders',
    addons: [],
    region_code: 'eu-west-1',
    cpu_millis: '2000',
    memory_gbs: '8',
    replica_count: 2,
    environment_tag: 'PROD',
  });
  const target = await pastTarget(b, parent.id);

  for (const body of [
    { fork_strategy: 'LAST_SNAPSHOT' },
    { fork_strategy: 'NOW' },
    { fork_strategy: 'PITR', target_time: target },
  ]) {
    const res = await fork(b, parent.id, body);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const f = res.body;
    assert.equal(f.status, 'QUEUED');
    assert.match(f.service_id, /^[a-z0-9]{10}$/);
    assert.notEqual(f.service_id, parent.id);
    assert.equal(f.project_id, b.projectId);
    assert.equal(f.name, 'orders-fork');
    assert.deepEqual(f.forked_from, {
      is_standby: false,
      project_id: b.projectId,
      service_id: parent.id,
    });
    assert.equal(typeof f.initial_password, 'string');
    assert.ok(f.initial_password.length >= 16);
    assert.notEqual(f.initial_password, parent.created.initial_password);
    // Inherited: type, region and size. Not inherited: HA replicas.
    assert.equal(f.service_type, 'POSTGRES');
    assert.equal(f.region_code, 'eu-west-1');
    assert.deepEqual(f.resources[0].spec, { cpu_millis: 2000, memory_gbs: 8, volume_type: 'sim' });
    assert.deepEqual(f.ha_replicas, { replica_count: 0, sync_replica_count: 0 });
    assert.notEqual(f.endpoint.port, parent.ready.endpoint.port);

    const ready = await waitForStatus(b, f.service_id, 'READY');
    assert.deepEqual(ready.forked_from, f.forked_from);
    assert.equal(ready.initial_password, undefined);
    assert.equal(ready.service_type, 'POSTGRES');
  }
  // The parent is untouched and the forks are independent services.
  const p = await getService(b, parent.id);
  assert.equal(p.status, 'READY');
  assert.equal(p.forked_from, undefined);
  assert.deepEqual(p.ha_replicas, { replica_count: 2, sync_replica_count: 0 });
  const list = (await b.call('GET', servicesUrl(b))).body;
  assert.equal(list.length, 4);
  for (const s of list) assert.equal(s.initial_password, undefined);
});

test('a fork takes the name, size and environment it is given; a fork can be forked', async (t) => {
  const b = await startBasin(t);
  const parent = await readyService(b, { name: 'p', addons: ['ai'] });
  await backedUp(b, parent.id);

  const named = await fork(b, parent.id, {
    fork_strategy: 'NOW',
    name: 'analytics copy',
    cpu_millis: '4000',
    memory_gbs: '16',
    environment_tag: 'PROD',
  });
  assert.equal(named.status, 202, JSON.stringify(named.body));
  assert.equal(named.body.name, 'analytics copy');
  assert.equal(named.body.service_type, 'VECTOR');
  assert.deepEqual(named.body.resources[0].spec, {
    cpu_millis: 4000,
    memory_gbs: 16,
    volume_type: 'sim',
  });
  assert.deepEqual(named.body.metadata, { environment: 'PROD' });

  const onlyCpu = await fork(b, parent.id, { fork_strategy: 'LAST_SNAPSHOT', cpu_millis: '1000' });
  assert.equal(onlyCpu.status, 202);
  assert.deepEqual(onlyCpu.body.resources[0].spec, {
    cpu_millis: 1000,
    memory_gbs: 4,
    volume_type: 'sim',
  });

  const shared = await fork(b, parent.id, {
    fork_strategy: 'LAST_SNAPSHOT',
    cpu_millis: 'shared',
    memory_gbs: 'shared',
  });
  assert.equal(shared.status, 202, JSON.stringify(shared.body));
  // No dedicated allocation: no cpu_millis or memory_gbs (clients show "shared").
  assert.deepEqual(shared.body.resources[0].spec, { volume_type: 'sim' });

  // A fork of a fork (from its own backups too).
  await waitForStatus(b, named.body.service_id, 'READY');
  await backedUp(b, named.body.service_id);
  const fromSnapshot = await fork(b, named.body.service_id, { fork_strategy: 'LAST_SNAPSHOT' });
  assert.equal(fromSnapshot.status, 202, JSON.stringify(fromSnapshot.body));
  const grandchild = await fork(b, named.body.service_id, { fork_strategy: 'NOW' });
  assert.equal(grandchild.status, 202);
  assert.equal(grandchild.body.name, 'analytics copy-fork');
  assert.equal(grandchild.body.forked_from.service_id, named.body.service_id);
  for (const id of [
    onlyCpu.body.service_id,
    shared.body.service_id,
    grandchild.body.service_id,
    fromSnapshot.body.service_id,
  ]) {
    await waitForStatus(b, id, 'READY');
  }

  // A parent with a 128-character name: the default fork name is shortened to fit, suffix kept.
  const long = await readyService(b, { name: 'n'.repeat(128) });
  const longFork = await fork(b, long.id, { fork_strategy: 'NOW' });
  assert.equal(longFork.status, 202, JSON.stringify(longFork.body));
  assert.equal(longFork.body.name, `${'n'.repeat(123)}-fork`);
  const emoji = await readyService(b, { name: '🐘'.repeat(128) });
  const emojiFork = await fork(b, emoji.id, { fork_strategy: 'NOW' });
  assert.equal(emojiFork.status, 202, JSON.stringify(emojiFork.body));
  assert.equal(emojiFork.body.name, `${'🐘'.repeat(123)}-fork`);
});

test('fork bad inputs are 400; an unknown parent 404', async (t) => {
  const b = await startBasin(t);
  const parent = await readyService(b);
  const target = await pastTarget(b, parent.id);
  const oldest = (await backedUp(b, parent.id)).stoppedAt;
  const window = new RegExp(
    `^target_time must be between ${oldest.replace(/\./g, '\\.')} and now \\(\\d{4}-\\d{2}-\\d{2}T[\\d:.]+Z\\)`,
  );

  const bad: [unknown, RegExp][] = [
    [{ fork_strategy: 'PITR' }, /target_time is required when fork_strategy is PITR/],
    [
      { fork_strategy: 'PITR', target_time: new Date(Date.now() + 3_600_000).toISOString() },
      window,
    ],
    [
      { fork_strategy: 'PITR', target_time: new Date(Date.parse(oldest) - 1).toISOString() },
      window,
    ],
    [{ fork_strategy: 'PITR', target_time: '2020-01-01T00:00:00Z' }, window],
    [{ fork_strategy: 'PITR', target_time: 'yesterday' }, /RFC 3339/],
    [{ fork_strategy: 'PITR', target_time: '2025-06-01' }, /RFC 3339/],
    [{ fork_strategy: 'PITR', target_time: target.replace('Z', '') }, /RFC 3339/],
    [{ fork_strategy: 'PITR', target_time: Date.now() }, /target_time/],
    [{ fork_strategy: 'NOW', target_time: target }, /target_time is only for the PITR/],
    [{ fork_strategy: 'LAST_SNAPSHOT', target_time: target }, /only for the PITR/],
    [{ fork_strategy: 'YESTERDAY' }, /fork_strategy/],
    [{ fork_strategy: 'now' }, /fork_strategy/],
    [{}, /fork_strategy/],
    [{ fork_strategy: 'NOW', name: '' }, /name must not be empty/],
    [{ fork_strategy: 'NOW', name: 'x'.repeat(129) }, /at most 128/],
    [{ fork_strategy: 'NOW', cpu_millis: 1000 }, /cpu_millis/],
    [{ fork_strategy: 'NOW', cpu_millis: '3000' }, /No size offers/],
    [{ fork_strategy: 'NOW', cpu_millis: 'shared', memory_gbs: '4' }, /both be "shared"/],
    [{ fork_strategy: 'NOW', environment_tag: 'QA' }, /environment_tag/],
    [{ fork_strategy: 'NOW', region_code: 'us-east-1' }, /region_code|additional/],
    [{ fork_strategy: 'NOW', replica_count: 1 }, /replica_count|additional/],
  ];
  for (const [body, message] of bad) {
    const res = await fork(b, parent.id, body);
    assert.equal(
      res.status,
      400,
      `${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body)}`,
    );
    assertError(res, 400, 'INVALID_REQUEST', message);
  }
  assertError(await fork(b, parent.id), 400, 'INVALID_REQUEST');
  // Nothing was created.
  assert.equal((await b.call('GET', servicesUrl(b))).body.length, 1);

  assertError(await fork(b, 'nosuchsvc1', { fork_strategy: 'NOW' }), 404, 'NOT_FOUND');
  assertError(
    await b.call('POST', `/v1/projects/zzzzzzzzzz/services/${parent.id}/forkService`, {
      fork_strategy: 'NOW',
    }),
    404,
    'NOT_FOUND',
  );
  assert.equal((await b.call('GET', servicesUrl(b))).body.length, 1);
});

test('before its first backup, a service forks with NOW only; LAST_SNAPSHOT and PITR are 409', async (t) => {
  // Backups take a while here (2 s, every sim change does), so the first
  // one is still running when the forks below are asked for, even on a
  // machine busy enough to take a second between READY and the request.
  const b = await startBasin(t, { env: { BASIN_SIM_DELAY_MS: '2000' } });
  const created = (await b.call('POST', servicesUrl(b), { name: 'young' })).body;
  const ready = await waitForStatus(b, created.service_id, 'READY');
  for (const body of [
    { fork_strategy: 'LAST_SNAPSHOT' },
    { fork_strategy: 'PITR', target_time: ready.created },
  ]) {
    assertError(
      await fork(b, created.service_id, body),
      409,
      'CONFLICT',
      /has no backup yet: its first is taken once it is READY\. Fork it with NOW/,
    );
  }
  const now = await fork(b, created.service_id, { fork_strategy: 'NOW' });
  assert.equal(now.status, 202, JSON.stringify(now.body));
  await backedUp(b, created.service_id);
  const snap = await fork(b, created.service_id, { fork_strategy: 'LAST_SNAPSHOT' });
  assert.equal(snap.status, 202, JSON.stringify(snap.body));
  for (const id of [now.body.service_id, snap.body.service_id]) await waitForStatus(b, id, 'READY');
});

test('a PAUSED parent forks three ways; one being stopped or started is 409', async (t) => {
  const b = await startBasin(t);
  const parent = await readyService(b);
  const target = await pastTarget(b, parent.id);
  assert.equal((await b.call('POST', `${serviceUrl(b, parent.id)}/stop`)).status, 202);
  await waitForStatus(b, parent.id, 'PAUSED');
  for (const body of [
    { fork_strategy: 'NOW' },
    { fork_strategy: 'LAST_SNAPSHOT' },
    { fork_strategy: 'PITR', target_time: target },
  ]) {
    const res = await fork(b, parent.id, body);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await waitForStatus(b, res.body.service_id, 'READY');
  }
  assert.equal((await getService(b, parent.id)).status, 'PAUSED');

  // A sim whose state changes take a while: the parent is RESUMING for a moment.
  const slow = await startBasin(t, { env: { BASIN_SIM_DELAY_MS: '300' } });
  const paused = await pausedService(slow);
  assert.equal((await slow.call('POST', `${serviceUrl(slow, paused)}/start`)).status, 202);
  assertError(
    await fork(slow, paused, { fork_strategy: 'NOW' }),
    409,
    'CONFLICT',
    /while it is RESUMING: fork it once it is READY or PAUSED/,
  );
});

test('a fork is independent: deleting the parent leaves it running', async (t) => {
  const b = await startBasin(t);
  const parent = await readyService(b);
  const f = await fork(b, parent.id, { fork_strategy: 'NOW' });
  assert.equal(f.status, 202);
  await waitForStatus(b, f.body.service_id, 'READY');
  assert.equal((await b.call('DELETE', serviceUrl(b, parent.id))).status, 202);
  await b.basin.engine.idle();
  assertError(await b.call('GET', serviceUrl(b, parent.id)), 404, 'NOT_FOUND');
  const child = await getService(b, f.body.service_id);
  assert.equal(child.status, 'READY');
  assert.deepEqual(child.forked_from, {
    is_standby: false,
    project_id: b.projectId,
    service_id: parent.id,
  });
});
