// What the engine does when the driver's storage watch speaks (engine/storage.ts),
// through a running engine, a fake driver and the real SQLite store: a change
// of level is written into the service's logs and brings a converge, a stop
// makes a READY service UNSTABLE, a paused service only gets the entry, and a
// read replica set only hears of its stop.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { type StorageLevel, storageLimits } from '../../src/domain/storage.js';
import type { ReplicaSet, Service, ServiceStatus } from '../../src/domain/types.js';
import type { StorageEvent } from '../../src/drivers/driver.js';
import { Engine } from '../../src/engine/engine.js';
import { recordingProvisioner } from '../../src/engine/network-provisioner.js';
import { silentLogger } from '../../src/lib/logger.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { eventually, tempDir } from '../helpers.js';
import { FakeDriver } from './fake-driver.js';

const MB = 1024 * 1024;
const NOW = Date.parse('2030-01-01T00:00:00Z');

async function world(t: TestContext) {
  const store = openSqliteStore(join(tempDir(t), 'basin.db'));
  const driver = new FakeDriver();
  const engine = new Engine(
    { store, driver, clock: () => NOW, provisioner: recordingProvisioner },
    silentLogger,
    { reconcileIntervalMs: 3_600_000 },
  );
  t.after(async () => {
    await engine.close();
    store.close();
  });
  await engine.start();
  return { store, driver };
}

function service(id: string, status: ServiceStatus): Service {
  return {
    id,
    projectId: 'p1',
    name: id,
    regionCode: 'us-east-1',
    type: 'POSTGRES',
    vector: false,
    status,
    environment: 'DEV',
    size: { shared: true, cpuMillis: 0, memoryGbs: 0 },
    port: 20_000,
    pooler: { enabled: false, port: null },
    vpcId: null,
    forkedFrom: null,
    ha: { replicaCount: 0, syncReplicaCount: 0 },
    passwordVerifier: scramVerifier('storage-test-password'),
    createdAt: new Date(NOW).toISOString(),
    version: 1,
  };
}

/** A change of level, as the local driver's watch reports it. */
function change(kind: 'service' | 'replicaSet', id: string, from: StorageLevel, to: StorageLevel) {
  const event: StorageEvent = {
    target: { kind, id },
    change: {
      from,
      view: {
        level: to,
        ...(to === 'stopped' ? { why: 'limit' as const } : {}),
        usage: { data: (to === 'stopped' ? 400 : 210) * MB, backups: 0 },
        limits: storageLimits(200 * MB),
        grows: true,
      },
    },
  };
  return event;
}

async function entries(store: Store, kind: 'service' | 'replicaSet', id: string) {
  const events = await store.events.list(kind, id, {
    node: 0,
    severities: [],
    search: [],
    limit: 100,
  });
  return events.map((e) => `${e.severity} ${e.message}`);
}

test('a change of level goes into the logs and brings a converge; a stop makes the service UNSTABLE', async (t) => {
  const { store, driver } = await world(t);
  await store.transaction((tx) => tx.services.insert(service('s1', 'READY')));

  driver.emitStorage(change('service', 's1', 'ok', 'readOnly'));
  await eventually(async () => driver.calls('s1') === 1, 'a converge of s1');
  const logged = await entries(store, 'service', 's1');
  assert.equal(logged.length, 1);
  assert.match(logged[0]!, /^WARNING basin: storage is at 210 MB, over its allowance of 200 MB/);
  assert.equal((await store.services.get('s1'))!.status, 'READY');

  // Its nodes not at its level yet: a converge, no entry.
  driver.emitStorage({ target: { kind: 'service', id: 's1' } });
  await eventually(async () => driver.calls('s1') === 2, 'another converge of s1');
  assert.equal((await entries(store, 'service', 's1')).length, 1);

  // Stopped: UNSTABLE, and its converge fails with why (the driver refuses to start it).
  driver.set('s1', { do: 'fail', retryable: false, message: 'storage is at 400 MB …' });
  driver.emitStorage(change('service', 's1', 'recovery', 'stopped'));
  await eventually(async () => driver.calls('s1') === 3, 'the converge of the stopped s1');
  await eventually(
    async () => (await entries(store, 'service', 's1')).length === 3,
    'the stop and the failure in the logs',
  );
  const [failure, stop] = await entries(store, 'service', 's1');
  assert.match(stop!, /^ERROR basin: storage is at 400 MB, past its limit of 328 MB/);
  assert.match(failure!, /^ERROR basin: .* failed: storage is at 400 MB/);
  assert.equal((await store.services.get('s1'))!.status, 'UNSTABLE');
});

test('a paused service gets the entry, not a converge; a replica set hears of its stop only', async (t) => {
  const { store, driver } = await world(t);
  await store.transaction(async (tx) => {
    await tx.services.insert(service('paused', 'PAUSED'));
    await tx.services.insert(service('s2', 'READY'));
    const rs: ReplicaSet = {
      id: 'rs1',
      projectId: 'p1',
      serviceId: 's2',
      name: 'rs1',
      nodes: 1,
      size: { shared: false, cpuMillis: 500, memoryGbs: 2 },
      status: 'active',
      environment: 'DEV',
      port: 20_001,
      nodePorts: [20_002],
      pooler: { enabled: false, port: null },
      createdAt: new Date(NOW).toISOString(),
      version: 1,
    };
    await tx.replicaSets.insert(rs);
  });
  driver.emitStorage(change('service', 'paused', 'ok', 'readOnly'));
  driver.emitStorage(change('replicaSet', 'rs1', 'ok', 'readOnly'));
  driver.emitStorage(change('replicaSet', 'rs1', 'recovery', 'stopped'));
  await eventually(
    async () => (await entries(store, 'replicaSet', 'rs1')).length === 1,
    "the set's stop in its logs",
  );
  assert.match(
    (await entries(store, 'replicaSet', 'rs1'))[0]!,
    /^ERROR basin: storage is at 400 MB, past its limit .*every process of the replica set was stopped/,
  );
  assert.equal((await entries(store, 'service', 'paused')).length, 1);
  assert.equal(driver.calls('paused'), 0);
  const pending = await store.operations.listPending();
  assert.deepEqual(
    pending.filter((o) => o.resourceId === 'paused'),
    [],
  );
});
