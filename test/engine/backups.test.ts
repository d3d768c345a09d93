// Backups as the engine runs them (src/engine/backups.ts), with a fake
// driver and an injected clock: a first backup once a service is READY,
// then on the schedule; each recorded in the store; expiry by the recovery
// window, sparing what forks in the making restore; failures retried, told
// in the service's logs, never making the service UNSTABLE; a delete takes
// the backups with it.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { serviceConverge } from '../../src/domain/operations.js';
import type { Service } from '../../src/domain/types.js';
import { Engine } from '../../src/engine/engine.js';
import type { HandlerDeps } from '../../src/engine/handlers.js';
import { recordingProvisioner } from '../../src/engine/network-provisioner.js';
import { reconcile } from '../../src/engine/reconciler.js';
import { silentLogger } from '../../src/lib/logger.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { eventually, tempDir } from '../helpers.js';
import { FakeDriver } from './fake-driver.js';

const H = 3_600_000;
const POLICY = { scheduleMs: 24 * H, windowMs: 72 * H };

async function world(t: TestContext) {
  const store: Store = openSqliteStore(join(tempDir(t), 'basin.db'));
  const driver = new FakeDriver();
  let now = Date.parse('2030-01-01T00:00:00Z');
  const deps: HandlerDeps = {
    store,
    driver,
    clock: () => now,
    provisioner: recordingProvisioner,
    backups: POLICY,
  };
  const engine = new Engine(deps, silentLogger, {
    reconcileIntervalMs: 3_600_000,
    random: () => 0.5,
    retry: { baseMs: 10, capMs: 40, failAfter: 3 },
  });
  t.after(async () => {
    await engine.close();
    store.close();
  });
  await engine.start();
  const labels = async (id: string) => (await store.backups.listByService(id)).map((b) => b.label);
  return {
    store,
    driver,
    engine,
    labels,
    advance(ms: number) {
      now += ms;
    },
    async create(id: string, forkedFrom: Service['forkedFrom'] = null): Promise<Service> {
      const svc: Service = {
        id,
        projectId: 'p1',
        name: id,
        regionCode: 'us-east-1',
        type: 'POSTGRES',
        vector: false,
        status: 'QUEUED',
        environment: 'DEV',
        size: { shared: true, cpuMillis: 0, memoryGbs: 0 },
        port: 20_000 + id.length,
        pooler: { enabled: false, port: null },
        vpcId: null,
        forkedFrom,
        ha: { replicaCount: 0, syncReplicaCount: 0 },
        passwordVerifier: scramVerifier('engine-test-password'),
        createdAt: new Date(now).toISOString(),
        version: 1,
      };
      await store.transaction(async (tx) => {
        await tx.services.insert(svc);
        await tx.operations.enqueue(serviceConverge(svc), now);
      });
      engine.kick();
      return svc;
    },
    /** Runs the reconciler (the schedule) and waits for the engine to be idle. */
    async round() {
      await reconcile(deps);
      engine.kick();
      await engine.idle();
    },
  };
}

test('a service is backed up once READY, then on the schedule, each backup recorded', async (t) => {
  const w = await world(t);
  await w.create('s1');
  await eventually(async () => (await w.labels('s1')).length === 1, 'a first backup');
  assert.equal((await w.store.services.get('s1'))?.status, 'READY');
  await w.engine.idle();
  // Not due yet: nothing new.
  w.advance(23 * H);
  await w.round();
  assert.deepEqual(await w.labels('s1'), ['b0']);
  w.advance(H);
  await w.round();
  assert.deepEqual(await w.labels('s1'), ['b0', 'b1']);
  const [first] = await w.store.backups.listByService('s1');
  assert.equal(first?.serviceId, 's1');
  assert.ok(Date.parse(first?.stoppedAt ?? '') > Date.parse(first?.startedAt ?? ''));
});

test('expiry keeps the window restorable, and what forks being made restore', async (t) => {
  const w = await world(t);
  await w.create('s1');
  await eventually(async () => (await w.labels('s1')).length === 1, 'a first backup');
  await w.engine.idle();
  for (let day = 1; day <= 3; day++) {
    w.advance(24 * H);
    await w.round();
  }
  // Backups at 0, 24, 48, 72 h; the window reaches back to 0 h: all kept.
  assert.deepEqual(await w.labels('s1'), ['b0', 'b1', 'b2', 'b3']);
  assert.deepEqual(w.driver.expired, []);

  // A fork being made from b0 pins it.
  await w.store.transaction(async (tx) => {
    await tx.services.insert({
      ...((await tx.services.get('s1')) as Service),
      id: 'f1',
      status: 'CONFIGURING',
      forkedFrom: {
        serviceId: 's1',
        projectId: 'p1',
        strategy: 'LAST_SNAPSHOT',
        targetTime: null,
        backupLabel: 'b0',
      },
    });
  });
  w.advance(48 * H);
  await w.round();
  // At 120 h the window starts at 48 h: b1 covers it, but b0 stays for the fork.
  assert.deepEqual(await w.labels('s1'), ['b0', 'b1', 'b2', 'b3', 'b4']);
  assert.deepEqual(w.driver.expired, []);

  await w.store.transaction(async (tx) => tx.services.delete('f1'));
  w.advance(24 * H);
  await w.round();
  // At 144 h it starts at 72 h: b2 (ended at 48 h) covers it; b3 ended a second too late.
  assert.deepEqual(await w.labels('s1'), ['b2', 'b3', 'b4', 'b5']);
  assert.deepEqual(w.driver.expired, [['s1', 'b2']]);
});

test('a failing backup is retried and told in the logs; the service stays READY', async (t) => {
  const w = await world(t);
  w.driver.backupBehaviour.set('s1', { do: 'fail', retryable: false, message: 'disk full' });
  await w.create('s1');
  const events = () =>
    w.store.events.list('service', 's1', { node: 0, severities: [], search: [], limit: 50 });
  await eventually(
    async () => (await events()).some((e) => /basin: backing up failed/.test(e.message)),
    'a failure in the logs',
  );
  assert.equal((await w.store.services.get('s1'))?.status, 'READY');
  assert.match((await events())[0]?.message ?? '', /disk full/);
  w.driver.backupBehaviour.delete('s1');
  w.advance(60_000);
  w.engine.kick();
  await eventually(async () => (await w.labels('s1')).length === 1, 'the backup, once it works');
  assert.equal((await w.store.services.get('s1'))?.status, 'READY');
});

test('a service that is not READY is not backed up', async (t) => {
  const w = await world(t);
  w.driver.backupBehaviour.set('s1', { do: 'hang' });
  await w.create('s1');
  await eventually(async () => (await w.store.services.get('s1'))?.status === 'READY', 'READY');
  // The backup is under way when the service is stopped: it is dropped.
  await w.store.transaction(async (tx) => {
    const s = (await tx.services.get('s1')) as Service;
    await tx.services.update({ ...s, status: 'PAUSED' });
  });
  w.driver.backupBehaviour.delete('s1');
  w.advance(2_000);
  w.engine.kick();
  await w.engine.idle();
  assert.deepEqual(await w.labels('s1'), []);
  w.advance(48 * H);
  await w.round();
  assert.deepEqual(await w.labels('s1'), []);
});
