// The engine's own logic, with a fake driver that fails or hangs on demand,
// an injected clock that only moves when the test moves it, and the real
// SQLite store: failures are bounded and visible, retries back off, slots are
// shared fairly, hung work neither holds a slot nor blocks shutdown, and the
// leases of other engines are taken only when they are dead or expired.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { serviceConverge, serviceDelete } from '../../src/domain/operations.js';
import { applyServiceAction } from '../../src/domain/service-status.js';
import type { Service } from '../../src/domain/types.js';
import { Engine, type EngineOptions } from '../../src/engine/engine.js';
import type { HandlerDeps } from '../../src/engine/handlers.js';
import { recordingProvisioner } from '../../src/engine/network-provisioner.js';
import { reconcile } from '../../src/engine/reconciler.js';
import { silentLogger } from '../../src/lib/logger.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Operation, Store } from '../../src/store/store.js';
import { eventually, tempDir } from '../helpers.js';
import { FakeDriver } from './fake-driver.js';

const VERIFIER = scramVerifier('engine-test-password');
let nextPort = 20_000;

interface World {
  store: Store;
  driver: FakeDriver;
  deps: HandlerDeps;
  file: string;
  now(): number;
  /** Moves the clock on and wakes the engine. */
  advance(ms: number, engine?: Engine): void;
  engine(options?: Partial<EngineOptions>): Promise<Engine>;
  /** A new service (QUEUED) with its provisioning queued, as createService writes them. */
  create(id: string, projectId?: string): Promise<Service>;
  service(id: string): Promise<Service>;
  events(id: string): Promise<{ severity: string; message: string }[]>;
  op(id: number): Promise<Operation>;
}

async function world(t: TestContext): Promise<World> {
  const file = join(tempDir(t), 'basin.db');
  const store = openSqliteStore(file);
  const driver = new FakeDriver();
  let now = Date.parse('2030-01-01T00:00:00Z');
  const clock = () => now;
  const deps: HandlerDeps = { store, driver, clock, provisioner: recordingProvisioner };
  const engines: Engine[] = [];
  t.after(async () => {
    driver.releaseHung();
    for (const e of engines) await e.close();
    store.close();
  });
  return {
    store,
    driver,
    deps,
    file,
    now: clock,
    advance(ms, engine) {
      now += ms;
      (engine ?? engines[engines.length - 1])?.kick();
    },
    async engine(options = {}) {
      const engine = new Engine(deps, silentLogger, {
        reconcileIntervalMs: 3_600_000,
        random: () => 0.5,
        ...options,
      });
      engines.push(engine);
      await engine.start();
      return engine;
    },
    async create(id, projectId = 'p1') {
      const svc: Service = {
        id,
        projectId,
        name: id,
        regionCode: 'us-east-1',
        type: 'POSTGRES',
        vector: false,
        status: 'QUEUED',
        environment: 'DEV',
        size: { shared: true, cpuMillis: 0, memoryGbs: 0 },
        port: nextPort++,
        pooler: { enabled: false, port: null },
        vpcId: null,
        forkedFrom: null,
        ha: { replicaCount: 0, syncReplicaCount: 0 },
        passwordVerifier: VERIFIER,
        createdAt: new Date(now).toISOString(),
        version: 1,
      };
      await store.transaction(async (tx) => {
        await tx.services.insert(svc);
        await tx.operations.enqueue(serviceConverge(svc), now);
      });
      return svc;
    },
    async service(id) {
      return (await store.services.get(id)) as Service;
    },
    async events(id) {
      const events = await store.events.list('service', id, {
        node: 0,
        severities: [],
        search: [],
        limit: 100,
      });
      return events.map(({ severity, message }) => ({ severity, message }));
    },
    async op(id) {
      return (await store.operations.get(id)) as Operation;
    },
  };
}

const statusOf = (w: World, id: string, status: string) =>
  eventually(async () => (await w.service(id)).status === status, `${id} ${status}`);

/** The only operation of a resource, pending or not (a service's backups have a lane of their own). */
async function onlyOp(w: World, resourceId: string): Promise<Operation> {
  const rows = new Database(w.file, { readonly: true })
    .prepare(
      "SELECT id FROM operations WHERE resource_id = ? AND resource_kind != 'serviceBackups' ORDER BY id",
    )
    .pluck()
    .all(resourceId) as number[];
  assert.equal(rows.length, 1, `one operation for ${resourceId}`);
  return w.op(rows[0] as number);
}

test('a permanent failure: one attempt, UNSTABLE with the reason in its logs, and no more calls', async (t) => {
  const w = await world(t);
  w.driver.set('s1', { do: 'fail', retryable: false, message: 'initdb: No space left on device' });
  await w.create('s1');
  await w.create('s2'); // a healthy neighbour
  await w.engine();
  await statusOf(w, 's1', 'UNSTABLE');
  await statusOf(w, 's2', 'READY');

  const op = await onlyOp(w, 's1');
  assert.equal(op.state, 'failed');
  assert.equal(op.lastError, 'initdb: No space left on device');
  assert.deepEqual(await w.events('s1'), [
    { severity: 'ERROR', message: 'basin: provisioning failed: initdb: No space left on device' },
  ]);
  // Reconciling, again and again, as the engine does every few seconds: it
  // leaves the failed service alone, so the host is not hammered.
  for (let i = 0; i < 5; i++) {
    w.advance(60_000);
    assert.equal(await reconcile(w.deps), 0);
  }
  // Nothing queued for it (the neighbour's scheduled backup may be, in its own lane).
  assert.deepEqual(
    (await w.store.operations.listPending()).filter((o) => o.resourceId === 's1'),
    [],
  );
  assert.equal(w.driver.calls('s1'), 1);
  assert.equal((await w.service('s1')).status, 'UNSTABLE');

  // A user's request tries again (start is allowed from UNSTABLE).
  w.driver.set('s1', { do: 'succeed' });
  await w.store.transaction(async (tx) => {
    const next = await tx.services.update(applyServiceAction(await w.service('s1'), 'start'));
    await tx.operations.enqueue(serviceConverge(next), w.now());
  });
  w.advance(0);
  await statusOf(w, 's1', 'READY');
  assert.equal(w.driver.calls('s1'), 2);
});

test("a step's note goes into its resource's logs, once, and the operation goes on", async (t) => {
  const w = await world(t);
  const note = { severity: 'WARNING' as const, message: 'basin: node1 cannot follow the primary' };
  w.driver.set('s1', { do: 'note', note });
  await w.create('s1');
  await w.engine();
  await statusOf(w, 's1', 'READY');
  assert.equal(w.driver.calls('s1'), 2);
  assert.deepEqual(await w.events('s1'), [note]);
});

test("what the driver saw outside any operation goes into the resource's logs; a resource gone gets nothing", async (t) => {
  const w = await world(t);
  await w.create('s1');
  await w.engine();
  await statusOf(w, 's1', 'READY');
  const note = {
    severity: 'WARNING' as const,
    message:
      'basin: node0 ran out of memory (its bound: 1 GiB): the kernel killed 1 of its processes',
  };
  // The store's transactions run one after another: once s1's is seen, gone's has run.
  w.driver.note({ kind: 'service', id: 'gone' }, note);
  w.driver.note({ kind: 'service', id: 's1' }, note);
  await eventually(async () => (await w.events('s1')).length > 0, 'the note in the logs');
  assert.deepEqual(await w.events('s1'), [note]);
  assert.deepEqual(await w.events('gone'), []);
  assert.equal((await w.service('s1')).status, 'READY', 'a note changes nothing else');
});

test('retryable failures back off exponentially up to the cap; the service is UNSTABLE after 5; attempts are never reset', async (t) => {
  const w = await world(t);
  w.driver.set('s1', { do: 'fail', retryable: true, message: 'port 5432 busy' });
  await w.create('s1');
  const engine = await w.engine();
  const delays: number[] = [];
  for (let attempt = 1; attempt <= 12; attempt++) {
    await eventually(async () => w.driver.calls('s1') === attempt, `attempt ${attempt}`);
    const op = await eventually(async () => {
      const o = await onlyOp(w, 's1');
      return o.attempts === attempt && o.lockedBy === null ? o : undefined;
    }, `attempt ${attempt} recorded`);
    assert.equal(op.state, 'pending');
    assert.equal(op.lastError, 'port 5432 busy');
    delays.push(op.runAfter - w.now());
    // The reconciler sees the pending operation and queues nothing beside it.
    assert.equal(await reconcile(w.deps), 0);
    if (attempt === 4) assert.equal((await w.service('s1')).status, 'CONFIGURING');
    if (attempt === 5) assert.equal((await w.service('s1')).status, 'UNSTABLE');
    w.advance(op.runAfter - w.now(), engine);
  }
  assert.deepEqual(
    delays,
    [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300].map((s) => s * 1000),
  );
  // The first, each doubling, and the one that marked it UNSTABLE: not one per retry.
  assert.deepEqual(
    (await w.events('s1')).reverse(),
    [
      ['WARNING', 1, '1 s'],
      ['WARNING', 2, '2 s'],
      ['WARNING', 4, '8 s'],
      ['ERROR', 5, '16 s'],
      ['ERROR', 8, '2 min'],
    ].map(([severity, n, delay]) => ({
      severity,
      message: `basin: provisioning failed (attempt ${n}), retrying in ${delay}: port 5432 busy`,
    })),
  );

  // It works at last: READY, and the logs say so.
  w.driver.set('s1', { do: 'succeed' });
  await eventually(async () => w.driver.calls('s1') === 13, 'attempt 13');
  await statusOf(w, 's1', 'READY');
  assert.equal((await onlyOp(w, 's1')).state, 'done');
  assert.deepEqual((await w.events('s1'))[0], {
    severity: 'LOG',
    message: 'basin: provisioning succeeded after 12 failed attempts',
  });
});

test('retryable failures end after maxAttempts: the operation failed, the service UNSTABLE, the reason in its logs, no more calls', async (t) => {
  const w = await world(t);
  w.driver.set('s1', { do: 'fail', retryable: true, message: 'port 5432 busy' });
  await w.create('s1');
  const engine = await w.engine({ retry: { maxAttempts: 3 } });
  for (let attempt = 1; attempt <= 2; attempt++) {
    await eventually(async () => w.driver.calls('s1') === attempt, `attempt ${attempt}`);
    const op = await eventually(async () => {
      const o = await onlyOp(w, 's1');
      return o.attempts === attempt && o.lockedBy === null ? o : undefined;
    }, `attempt ${attempt} recorded`);
    assert.equal(op.state, 'pending');
    w.advance(op.runAfter - w.now(), engine);
  }
  await eventually(async () => w.driver.calls('s1') === 3, 'attempt 3');
  const op = await eventually(async () => {
    const o = await onlyOp(w, 's1');
    return o.state === 'failed' ? o : undefined;
  }, 'the operation failed');
  const reason = 'gave up after 3 failed attempts; the last: port 5432 busy';
  assert.equal(op.lastError, reason);
  await statusOf(w, 's1', 'UNSTABLE');
  assert.deepEqual((await w.events('s1'))[0], {
    severity: 'ERROR',
    message: `basin: provisioning failed: ${reason}`,
  });
  // Nothing retries it: not the engine's loop, not the reconciler.
  w.advance(3_600_000, engine);
  assert.equal(await reconcile(w.deps), 0);
  await engine.idle();
  assert.equal(w.driver.calls('s1'), 3);
});

test('a step that never finishes waiting ends failed after maxWaitMs, its waits counted, with a readable reason', async (t) => {
  const w = await world(t);
  w.driver.set('s1', {
    do: 'wait',
    ms: 10_000,
    reason: 'waiting for PostgreSQL to accept connections',
  });
  await w.create('s1');
  const engine = await w.engine({ retry: { maxWaitMs: 60_000 } });
  for (let call = 1; call <= 6; call++) {
    await eventually(async () => w.driver.calls('s1') === call, `call ${call}`);
    const op = await eventually(async () => {
      const o = await onlyOp(w, 's1');
      return o.waits === call && o.lockedBy === null ? o : undefined;
    }, `wait ${call} recorded`);
    assert.equal(op.state, 'pending');
    assert.equal(op.attempts, 0, 'a wait is no failed attempt');
    assert.equal(op.waitingSince, Date.parse('2030-01-01T00:00:00Z'));
    w.advance(op.runAfter - w.now(), engine);
  }
  // The seventh call is 60 s after the first wait: the bound.
  await eventually(async () => w.driver.calls('s1') === 7, 'call 7');
  const op = await eventually(async () => {
    const o = await onlyOp(w, 's1');
    return o.state === 'failed' ? o : undefined;
  }, 'the operation failed');
  const reason =
    'still waiting for PostgreSQL to accept connections after 60 s (7 checks); Basin waits at most 60 s';
  assert.equal(op.lastError, reason);
  await statusOf(w, 's1', 'UNSTABLE');
  assert.deepEqual((await w.events('s1'))[0], {
    severity: 'ERROR',
    message: `basin: provisioning failed: ${reason}`,
  });
  w.advance(3_600_000, engine);
  assert.equal(await reconcile(w.deps), 0);
  await engine.idle();
  assert.equal(w.driver.calls('s1'), 7);
});

test('a service whose host does not answer does not hold back the repair of the others', async (t) => {
  const w = await world(t);
  await w.create('s1');
  await w.create('s2');
  await w.engine();
  await statusOf(w, 's1', 'READY');
  await statusOf(w, 's2', 'READY');
  w.driver.unreachable.add('s1');
  w.driver.lose('s2');
  const errors: string[] = [];
  const queued = await reconcile(w.deps, (err) => errors.push((err as Error).message));
  assert.deepEqual(errors, ['The host of s1 does not answer.']);
  assert.ok(queued >= 1);
  // Its repair was queued (and runs): converged again, READY.
  await eventually(async () => w.driver.calls('s2') >= 2, 's2 converged again');
  await statusOf(w, 's2', 'READY');
});

test('deleting never gives up: a permanent error is retried with backoff', async (t) => {
  const w = await world(t);
  const svc = await w.create('s1');
  await w.engine();
  await statusOf(w, 's1', 'READY');
  w.driver.set('s1', { do: 'fail', retryable: false, message: 'cannot remove directory' });
  await w.store.transaction(async (tx) => {
    const deleting = await tx.services.update(applyServiceAction(await w.service('s1'), 'delete'));
    await tx.operations.enqueue(serviceDelete(deleting), w.now());
  });
  w.advance(0);
  const pendingDelete = async (attempts: number) =>
    eventually(async () => {
      const [op] = await w.store.operations.listPending();
      return op?.kind === 'service.delete' && op.attempts === attempts && !op.lockedBy && op;
    }, `delete attempt ${attempts}`);
  const first = await pendingDelete(1);
  assert.equal((await w.service('s1')).status, 'DELETING');
  w.advance(first.runAfter - w.now());
  await pendingDelete(2);
  w.driver.set('s1', { do: 'succeed' });
  w.advance(10_000);
  await eventually(async () => !(await w.store.services.get(svc.id)), 'deleted');
  assert.deepEqual(await w.events('s1'), [], 'its events went with it');
});

test("one project's slow operations never take every slot", async (t) => {
  const w = await world(t);
  for (const id of ['a1', 'a2', 'a3', 'a4']) {
    w.driver.set(id, { do: 'hang' });
    await w.create(id, 'A');
  }
  await w.create('b1', 'B');
  const engine = await w.engine({ slots: 4, projectSlots: 2 });
  await statusOf(w, 'b1', 'READY');
  await eventually(async () => w.driver.hanging.get('A') === 2, 'A holds two slots');
  await eventually(async () => engine.running === 2, "A's two run; B's finished");
  const later = await w.create('b2', 'B');
  engine.kick();
  await statusOf(w, later.id, 'READY');
  assert.equal(w.driver.hanging.get('A'), 2, 'still only two of A');
  for (const id of ['a1', 'a2', 'a3', 'a4']) w.driver.set(id, { do: 'succeed' });
  w.driver.releaseHung();
  for (const id of ['a1', 'a2', 'a3', 'a4']) await statusOf(w, id, 'READY');
});

test('an attempt that hangs is given up after the operation timeout, as a retryable failure that frees its slot', async (t) => {
  const w = await world(t);
  w.driver.set('s1', { do: 'hang' });
  await w.create('s1');
  const engine = await w.engine({ operationTimeoutMs: 50, slots: 1 });
  const op = await eventually(async () => {
    const o = await onlyOp(w, 's1');
    return o.attempts === 1 && o;
  }, 'the attempt given up');
  assert.match(op.lastError ?? '', /no answer within/);
  assert.equal(op.lockedBy, null);
  await eventually(async () => engine.running === 0, 'the slot is free');
  // The only slot runs other work meanwhile.
  await w.create('s2');
  engine.kick();
  await statusOf(w, 's2', 'READY');
  assert.match(
    (await w.events('s1'))[0]?.message ?? '',
    /^basin: provisioning failed \(attempt 1\), retrying in 1 s: no answer within/,
  );
  w.driver.set('s1', { do: 'succeed' });
  w.advance(1_000);
  await statusOf(w, 's1', 'READY');
});

test('close() waits at most the drain time; the next engine resumes what was left running', async (t) => {
  const w = await world(t);
  w.driver.set('s1', { do: 'hang' });
  await w.create('s1');
  const first = await w.engine({ drainTimeoutMs: 50 });
  await eventually(async () => w.driver.hanging.get('p1') === 1, 'running');
  await first.close(); // returns although the attempt still hangs
  const op = await onlyOp(w, 's1');
  assert.equal(op.lockedBy, first.worker, 'left leased: nothing was recorded after close');
  assert.equal(op.state, 'pending');

  // The next start in this process: the lease's holder is an engine of this
  // host and pid that is gone, so the work resumes at once, lease or not.
  w.driver.set('s1', { do: 'succeed' });
  const second = await w.engine();
  await statusOf(w, 's1', 'READY');
  assert.equal((await onlyOp(w, 's1')).state, 'done');
  // The first engine's hung call ends late: it records nothing.
  w.driver.releaseHung();
  await second.idle();
  assert.equal((await onlyOp(w, 's1')).state, 'done');
});

test("start takes back a dead engine's leases at once and leaves a live one's until it expires", async (t) => {
  const w = await world(t);
  await w.create('live');
  await w.create('dead');
  const lease = (worker: string, resourceId: string) =>
    w.store.transaction(async (tx) => {
      const ops = await tx.operations.claim(worker, w.now(), {
        leaseMs: 60_000,
        limit: 1,
        perProject: 1,
      });
      assert.equal(ops[0]?.resourceId, resourceId);
    });
  await lease('other-host/123/0a0b0c0d', 'live');
  await lease('this-host/456/0a0b0c0d', 'dead');
  await w.create('free');
  await w.engine({ isDeadWorker: (worker) => worker.startsWith('this-host/') });
  await statusOf(w, 'dead', 'READY');
  await statusOf(w, 'free', 'READY');
  assert.equal(w.driver.calls('live'), 0, "the live engine's operation is not run");
  assert.equal((await onlyOp(w, 'live')).lockedBy, 'other-host/123/0a0b0c0d');
  // The other engine stopped renewing: once its lease expires, it is taken.
  w.advance(60_001);
  await statusOf(w, 'live', 'READY');
});

/** Rewrites the kind of every operation of `resourceId`, as a newer Basin might have written it. */
function corrupt(w: World, resourceId: string, kind: string): void {
  const db = new Database(w.file);
  db.prepare('UPDATE operations SET kind = ? WHERE resource_id = ?').run(kind, resourceId);
  db.close();
}

test('an unreadable operation is failed with its reason, never crashes the loop, and the work is derived again', async (t) => {
  const w = await world(t);
  await w.create('s1');
  corrupt(w, 's1', 'service.teleport');
  await w.create('s2');
  await w.engine();
  await statusOf(w, 's2', 'READY');
  // The reconciler saw a QUEUED service with nothing runnable queued, and queued its provisioning.
  await statusOf(w, 's1', 'READY');
  const db = new Database(w.file, { readonly: true });
  const row = db
    .prepare('SELECT state, last_error FROM operations WHERE resource_id = ? ORDER BY id LIMIT 1')
    .get('s1');
  db.close();
  assert.deepEqual(row, {
    state: 'failed',
    last_error: 'unreadable operation: unknown kind "service.teleport" (written by a newer Basin?)',
  });
});

test('a failure the engine did not record (an unreadable operation) is recorded once by the reconciler', async (t) => {
  const w = await world(t);
  await w.create('s1');
  corrupt(w, 's1', 'service.teleport');
  const claimed = await w.store.transaction((tx) =>
    tx.operations.claim('w', w.now(), { leaseMs: 1000, limit: 10, perProject: 10 }),
  );
  assert.deepEqual(claimed, []);
  assert.equal(await reconcile(w.deps), 0);
  assert.equal((await w.service('s1')).status, 'UNSTABLE');
  const reason =
    'unreadable operation: unknown kind "service.teleport" (written by a newer Basin?)';
  assert.deepEqual(await w.events('s1'), [
    { severity: 'ERROR', message: `basin: an operation failed: ${reason}` },
  ]);
  assert.equal(await reconcile(w.deps), 0, 'and it is left alone after that');
  assert.equal((await w.events('s1')).length, 1);
  assert.equal(w.driver.calls('s1'), 0);
});

test('a delete that lands between the reconciler reading the services and the operations is not queued twice', async (t) => {
  const w = await world(t);
  await w.create('s1');
  const engine = await w.engine();
  await statusOf(w, 's1', 'READY');
  await engine.close();
  // The DELETE request, as it lands while a round reads: after nothing was
  // pending and just before the services are listed (DELETING, its delete queued).
  const deleteNow = () =>
    w.store.transaction(async (tx) => {
      const deleting = await tx.services.update(
        applyServiceAction(await w.service('s1'), 'delete'),
      );
      await tx.operations.enqueue(serviceDelete(deleting), w.now());
    });
  let landed = false;
  const services = new Proxy(w.store.services, {
    get(target, prop, receiver) {
      if (prop !== 'listAll') return Reflect.get(target, prop, receiver) as unknown;
      return async () => {
        if (!landed) {
          landed = true;
          await deleteNow();
        }
        return target.listAll();
      };
    },
  });
  const store = new Proxy(w.store, {
    get: (target, prop, receiver) =>
      prop === 'services' ? services : (Reflect.get(target, prop, receiver) as unknown),
  });
  assert.equal(await reconcile({ ...w.deps, store }), 0);
  assert.ok(landed);
  const deletes = (await w.store.operations.listPending()).filter(
    (op) => op.kind === 'service.delete' && op.resourceId === 's1',
  );
  assert.equal(deletes.length, 1, "one delete, the request's");
});
