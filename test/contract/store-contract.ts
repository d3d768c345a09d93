// The store's promises, run against each store (store.sqlite.test.ts; a
// PostgreSQL store runs the same suite): transactions are atomic, updates are
// optimistic, operations are typed and run one at a time per resource, leases
// are shared safely between workers, claims are fair between projects,
// events page and filter, ports never collide. Only Basin's own errors and
// codes are asserted, never a database's error texts.

import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { AppError } from '../../src/domain/errors.js';
import {
  type NewOperation,
  peeringProvision,
  replicaSetConverge,
  replicaSetDelete,
  serviceConverge,
  serviceDelete,
} from '../../src/domain/operations.js';
import type { Host } from '../../src/domain/hosts.js';
import type { Peering, ReplicaSet, Service, Vpc } from '../../src/domain/types.js';
import {
  EVENTS_KEPT_PER_RESOURCE,
  FencedError,
  type NewEvent,
  type Operation,
  type Repos,
  type Store,
} from '../../src/store/store.js';

export interface StoreSubject {
  /** A fresh, empty, migrated store, closed when the test ends. */
  open(t: TestContext): Promise<OpenedStore>;
}

export interface OpenedStore {
  store: Store;
  /**
   * Writes an operation row as given, bypassing every check, as a newer
   * Basin or a damaged file would have it; returns its id.
   */
  insertRawOperation(row: {
    kind: string;
    resourceKind: string;
    resourceId: string;
    projectId: string;
    payload: string;
  }): Promise<number>;
}

const vpc = (id: string): Vpc => ({
  id,
  projectId: 'p1',
  name: 'v',
  cidr: '10.0.0.0/16',
  regionCode: 'us-east-1',
  createdAt: new Date(0).toISOString(),
  version: 1,
});

/** Just enough of a service for the operation builders. */
const svc = (id: string, projectId = 'p1', status: Service['status'] = 'READY') =>
  ({ id, projectId, status }) as Service;
const rs = (id: string, status: ReplicaSet['status'] = 'creating') =>
  ({ id, projectId: 'p1', status }) as ReplicaSet;

const iso = (ms: number) => new Date(ms).toISOString();
const ids = (ops: readonly { id: number }[]) => ops.map((o) => o.id).sort((a, b) => a - b);
const LIMITS = { leaseMs: 5000, limit: 10, perProject: 10 };

export function storeContract(name: string, subject: StoreSubject): void {
  const open = async (t: TestContext) => (await subject.open(t)).store;
  const claim = (store: Store, worker: string, now: number, limits = LIMITS) =>
    store.transaction((tx) => tx.operations.claim(worker, now, limits));
  const enqueue = (store: Store, op: NewOperation, now = 0) =>
    store.transaction((tx) => tx.operations.enqueue(op, now));

  test(`${name}: a failed transaction leaves nothing behind`, async (t) => {
    const store = await open(t);
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.vpcs.insert(vpc('1'));
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(await store.vpcs.get('1'), undefined);
  });

  test(`${name}: reads outside a transaction never see its uncommitted writes`, async (t) => {
    const store = await open(t);
    let seen: unknown = 'not read';
    await store.transaction(async (tx) => {
      await tx.vpcs.insert(vpc('2'));
      seen = await store.vpcs.get('2');
    });
    assert.equal(seen, undefined);
    assert.equal((await store.vpcs.get('2'))?.id, '2');
  });

  test(`${name}: users keep their email; credentials are found by id`, async (t) => {
    const store = await open(t);
    const at = iso(0);
    await store.transaction(async (tx) => {
      await tx.projects.insert({ id: 'p1', name: 'one', createdAt: at });
      await tx.users.insert({ id: 'u1', name: 'alice', email: 'alice@example.com', createdAt: at });
      await tx.users.insert({ id: 'u2', name: 'bob', email: null, createdAt: at });
      await tx.credentials.insert({
        id: 'c1',
        kind: 'project',
        projectId: 'p1',
        userId: null,
        name: 'ci',
        bearerHash: 'b'.repeat(64),
        accessKey: 'AK1',
        secretHash: 's'.repeat(64),
        createdAt: at,
        revokedAt: null,
      });
    });
    assert.equal((await store.users.get('u1'))?.email, 'alice@example.com');
    assert.equal((await store.users.findByName('bob'))?.email, null);
    assert.deepEqual(
      (await store.users.list()).map((u) => [u.name, u.email]),
      [
        ['alice', 'alice@example.com'],
        ['bob', null],
      ],
    );
    assert.equal(await store.transaction((tx) => tx.users.setEmail('u2', 'bob@example.org')), true);
    assert.equal((await store.users.get('u2'))?.email, 'bob@example.org');
    assert.equal((await store.credentials.get('c1'))?.accessKey, 'AK1');
    assert.equal(await store.credentials.get('nope'), undefined);
  });

  test(`${name}: lists sort text byte-wise (as SQLite does), whatever the database's collation`, async (t) => {
    // A PostgreSQL initdb'd with a natural-language locale would put 'a' before 'B'.
    const store = await open(t);
    const at = iso(0);
    await store.transaction(async (tx) => {
      for (const id of ['b', 'a', 'B', '_']) {
        await tx.users.insert({ id, name: `n${id}`, email: null, createdAt: at });
      }
    });
    assert.deepEqual(
      (await store.users.list()).map((u) => u.id),
      ['B', '_', 'a', 'b'],
    );
  });

  test(`${name}: a write outside a transaction is refused with an INTERNAL error`, async (t) => {
    // The types refuse it already (outside a transaction the store is
    // ReadRepos); a caller who casts past them is still refused at run time.
    const store = (await open(t)) as unknown as Repos;
    for (const write of [
      () => store.vpcs.insert(vpc('3')),
      () => store.operations.enqueue(serviceDelete(svc('s1')), 0),
      () =>
        store.events.add({
          resourceKind: 'service',
          resourceId: 's1',
          node: null,
          at: 0,
          severity: 'LOG',
          message: 'm',
        }),
    ]) {
      await assert.rejects(write(), (err: unknown) => {
        assert.ok(err instanceof AppError, String(err));
        assert.equal(err.code, 'INTERNAL');
        assert.match(err.message, /transaction/);
        return true;
      });
    }
    assert.equal(await store.vpcs.get('3'), undefined);
    assert.deepEqual(await store.operations.listPending(), []);
  });

  test(`${name}: an update from a stale read is a CONFLICT, not a lost write`, async (t) => {
    const store = await open(t);
    await store.transaction((tx) => tx.vpcs.insert(vpc('4')));
    const a = (await store.vpcs.get('4')) as Vpc;
    const b = (await store.vpcs.get('4')) as Vpc;
    await store.transaction((tx) => tx.vpcs.update({ ...a, name: 'first' }));
    await assert.rejects(
      store.transaction((tx) => tx.vpcs.update({ ...b, name: 'second' })),
      (err: unknown) => err instanceof AppError && err.code === 'CONFLICT',
    );
    assert.equal((await store.vpcs.get('4'))?.name, 'first');
  });

  test(`${name}: operations come back typed, as they were queued`, async (t) => {
    const store = await open(t);
    const queued: NewOperation[] = [
      serviceConverge(svc('s1', 'p1', 'QUEUED')),
      serviceConverge(svc('s2', 'p1', 'PAUSING')),
      serviceConverge(svc('s3', 'p1', 'READY')),
      serviceDelete(svc('s4')),
      replicaSetConverge(rs('r1', 'resizing')),
      replicaSetDelete(rs('r2')),
      peeringProvision({ id: '77', projectId: 'p2' } as Peering),
    ];
    const stored: Operation[] = [];
    for (const op of queued) stored.push(await enqueue(store, op, 1000));
    for (const [i, op] of queued.entries()) {
      const got = stored[i] as Operation;
      assert.deepEqual(
        {
          kind: got.kind,
          resourceKind: got.resourceKind,
          resourceId: got.resourceId,
          projectId: got.projectId,
          payload: got.payload,
        },
        op,
      );
      assert.equal(got.state, 'pending');
      assert.equal(got.attempts, 0);
      assert.equal(got.createdAt, iso(1000));
      assert.deepEqual(await store.operations.get(got.id), got);
    }
    assert.deepEqual(await store.operations.listPending(), stored);
    const claimed = await claim(store, 'w1', 1000);
    assert.deepEqual(ids(claimed), ids(stored));
    const first = claimed.find((o) => o.resourceId === 's1');
    assert.equal(first?.kind, 'service.converge');
    if (first?.kind === 'service.converge') {
      assert.deepEqual(first.payload, { provision: true, from: 'CONFIGURING', settle: 'READY' });
    }
  });

  test(`${name}: an unreadable operation is failed with the reason, never handed out`, async (t) => {
    const { store, insertRawOperation } = await subject.open(t);
    const raw = (kind: string, resourceKind: string, resourceId: string, payload: string) =>
      insertRawOperation({ kind, resourceKind, resourceId, projectId: 'p1', payload });
    const bad = [
      [await raw('service.frobnicate', 'service', 'a', '{}'), /unknown kind "service\.frobnicate"/],
      [await raw('service.converge', 'peering', 'b', '{}'), /works on a service, not a peering/],
      [await raw('service.converge', 'service', 'c', '{"settle":"SLEEPY"}'), /settle/],
      [await raw('service.converge', 'service', 'd', '{"colour":1}'), /colour/],
      [await raw('service.delete', 'service', 'e', '[1]'), /not an object/],
      [await raw('replicaSet.delete', 'replicaSet', 'f', '{oops'), /not JSON/],
    ] as const;
    const good = await enqueue(store, serviceDelete(svc('a')), 0);
    assert.deepEqual(ids(await store.operations.listPending()), [good.id]);
    for (const [id] of bad) assert.equal(await store.operations.get(id), undefined);

    // The first claim fails them all; the good operation queued behind one
    // of them (same resource) is claimable at the next.
    assert.deepEqual(await claim(store, 'w1', 1000), []);
    assert.deepEqual(ids(await claim(store, 'w1', 1000)), [good.id]);
    // Each is a failure of its resource, with a reason that says what is wrong,
    // except on resource a, whose newest operation is the good one.
    const failures = await store.operations.latestFailures();
    assert.deepEqual(ids(failures), ids(bad.slice(1).map(([id]) => ({ id }))));
    for (const [id, why] of bad.slice(1)) {
      const f = failures.find((x) => x.id === id);
      assert.match(f?.lastError ?? '', /^unreadable operation: /);
      assert.match(f?.lastError ?? '', why);
    }
  });

  test(`${name}: operations of one resource run one at a time, in order; a lease expires`, async (t) => {
    const store = await open(t);
    const a1 = await enqueue(store, serviceDelete(svc('a')));
    const a2 = await enqueue(store, serviceConverge(svc('a')));
    const b1 = await enqueue(store, serviceDelete(svc('b')));
    const first = await claim(store, 'w1', 1000);
    assert.deepEqual(ids(first), ids([a1, b1]));
    assert.deepEqual(await claim(store, 'w2', 2000), [], 'leased, and a2 waits behind a1');
    // w1 stopped renewing: after its lease, a1 is claimable again, a2 still waits behind it.
    const again = await claim(store, 'w2', 7000);
    assert.deepEqual(ids(again), ids([a1, b1]));
    assert.ok(again.every((o) => o.lockedBy === 'w2' && o.leaseExpiresAt === 12_000));
    assert.equal(
      await store.transaction((tx) => tx.operations.finish(a1.id, 'w2', 'done', null, 7001)),
      true,
    );
    assert.deepEqual(ids(await claim(store, 'w2', 7001)), [a2.id]);
  });

  test(`${name}: every time comes from the caller's clock`, async (t) => {
    const store = await open(t);
    const op = await enqueue(store, serviceDelete(svc('a')), 1_000);
    assert.equal(op.createdAt, iso(1_000));
    assert.equal(op.updatedAt, iso(1_000));
    assert.equal(op.runAfter, 1_000);
    const [claimed] = await claim(store, 'w1', 2_000);
    assert.equal(claimed?.updatedAt, iso(2_000));
    await store.transaction((tx) =>
      tx.operations.release(op.id, 'w1', { now: 3_000, runAfter: 9_000, error: 'x', attempts: 1 }),
    );
    let got = await store.operations.get(op.id);
    assert.deepEqual(
      [got?.updatedAt, got?.runAfter, got?.attempts, got?.lastError, got?.lockedBy],
      [iso(3_000), 9_000, 1, 'x', null],
    );
    assert.equal(await store.operations.nextDue(), 9_000);
    assert.deepEqual(await claim(store, 'w1', 8_999), [], 'not due yet');
    await claim(store, 'w1', 9_000);
    await store.transaction((tx) => tx.operations.finish(op.id, 'w1', 'failed', 'y', 10_000));
    got = await store.operations.get(op.id);
    assert.deepEqual([got?.updatedAt, got?.state, got?.lastError], [iso(10_000), 'failed', 'y']);
    const other = await enqueue(store, serviceDelete(svc('b')), 11_000);
    await store.transaction((tx) => tx.operations.cancelForResource('service', 'b', 12_000));
    const cancelled = await store.operations.get(other.id);
    assert.deepEqual([cancelled?.state, cancelled?.updatedAt], ['cancelled', iso(12_000)]);
  });

  test(`${name}: only the lease holder releases or finishes, and only a pending operation`, async (t) => {
    const store = await open(t);
    const op = await enqueue(store, serviceDelete(svc('a')));
    await claim(store, 'w1', 0);
    const at = { now: 1, runAfter: 1, error: null, attempts: 0 };
    assert.equal(await store.transaction((tx) => tx.operations.release(op.id, 'w2', at)), false);
    assert.equal(
      await store.transaction((tx) => tx.operations.finish(op.id, 'w2', 'done', null, 1)),
      false,
    );
    assert.equal((await store.operations.get(op.id))?.lockedBy, 'w1');
    // Cancelled while w1 runs it: w1's finish changes nothing.
    await store.transaction((tx) => tx.operations.cancelForResource('service', 'a', 2));
    assert.equal(
      await store.transaction((tx) => tx.operations.finish(op.id, 'w1', 'done', null, 3)),
      false,
    );
    assert.equal((await store.operations.get(op.id))?.state, 'cancelled');
    assert.equal(await store.transaction((tx) => tx.operations.release(op.id, 'w1', at)), false);
  });

  test(`${name}: leases: renewed by their holder, released only for the worker named`, async (t) => {
    const store = await open(t);
    const a = await enqueue(store, serviceDelete(svc('a')));
    const b = await enqueue(store, serviceDelete(svc('b')));
    await claim(store, 'dead', 0, { ...LIMITS, limit: 1 });
    await claim(store, 'live', 0, { ...LIMITS, limit: 1 });
    assert.deepEqual(await store.operations.leaseHolders(), ['dead', 'live']);
    // The live worker's heartbeat keeps its lease past the first expiry.
    await store.transaction((tx) => tx.operations.renew('live', 4_000, 5_000));
    assert.equal((await store.operations.get(b.id))?.leaseExpiresAt, 9_000);
    assert.deepEqual(await claim(store, 'new', 1_000), [], 'both leases run');
    // The dead worker's leases are released at once; the live one's stay.
    assert.equal(await store.transaction((tx) => tx.operations.releaseLeases('dead', 1_000)), 1);
    assert.deepEqual(await store.operations.leaseHolders(), ['live']);
    assert.deepEqual(ids(await claim(store, 'new', 1_000)), [a.id]);
    assert.deepEqual(await claim(store, 'new', 6_000), [], 'renewed: still live at 6 s');
    assert.deepEqual(ids(await claim(store, 'new', 9_001)), [b.id], 'expired without renewal');
    assert.deepEqual(await store.operations.leaseHolders(), ['new']);
    await store.transaction(async (tx) => {
      await tx.operations.finish(a.id, 'new', 'done', null, 9_002);
      await tx.operations.finish(b.id, 'new', 'done', null, 9_002);
    });
    assert.deepEqual(await store.operations.leaseHolders(), [], 'finished: no holder left');
  });

  test(`${name}: one project gets at most perProject of a worker's claims`, async (t) => {
    const store = await open(t);
    const busy: Operation[] = [];
    for (const id of ['a1', 'a2', 'a3', 'a4'])
      busy.push(await enqueue(store, serviceDelete(svc(id, 'A'))));
    const quiet = await enqueue(store, serviceDelete(svc('b1', 'B')));
    const limits = { leaseMs: 5000, limit: 3, perProject: 2 };
    const first = await claim(store, 'w', 0, limits);
    assert.deepEqual(ids(first), ids([busy[0]!, busy[1]!, quiet]), 'B is not starved by A');
    assert.deepEqual(await claim(store, 'w', 1, limits), [], 'A holds its 2 already');
    assert.deepEqual(
      ids(await claim(store, 'other', 1, limits)),
      ids([busy[2]!, busy[3]!]),
      'per worker: another worker has its own share',
    );
    await store.transaction((tx) => tx.operations.finish(busy[0]!.id, 'w', 'done', null, 2));
    const more = await enqueue(store, serviceDelete(svc('a5', 'A')), 2);
    assert.deepEqual(ids(await claim(store, 'w', 3, limits)), [more.id], 'a freed slot of A');
  });

  test(`${name}: a converge supersedes its resource's queued converges that nobody runs`, async (t) => {
    const store = await open(t);
    const running = await enqueue(store, serviceConverge(svc('a')));
    await claim(store, 'w', 0);
    const waiting = await enqueue(store, serviceConverge(svc('a', 'p1', 'CONFIGURING')), 1);
    const del = await enqueue(store, replicaSetDelete(rs('r')), 1);
    const rsConverge = await enqueue(store, replicaSetConverge(rs('r2')), 1);
    const elsewhere = await enqueue(store, serviceConverge(svc('b')), 1);
    const newest = await enqueue(store, serviceConverge(svc('a', 'p1', 'PAUSING')), 2);
    const state = async (op: Operation) => (await store.operations.get(op.id))?.state;
    assert.equal(await state(running), 'pending', 'a running converge is not cancelled');
    assert.equal(await state(waiting), 'cancelled');
    assert.equal(await state(newest), 'pending');
    assert.equal(await state(del), 'pending');
    assert.equal(await state(rsConverge), 'pending');
    assert.equal(await state(elsewhere), 'pending');
    // A released (backing-off) converge is superseded too: a request's fresh start.
    await store.transaction((tx) =>
      tx.operations.release(running.id, 'w', {
        now: 3,
        runAfter: 300_000,
        error: 'e',
        attempts: 4,
      }),
    );
    const retry = await enqueue(store, serviceConverge(svc('a', 'p1', 'RESUMING')), 4);
    assert.equal(await state(running), 'cancelled');
    assert.equal(await state(newest), 'cancelled');
    assert.equal((await store.operations.get(retry.id))?.attempts, 0);
  });

  test(`${name}: latestFailures lists resources whose newest operation failed`, async (t) => {
    const store = await open(t);
    const finish = async (op: Operation, state: 'done' | 'failed', at: number) => {
      await claim(store, 'w', at);
      await store.transaction((tx) => tx.operations.finish(op.id, 'w', state, `e${op.id}`, at));
    };
    const a1 = await enqueue(store, serviceDelete(svc('a')));
    await finish(a1, 'failed', 1);
    const b1 = await enqueue(store, replicaSetDelete(rs('b')));
    await finish(b1, 'failed', 2);
    const b2 = await enqueue(store, replicaSetDelete(rs('b')), 3);
    await finish(b2, 'done', 4);
    const c1 = await enqueue(store, serviceDelete(svc('c')), 5);
    await finish(c1, 'failed', 6);
    await enqueue(store, serviceDelete(svc('c')), 7);
    assert.deepEqual(await store.operations.latestFailures(), [
      {
        id: a1.id,
        kind: 'service.delete',
        resourceKind: 'service',
        resourceId: 'a',
        lastError: `e${a1.id}`,
      },
    ]);
  });

  test(`${name}: events: newest first, filtered, paged by (at, id), deleted with their resource`, async (t) => {
    const store = await open(t);
    const add = (e: Partial<NewEvent>) =>
      store.transaction((tx) =>
        tx.events.add({
          resourceKind: 'service',
          resourceId: 's1',
          node: null,
          at: 1000,
          severity: 'ERROR',
          message: 'basin: provisioning failed: disk full',
          ...e,
        }),
      );
    await add({ at: 1000 });
    await add({ at: 2000, severity: 'WARNING', message: 'basin: ÉCHEC de la copie' });
    await add({ at: 2000, severity: 'LOG', message: 'basin: provisioning succeeded' });
    await add({ at: 3000, node: 1, message: 'standby trouble' });
    await add({ at: 4000, node: 0, message: 'primary trouble' });
    await add({ at: 5000, resourceId: 's2', message: 'another service' });
    await add({ at: 6000, resourceKind: 'replicaSet', message: 'same id, a replica set' });
    const q = { node: 0, severities: [], search: [], limit: 10 };
    const list = async (over: object = {}) =>
      (await store.events.list('service', 's1', { ...q, ...over })).map((e) => e.message);

    const all = await store.events.list('service', 's1', q);
    assert.deepEqual(
      all.map((e) => [e.at, e.message]),
      [
        [4000, 'primary trouble'],
        [2000, 'basin: provisioning succeeded'],
        [2000, 'basin: ÉCHEC de la copie'],
        [1000, 'basin: provisioning failed: disk full'],
      ],
      'node 0 and node-less events, newest first; ties newest id first',
    );
    assert.deepEqual(all[0], {
      id: all[0]!.id,
      resourceKind: 'service',
      resourceId: 's1',
      node: 0,
      at: 4000,
      severity: 'ERROR',
      message: 'primary trouble',
    });
    assert.deepEqual(await list({ node: 1 }), ['standby trouble']);
    assert.deepEqual(await list({ severities: ['WARNING', 'LOG'] }), [
      'basin: provisioning succeeded',
      'basin: ÉCHEC de la copie',
    ]);
    assert.deepEqual(await list({ search: ['échec', 'COPIE'] }), ['basin: ÉCHEC de la copie']);
    assert.deepEqual(await list({ search: ['provisioning', 'disk'] }), [
      'basin: provisioning failed: disk full',
    ]);
    assert.deepEqual(await list({ since: 1000, until: 4000 }), [
      'basin: provisioning succeeded',
      'basin: ÉCHEC de la copie',
    ]);
    assert.deepEqual(await list({ limit: 2 }), [
      'primary trouble',
      'basin: provisioning succeeded',
    ]);
    const resume = all[1]!;
    assert.deepEqual(await list({ before: { at: resume.at, id: resume.id } }), [
      'basin: ÉCHEC de la copie',
      'basin: provisioning failed: disk full',
    ]);

    await store.transaction((tx) => tx.events.deleteForResource('service', 's1'));
    assert.deepEqual(await list(), []);
    assert.deepEqual(
      (await store.events.list('service', 's2', q)).map((e) => e.message),
      ['another service'],
    );
    assert.equal((await store.events.list('replicaSet', 's1', q)).length, 1);
  });

  test(`${name}: events: a resource keeps its newest ${EVENTS_KEPT_PER_RESOURCE}`, async (t) => {
    const store = await open(t);
    await store.transaction(async (tx) => {
      for (let i = 0; i < EVENTS_KEPT_PER_RESOURCE + 5; i++) {
        await tx.events.add({
          resourceKind: 'service',
          resourceId: 's1',
          node: null,
          at: i,
          severity: 'LOG',
          message: `e${i}`,
        });
      }
    });
    const kept = await store.events.list('service', 's1', {
      node: 0,
      severities: [],
      search: [],
      limit: EVENTS_KEPT_PER_RESOURCE + 10,
    });
    assert.equal(kept.length, EVENTS_KEPT_PER_RESOURCE);
    assert.equal(kept[0]?.message, `e${EVENTS_KEPT_PER_RESOURCE + 4}`);
    assert.equal(kept[kept.length - 1]?.message, 'e5');
  });

  test(`${name}: ports: lowest free, stable per owner, vetoed ports skipped, released with their owner`, async (t) => {
    const store = await open(t);
    const alloc = (owner: string, usable?: (p: number) => Promise<boolean>) =>
      store.transaction((tx) => tx.ports.allocate(owner, 100, 103, usable));
    assert.equal(await alloc('service:a'), 100);
    assert.equal(await alloc('service:a'), 100, 'the same owner keeps its port');
    assert.equal(await alloc('service:b', async (p) => p !== 101), 102, 'a port in use is skipped');
    assert.equal(await alloc('service:a:pooler'), 101);
    assert.equal(await alloc('service:c'), 103);
    await assert.rejects(
      alloc('service:d'),
      (err: unknown) => err instanceof AppError && err.code === 'UNAVAILABLE',
    );
    await store.transaction((tx) => tx.ports.releasePrefix('service:a'));
    assert.equal(await alloc('service:d'), 100);
    assert.equal(await alloc('service:e'), 101);
  });

  test(`${name}: backups: listed oldest first per service, recorded once, expired from the oldest`, async (t) => {
    const store = await open(t);
    const b = (serviceId: string, label: string, minute: number) => ({
      serviceId,
      label,
      startedAt: `2030-01-01T00:${String(minute).padStart(2, '0')}:00.000Z`,
      stoppedAt: `2030-01-01T00:${String(minute).padStart(2, '0')}:30.000Z`,
    });
    await store.transaction(async (tx) => {
      await tx.backups.insert(b('s1', '20300101-000200F', 2));
      await tx.backups.insert(b('s1', '20300101-000000F', 0));
      await tx.backups.insert(b('s1', '20300101-000100F', 1));
      await tx.backups.insert(b('s1', '20300101-000100F', 1));
      await tx.backups.insert(b('s2', '20300101-000000F', 0));
    });
    const labels = async (id: string) =>
      (await store.backups.listByService(id)).map((x) => x.label);
    assert.deepEqual(await labels('s1'), [
      '20300101-000000F',
      '20300101-000100F',
      '20300101-000200F',
    ]);
    assert.deepEqual((await store.backups.listByService('s1'))[0], b('s1', '20300101-000000F', 0));
    await store.transaction((tx) => tx.backups.deleteOlderThan('s1', '20300101-000100F'));
    assert.deepEqual(await labels('s1'), ['20300101-000100F', '20300101-000200F']);
    // An unknown label expires nothing.
    await store.transaction((tx) => tx.backups.deleteOlderThan('s1', 'nope'));
    assert.deepEqual(await labels('s1'), ['20300101-000100F', '20300101-000200F']);
    await store.transaction((tx) => tx.backups.deleteForService('s1'));
    assert.deepEqual(await labels('s1'), []);
    assert.deepEqual(await labels('s2'), ['20300101-000000F']);
  });

  test(`${name}: the queue takes times with a fraction of a millisecond (a wait of 12.5 ms)`, async (t) => {
    const store = await open(t);
    const op = await enqueue(store, serviceConverge(svc('s1')), 1000.4);
    const [claimed] = await claim(store, 'w1', 1000.6);
    assert.equal(claimed?.id, op.id);
    await store.transaction((tx) => tx.operations.renew('w1', 1001.5, 5000.25));
    const released = await store.transaction((tx) =>
      tx.operations.release(op.id, 'w1', {
        now: 1002.7,
        runAfter: 1015.2,
        error: null,
        attempts: 0,
        waits: 1,
        waitingSince: 1002.7,
      }),
    );
    assert.equal(released, true);
    assert.deepEqual(ids(await claim(store, 'w1', 1010.1)), []);
    assert.deepEqual(ids(await claim(store, 'w1', 1020.9)), [op.id]);
    await store.transaction((tx) =>
      tx.events.add({
        resourceKind: 'service',
        resourceId: 's1',
        node: null,
        at: 1030.5,
        severity: 'LOG',
        message: 'm',
      }),
    );
  });

  test(`${name}: leadership: one holder at a time, a new term once the lease expired or was released`, async (t) => {
    const store = await open(t);
    assert.equal(await store.leadership.current(), undefined);
    assert.deepEqual(await store.leadership.acquire('a', 60_000), { term: 1, previous: null });
    // Held: nobody else takes it, not even its holder again.
    assert.equal(await store.leadership.acquire('b', 60_000), undefined);
    assert.equal(await store.leadership.acquire('a', 60_000), undefined);
    const held = await store.leadership.current();
    assert.equal(held?.term, 1);
    assert.equal(held?.holder, 'a');
    assert.ok(held && held.remainingMs > 50_000 && held.remainingMs <= 60_000);
    assert.equal(await store.leadership.renew(1, 60_000), true);
    // Released at a clean shutdown: the next candidate takes it at once.
    await store.leadership.release(1);
    assert.deepEqual(
      await store.leadership.acquire('b', 100),
      { term: 2, previous: null },
      'a released lease names nobody to fence',
    );
    assert.equal(await store.leadership.renew(1, 60_000), false, 'an old term renews nothing');
    await store.leadership.release(1); // an old term releases nothing either
    assert.equal(await store.leadership.acquire('c', 60_000), undefined);
    // Expired (by the store's clock): taken, with the next term.
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(
      await store.leadership.acquire('c', 60_000),
      { term: 3, previous: 'b' },
      'an expired lease names its holder, to be fenced',
    );
    assert.equal((await store.leadership.current())?.holder, 'c');
  });

  test(`${name}: fencing: a transaction of an older term is refused and rolls back`, async (t) => {
    const store = await open(t);
    await assert.rejects(
      store.fenced(1).transaction((tx) => tx.vpcs.insert(vpc('f0'))),
      (err: unknown) => err instanceof FencedError && err.current === undefined,
    );
    assert.equal((await store.leadership.acquire('a', 100))?.term, 1);
    await store.fenced(1).transaction((tx) => tx.vpcs.insert(vpc('f1')));
    assert.equal((await store.vpcs.get('f1'))?.id, 'f1');
    await new Promise((r) => setTimeout(r, 250));
    assert.equal((await store.leadership.acquire('b', 60_000))?.term, 2);
    let ran = false;
    await assert.rejects(
      store.fenced(1).transaction(async (tx) => {
        ran = true;
        await tx.vpcs.insert(vpc('f2'));
      }),
      (err: unknown) => err instanceof FencedError && err.term === 1 && err.current === 2,
    );
    assert.equal(ran, false, 'refused before its first write');
    assert.equal(await store.vpcs.get('f2'), undefined);
    // The current term writes; unfenced transactions (the API's) are not affected.
    await store.fenced(2).transaction((tx) => tx.vpcs.insert(vpc('f3')));
    await store.transaction((tx) => tx.vpcs.insert(vpc('f4')));
    assert.equal((await store.vpcs.get('f3'))?.id, 'f3');
    assert.equal((await store.vpcs.get('f4'))?.id, 'f4');
  });

  test(`${name}: hosts: one per name, heartbeats recorded, removed for good; tokens join once; secrets first writer wins; placements replaced`, async (t) => {
    const store = await open(t);
    const host = (id: string, name: string, role: Host['role'] = 'database'): Host => ({
      id,
      role,
      name,
      address: '10.0.0.1',
      agentPort: 9444,
      zone: 'z1',
      capacity: { cpus: 2, memoryBytes: 2 ** 34, diskBytes: 2 ** 40 },
      usage: null,
      certSha256: 'ab'.repeat(32),
      joinedAt: iso(1000),
      heartbeatAt: 1000,
    });
    await store.transaction((tx) => tx.hosts.insert(host('h1', 'beta')));
    await store.transaction((tx) => tx.hosts.insert(host('h2', 'Alpha', 'repository')));
    await assert.rejects(
      store.transaction((tx) => tx.hosts.insert(host('h3', 'beta'))),
      (err: unknown) => err instanceof AppError && err.code === 'CONFLICT',
    );
    assert.deepEqual(await store.hosts.get('h1'), host('h1', 'beta'));
    assert.equal((await store.hosts.findByName('Alpha'))?.id, 'h2');
    assert.deepEqual(await store.hosts.get('h2'), host('h2', 'Alpha', 'repository'));
    assert.deepEqual(
      (await store.hosts.list()).map((h) => h.name),
      ['Alpha', 'beta'],
    );
    const usage = { memoryFreeBytes: 5, diskFreeBytes: 6, load1: 0.5 };
    const capacity = { cpus: 4, memoryBytes: 7, diskBytes: 8 };
    assert.equal(
      await store.transaction((tx) => tx.hosts.heartbeat('h1', 2 ** 41, capacity, usage)),
      true,
    );
    assert.deepEqual(await store.hosts.get('h1'), {
      ...host('h1', 'beta'),
      capacity,
      usage,
      heartbeatAt: 2 ** 41,
    });
    // A host being drained says so, until it is taken back.
    assert.equal(await store.transaction((tx) => tx.hosts.setDraining('h1', true)), true);
    assert.equal((await store.hosts.get('h1'))?.draining, true);
    assert.equal(await store.transaction((tx) => tx.hosts.setDraining('h1', false)), true);
    assert.equal((await store.hosts.get('h1'))?.draining, undefined);
    assert.equal(await store.transaction((tx) => tx.hosts.setDraining('nobody', true)), false);
    assert.equal(await store.transaction((tx) => tx.hosts.remove('h1')), true);
    assert.equal(await store.transaction((tx) => tx.hosts.remove('h1')), false);
    assert.equal(
      await store.transaction((tx) => tx.hosts.heartbeat('h1', 3000, capacity, usage)),
      false,
    );
    assert.equal(await store.hosts.get('h1'), undefined);

    const token = {
      id: 'abc',
      secretHash: 'h',
      createdAt: iso(0),
      expiresAt: 2 ** 41,
      usedBy: null,
    };
    await store.transaction((tx) => tx.hostTokens.insert(token));
    assert.equal(await store.transaction((tx) => tx.hostTokens.use('abc', 'h2')), true);
    assert.equal(await store.transaction((tx) => tx.hostTokens.use('abc', 'h9')), false);
    assert.deepEqual(await store.transaction((tx) => tx.hostTokens.get('abc')), {
      ...token,
      usedBy: 'h2',
    });

    assert.equal(await store.secrets.get('ca'), undefined);
    assert.equal(await store.transaction((tx) => tx.secrets.putIfAbsent('ca', 'one')), 'one');
    assert.equal(await store.transaction((tx) => tx.secrets.putIfAbsent('ca', 'two')), 'one');
    assert.equal(await store.secrets.get('ca'), 'one');

    const placed = { resourceId: 's1', hostId: 'h2', cpuMillis: 500, memoryMb: 2048 };
    await store.transaction((tx) => tx.placements.put(placed));
    await store.transaction((tx) => tx.placements.put({ ...placed, resourceId: 's0' }));
    await store.transaction((tx) => tx.placements.put({ ...placed, memoryMb: 4096 }));
    assert.deepEqual(await store.placements.get('s1'), { ...placed, memoryMb: 4096 });
    // A node moved while its data is restored says from where, until that is done.
    await store.transaction((tx) =>
      tx.placements.put({ ...placed, hostId: 'h2', movedFrom: 'h1' }),
    );
    assert.deepEqual(await store.placements.get('s1'), {
      ...placed,
      hostId: 'h2',
      movedFrom: 'h1',
    });
    await store.transaction((tx) => tx.placements.put({ ...placed, memoryMb: 4096 }));
    assert.deepEqual(await store.placements.get('s1'), { ...placed, memoryMb: 4096 });
    assert.deepEqual(
      (await store.placements.list()).map((p) => p.resourceId),
      ['s0', 's1'],
    );
    await store.transaction((tx) => tx.placements.remove('s1'));
    assert.equal(await store.placements.get('s1'), undefined);
  });
}
