import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DriverError, type ReplicaSetSpec, type ServiceSpec } from '../driver.js';
import { DONE } from '../../domain/progress.js';
import { createSimDriver } from './sim-driver.js';

const START = Date.parse('2025-06-01T12:00:00.000Z');
const SHARED = { shared: true, cpuMillis: 0, memoryGbs: 0 };
const DEDICATED = { shared: false, cpuMillis: 2000, memoryGbs: 8 };

function fakeClock() {
  const clock = { now: START, read: () => clock.now };
  return clock;
}

function serviceSpec(over: Partial<ServiceSpec> = {}): ServiceSpec {
  return {
    serviceId: 'svc0000001',
    projectId: 'prj0000001',
    type: 'TIMESERIESDB',
    vector: false,
    size: SHARED,
    environment: 'DEV',
    running: true,
    port: 15432,
    passwordVerifier: 'SCRAM-SHA-256$4096:c2FsdA==$a:b',
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
    ha: { replicaCount: 0, syncReplicaCount: 0 },
    nodes: [{ index: 0, role: 'primary', port: 15432 }],
    source: { kind: 'empty' },
    createdAt: new Date(START).toISOString(),
    ...over,
  };
}

function replicaSetSpec(over: Partial<ReplicaSetSpec> = {}): ReplicaSetSpec {
  return {
    replicaSetId: 'rs00000001',
    serviceId: 'svc0000001',
    primary: serviceSpec(),
    nodePorts: [15434, 15435],
    projectId: 'prj0000001',
    nodes: 2,
    size: DEDICATED,
    environment: 'DEV',
    port: 15433,
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
    ...over,
  };
}

test('a change waits delayMs from its first call, then is done', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 3000, clock: clock.read });
  const spec = serviceSpec();
  assert.deepEqual(await sim.applyService(spec), {
    done: false,
    retryAfterMs: 3000,
    reason: 'creating',
  });
  assert.equal(await sim.inspectService(spec), 'missing', 'not created yet');
  clock.now += 1000;
  assert.deepEqual(await sim.applyService(spec), {
    done: false,
    retryAfterMs: 2000,
    reason: 'creating',
  });
  clock.now += 2000;
  assert.deepEqual(await sim.applyService(spec), DONE);
  assert.equal(await sim.inspectService(spec), 'running');
  assert.deepEqual(await sim.applyService(spec), DONE, 'already in force');

  // Another desired state restarts the wait; a field outside it does not.
  assert.deepEqual(await sim.applyService({ ...spec, port: 1 }), DONE);
  const stopped = { ...spec, running: false };
  assert.equal((await sim.applyService(stopped)).done, false);
  assert.equal(await sim.inspectService(stopped), 'running', 'still running while stopping');
  assert.deepEqual(await sim.applyService(spec), DONE, 'back to the state in force');
  const first = await sim.applyService(stopped);
  assert.deepEqual(first, { done: false, retryAfterMs: 3000, reason: 'stopping' });
  clock.now += 3000;
  assert.deepEqual(await sim.applyService(stopped), DONE);
  assert.equal(await sim.inspectService(stopped), 'stopped');
  const resized = { ...spec, size: DEDICATED };
  assert.deepEqual(await sim.applyService(resized), {
    done: false,
    retryAfterMs: 3000,
    reason: 'starting',
  });
});

test('CIDR order does not make a new desired state', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 1000, clock: clock.read });
  const spec = serviceSpec({ allowedCidrs: ['10.0.0.0/16', '10.1.0.0/16'] });
  await sim.applyService(spec);
  clock.now += 1000;
  assert.deepEqual(await sim.applyService(spec), DONE);
  assert.deepEqual(
    await sim.applyService({ ...spec, allowedCidrs: ['10.1.0.0/16', '10.0.0.0/16'] }),
    DONE,
  );
});

test('with delayMs 0 every step is done at once', async () => {
  const sim = createSimDriver({ delayMs: 0 });
  const spec = serviceSpec();
  assert.deepEqual(await sim.applyService(spec), DONE);
  assert.equal(await sim.inspectService(spec), 'running');
  assert.deepEqual(await sim.deleteService(spec.serviceId), DONE);
  assert.equal(await sim.inspectService(spec), 'missing');
});

test('delete takes delayMs, then the service is forgotten', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 500, clock: clock.read });
  const spec = serviceSpec();
  await sim.applyService(spec);
  clock.now += 500;
  assert.deepEqual(await sim.applyService(spec), DONE);
  assert.deepEqual(await sim.deleteService(spec.serviceId), {
    done: false,
    retryAfterMs: 500,
    reason: 'deleting',
  });
  assert.equal(await sim.inspectService(spec), 'running');
  clock.now += 500;
  assert.deepEqual(await sim.deleteService(spec.serviceId), DONE);
  assert.equal(await sim.inspectService(spec), 'missing');
  assert.equal(sim.metrics({ kind: 'service', id: spec.serviceId }), undefined);
  assert.deepEqual(await sim.deleteService(spec.serviceId), DONE, 'idempotent');
  assert.deepEqual(await sim.deleteService('unknown000'), DONE);
});

test('crash makes the service failed until an apply completes', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 2000, clock: clock.read });
  const spec = serviceSpec();
  assert.equal(sim.crash(spec.serviceId), false, 'unknown service');
  await sim.applyService(spec);
  clock.now += 2000;
  await sim.applyService(spec);
  assert.equal(sim.crash(spec.serviceId), true);
  assert.equal(await sim.inspectService(spec), 'failed');
  assert.deepEqual(await sim.applyService(spec), {
    done: false,
    retryAfterMs: 2000,
    reason: 'restarting after a crash',
  });
  clock.now += 1999;
  assert.equal((await sim.applyService(spec)).done, false);
  assert.equal(await sim.inspectService(spec), 'failed');
  clock.now += 1;
  assert.deepEqual(await sim.applyService(spec), DONE);
  assert.equal(await sim.inspectService(spec), 'running');
});

test('after a restart, services are adopted as matching their spec', async () => {
  const sim = createSimDriver({ delayMs: 3000 });
  const running = serviceSpec({ serviceId: 'svcrunning' });
  const paused = serviceSpec({ serviceId: 'svcpaused0', running: false });
  assert.equal(await sim.inspectService(running), 'running');
  assert.equal(await sim.inspectService(paused), 'stopped');
  assert.deepEqual(await sim.applyService(running), DONE, 'already in force');
  assert.notEqual(sim.metrics({ kind: 'service', id: 'svcrunning' }), undefined);
});

test('a fork needs a parent the sim knows', async () => {
  const sim = createSimDriver({ delayMs: 0 });
  const fork = serviceSpec({
    serviceId: 'svcfork001',
    source: {
      kind: 'fork',
      parentServiceId: 'svc0000001',
      strategy: 'NOW',
      targetTime: null,
      backupLabel: null,
    },
  });
  await assert.rejects(sim.applyService(fork), (err: unknown) => {
    assert.ok(err instanceof DriverError);
    assert.equal(err.retryable, false);
    assert.match(err.message, /svc0000001/);
    return true;
  });
  await sim.applyService(serviceSpec());
  assert.deepEqual(await sim.applyService(fork), DONE);
  // Once created, the fork no longer needs its parent.
  await sim.deleteService('svc0000001');
  assert.deepEqual(await sim.applyService({ ...fork, size: DEDICATED }), DONE);
});

test('replica sets converge, crash and delete like services', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 1000, clock: clock.read });
  const spec = replicaSetSpec();
  assert.equal((await sim.applyReplicaSet(spec)).done, false);
  assert.equal(await sim.inspectReplicaSet(spec), 'missing');
  clock.now += 1000;
  assert.deepEqual(await sim.applyReplicaSet(spec), DONE);
  assert.equal(await sim.inspectReplicaSet(spec), 'running');
  const bigger = { ...spec, nodes: 3 };
  assert.deepEqual(await sim.applyReplicaSet(bigger), {
    done: false,
    retryAfterMs: 1000,
    reason: 'changing node count',
  });
  assert.equal(sim.crashReplicaSet(spec.replicaSetId), true);
  assert.equal(await sim.inspectReplicaSet(spec), 'failed');
  clock.now += 1000;
  assert.deepEqual(await sim.applyReplicaSet(bigger), DONE);
  assert.equal(await sim.inspectReplicaSet(bigger), 'running');
  assert.equal((await sim.deleteReplicaSet(spec.replicaSetId)).done, false);
  clock.now += 1000;
  assert.deepEqual(await sim.deleteReplicaSet(spec.replicaSetId), DONE);
  assert.equal(await sim.inspectReplicaSet(spec), 'missing');
  assert.equal(sim.metrics({ kind: 'replicaSet', id: spec.replicaSetId }), undefined);
});

test('metrics are plausible, deterministic and slowly varying', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 0, clock: clock.read });
  const twin = createSimDriver({ delayMs: 0, clock: clock.read });
  assert.equal(sim.metrics({ kind: 'service', id: 'svc0000001' }), undefined);
  const shared = serviceSpec();
  const dedicated = serviceSpec({ serviceId: 'svc0000002', size: DEDICATED });
  for (const driver of [sim, twin]) {
    await driver.applyService(shared);
    await driver.applyService(dedicated);
    await driver.applyReplicaSet(replicaSetSpec());
  }
  let previous = sim.metrics({ kind: 'service', id: shared.serviceId });
  for (let minute = 0; minute < 24 * 60; minute += 7) {
    clock.now = START + minute * 60_000;
    const s = sim.metrics({ kind: 'service', id: shared.serviceId });
    const d = sim.metrics({ kind: 'service', id: dedicated.serviceId });
    const r = sim.metrics({ kind: 'replicaSet', id: 'rs00000001' });
    assert.ok(s && d && r && previous);
    assert.deepEqual(twin.metrics({ kind: 'service', id: shared.serviceId }), s);
    assert.ok(s.memoryMb >= 64 && s.memoryMb <= 256, `shared memory ${s.memoryMb}`);
    assert.ok(s.milliCpu >= 0 && s.milliCpu < 250, `shared cpu ${s.milliCpu}`);
    assert.ok(d.memoryMb > 0 && d.memoryMb <= 8 * 1024, `memory ${d.memoryMb}`);
    assert.ok(d.milliCpu >= 0 && d.milliCpu < 2000, `cpu ${d.milliCpu}`);
    assert.ok(r.memoryMb > 0 && r.memoryMb <= 8 * 1024);
    assert.ok(s.storageMb >= 28 && s.storageMb >= previous.storageMb, 'storage grows');
    previous = s;
  }
  assert.ok(previous && previous.storageMb < 200, 'slowly');
  // A second later, usage has barely moved.
  const a = sim.metrics({ kind: 'service', id: shared.serviceId });
  clock.now += 1000;
  const b = sim.metrics({ kind: 'service', id: shared.serviceId });
  assert.ok(
    a && b && Math.abs(a.memoryMb - b.memoryMb) <= 2 && Math.abs(a.milliCpu - b.milliCpu) <= 3,
  );
  // A paused service uses no memory or CPU but keeps its storage.
  await sim.applyService({ ...shared, running: false });
  const paused = sim.metrics({ kind: 'service', id: shared.serviceId });
  assert.deepEqual(paused, { memoryMb: 0, milliCpu: 0, storageMb: b.storageMb });
});

test('metrics asked again at the same moment are the same answer, and a change at that moment is seen', async () => {
  const clock = fakeClock();
  const sim = createSimDriver({ delayMs: 0, clock: clock.read });
  const shared = serviceSpec({ serviceId: 'svc0000009' });
  await sim.applyService(shared);
  const target = { kind: 'service', id: shared.serviceId } as const;
  const first = sim.metrics(target);
  assert.ok(first);
  assert.equal(sim.metrics(target), first, 'the same object: not worked out again');
  // Resized within the same millisecond: worked out for the new size.
  await sim.applyService({ ...shared, size: DEDICATED });
  const resized = sim.metrics(target);
  assert.ok(resized && resized.memoryMb > 256, `dedicated memory ${resized?.memoryMb}`);
  // A millisecond later: worked out again (the same values, or nearly).
  clock.now += 1;
  const later = sim.metrics(target);
  assert.notEqual(later, resized);
  assert.ok(later && Math.abs(later.memoryMb - resized.memoryMb) <= 1);
});

test('delayMs must be a non-negative number', () => {
  assert.throws(() => createSimDriver({ delayMs: -1 }), RangeError);
  assert.throws(() => createSimDriver({ delayMs: Number.NaN }), RangeError);
});
