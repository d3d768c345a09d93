// The store's promises, against SQLite: transactions are atomic, updates are
// optimistic, operations run one at a time per resource, ports never collide.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Vpc } from '../../src/domain/types.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { tempDir } from '../helpers.js';

function open(t: import('node:test').TestContext): Store {
  const store = openSqliteStore(join(tempDir(t), 'basin.db'));
  t.after(() => store.close());
  return store;
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

test('a failed transaction leaves nothing behind', async (t) => {
  const store = open(t);
  await assert.rejects(
    store.transaction(async (tx) => {
      await tx.vpcs.insert(vpc('1'));
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.equal(await store.vpcs.get('1'), undefined);
});

test('reads outside a transaction never see its uncommitted writes', async (t) => {
  const store = open(t);
  let seen: unknown = 'not read';
  await store.transaction(async (tx) => {
    await tx.vpcs.insert(vpc('2'));
    seen = await store.vpcs.get('2');
  });
  assert.equal(seen, undefined);
  assert.equal((await store.vpcs.get('2'))?.id, '2');
});

test('non-transactional writes are refused (the reader connection is read-only)', async (t) => {
  const store = open(t);
  await assert.rejects(store.vpcs.insert(vpc('3')), /readonly/);
});

test('an update from a stale read is a CONFLICT, not a lost write', async (t) => {
  const store = open(t);
  await store.transaction((tx) => tx.vpcs.insert(vpc('4')));
  const a = (await store.vpcs.get('4')) as Vpc;
  const b = (await store.vpcs.get('4')) as Vpc;
  await store.transaction((tx) => tx.vpcs.update({ ...a, name: 'first' }));
  await assert.rejects(
    store.transaction((tx) => tx.vpcs.update({ ...b, name: 'second' })),
    (err: Error & { code?: string }) => err.code === 'CONFLICT',
  );
  assert.equal((await store.vpcs.get('4'))?.name, 'first');
});

test("operations of one resource run one at a time, in order; a dead worker's lease expires", async (t) => {
  const store = open(t);
  const op = (resourceId: string) => ({ kind: 'k', resourceKind: 'service' as const, resourceId });
  const [a1, a2, b1] = await store.transaction(async (tx) => [
    await tx.operations.enqueue(op('a'), 0),
    await tx.operations.enqueue(op('a'), 0),
    await tx.operations.enqueue(op('b'), 0),
  ]);
  const first = await store.transaction((tx) => tx.operations.claim('w1', 1000, 5000, 10));
  assert.deepEqual(first.map((o) => o.id).sort(), [a1?.id, b1?.id].sort());
  assert.deepEqual(await store.transaction((tx) => tx.operations.claim('w2', 2000, 5000, 10)), []);
  // w1 died: after its lease, a1 is claimable again, a2 still waits behind it.
  const again = await store.transaction((tx) => tx.operations.claim('w2', 7000, 5000, 10));
  assert.deepEqual(again.map((o) => o.id).sort(), [a1?.id, b1?.id].sort());
  await store.transaction((tx) => tx.operations.finish(a1?.id as number, 'done', null));
  const next = await store.transaction((tx) => tx.operations.claim('w2', 7001, 5000, 10));
  assert.deepEqual(
    next.map((o) => o.id),
    [a2?.id],
  );
});

test('ports: lowest free, stable per owner, vetoed ports skipped, released with their owner', async (t) => {
  const store = open(t);
  const alloc = (owner: string, usable?: (p: number) => Promise<boolean>) =>
    store.transaction((tx) => tx.ports.allocate(owner, 100, 103, usable));
  assert.equal(await alloc('service:a'), 100);
  assert.equal(await alloc('service:a'), 100, 'the same owner keeps its port');
  assert.equal(await alloc('service:b', async (p) => p !== 101), 102, 'a port in use is skipped');
  assert.equal(await alloc('service:a:pooler'), 101);
  assert.equal(await alloc('service:c'), 103);
  await assert.rejects(
    alloc('service:d'),
    (err: Error & { code?: string }) => err.code === 'UNAVAILABLE',
  );
  await store.transaction((tx) => tx.ports.releasePrefix('service:a'));
  assert.equal(await alloc('service:d'), 100);
  assert.equal(await alloc('service:e'), 101);
});
