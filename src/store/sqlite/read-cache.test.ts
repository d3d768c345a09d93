// The read cache's premise and promises: PRAGMA data_version on the read
// connection changes with every commit, whoever makes it, and a read view
// never answers from before the last commit.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import type { Service } from '../../domain/types.js';
import type { Credential } from '../../domain/types.js';
import type { Store } from '../store.js';
import { ReadCache } from './read-cache.js';
import { createReadView } from './repos.js';
import { openSqliteStore } from './sqlite-store.js';

function dbFile(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'basin-read-cache-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'basin.db');
}

function open(t: TestContext, file: string): Store {
  const store = openSqliteStore(file);
  t.after(() => store.close());
  return store;
}

const credential = (id: string, revokedAt: string | null = null): Credential => ({
  id,
  kind: 'project',
  projectId: 'p1',
  userId: null,
  name: id,
  bearerHash: `hash-${id}`,
  accessKey: `AK${id}`,
  secretHash: `secret-${id}`,
  createdAt: new Date(0).toISOString(),
  revokedAt,
});

/** Enough of a service for the store, which keeps it as JSON. */
const service = (id: string, name: string): Service =>
  ({
    id,
    projectId: 'p1',
    name,
    forkedFrom: null,
    createdAt: new Date(0).toISOString(),
    version: 1,
  }) as unknown as Service;

async function seed(store: Store): Promise<void> {
  await store.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p1', name: 'one', createdAt: new Date(0).toISOString() });
    await tx.credentials.insert(credential('c1'));
    await tx.services.insert(service('s1', 'first'));
  });
}

test('PRAGMA data_version on a read connection changes with every commit: our writer, another connection, another process', (t) => {
  const file = dbFile(t);
  // The store's layout: a WAL writer and a separate read-only connection.
  const writer = new Database(file);
  writer.pragma('journal_mode = WAL');
  writer.exec('CREATE TABLE t (v INTEGER)');
  const reader = new Database(file, { readonly: true });
  const other = new Database(file);
  t.after(() => [reader, writer, other].forEach((db) => db.close()));
  const version = reader.prepare('PRAGMA data_version').pluck();

  const v0 = version.get();
  assert.equal(version.get(), v0, 'unchanged while nobody commits');

  writer.prepare('INSERT INTO t VALUES (1)').run();
  const v1 = version.get();
  assert.notEqual(v1, v0, 'a commit of the writer connection of the same process');

  other.prepare('INSERT INTO t VALUES (2)').run();
  const v2 = version.get();
  assert.notEqual(v2, v1, 'a commit of another connection');

  // What `basin credential revoke` does: another process commits.
  execFileSync(
    process.execPath,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(process.argv[1]);
       db.prepare('INSERT INTO t VALUES (3)').run();
       db.close();`,
      file,
    ],
    { cwd: process.cwd() },
  );
  const v3 = version.get();
  assert.notEqual(v3, v2, 'a commit of another process');
  assert.equal(version.get(), v3);

  // A transaction that rolls back commits nothing.
  writer.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (4); ROLLBACK');
  assert.equal(version.get(), v3, 'a rollback');
});

test('the commit check runs once per turn of the event loop; our own commits make the next view check again', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  const other = open(t, file);
  await seed(store);
  assert.equal(store.readView().services.get('s1')?.name, 'first');
  // Another process's commit, in the same turn as the check: the requests of
  // this turn were all sent before it, so they are answered as of the check.
  await other.transaction(async (tx) => {
    await tx.services.update({ ...((await tx.services.get('s1')) as Service), name: 'by another' });
  });
  assert.equal(store.readView().services.get('s1')?.name, 'first');
  await nextTurn();
  assert.equal(store.readView().services.get('s1')?.name, 'by another');
  // Our own commit is seen at once, in the same turn.
  await store.transaction(async (tx) => {
    await tx.services.update({ ...((await tx.services.get('s1')) as Service), name: 'by us' });
  });
  assert.equal(store.readView().services.get('s1')?.name, 'by us');
});

test('a read view answers from memory until anything is committed, by this store or another', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  const other = open(t, file);
  await seed(store);

  const first = store.readView().services.get('s1');
  assert.equal(first?.name, 'first');
  assert.ok(Object.isFrozen(first), 'shared, so frozen');
  assert.equal(store.readView().services.get('s1'), first, 'the same object from memory');

  // This store's own transaction (its writer connection).
  await store.transaction(async (tx) => {
    await tx.services.update({ ...(first as Service), name: 'second' });
  });
  const second = store.readView().services.get('s1');
  assert.equal(second?.name, 'second');

  // Another handle on the file, as the CLI opens it.
  await other.transaction(async (tx) => {
    await tx.services.update({ ...(second as Service), name: 'third' });
    await tx.credentials.revoke('c1', new Date(1).toISOString());
  });
  // Seen from the next turn of the event loop on, where the next request is
  // read (read-cache.ts: one check per turn).
  await nextTurn();
  const view = store.readView();
  assert.equal(view.services.get('s1')?.name, 'third');
  assert.equal(view.credentials.findByBearerHash('hash-c1')?.revokedAt, new Date(1).toISOString());
});

test('a key tried before its credential existed works as soon as the credential is issued', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  const other = open(t, file);
  await seed(store);

  assert.equal(store.readView().credentials.findByBearerHash('hash-c2'), undefined);
  await other.transaction((tx) => tx.credentials.insert(credential('c2')));
  await nextTurn();
  assert.equal(store.readView().credentials.findByBearerHash('hash-c2')?.id, 'c2');
  assert.equal(store.readView().credentials.findByAccessKey('AKc2')?.id, 'c2');
});

test('the cache holds no misses and at most its limits, however many keys are tried', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  await seed(store);
  await store.transaction(async (tx) => {
    for (let i = 2; i <= 40; i++) await tx.credentials.insert(credential(`c${i}`));
  });
  const reader = new Database(file, { readonly: true });
  t.after(() => reader.close());
  const cache = new ReadCache(reader, createReadView(reader), {
    credentials: 10,
    users: 10,
    docs: 10,
    lists: 10,
  });

  const view = cache.check();
  for (let i = 0; i < 1000; i++) {
    assert.equal(view.credentials.findByBearerHash(`random-${i}`), undefined);
  }
  assert.equal(cache.size, 0, 'unknown keys are not cached');

  for (let i = 1; i <= 40; i++) {
    assert.equal(view.credentials.findByBearerHash(`hash-c${i}`)?.id, `c${i}`);
  }
  assert.ok(cache.size <= 10, `at most the limit (${cache.size})`);
});

test('lists and project memberships are fresh after a commit too', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  const other = open(t, file);
  await seed(store);
  await store.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p2', name: 'two', createdAt: new Date(0).toISOString() });
    await tx.users.insert({
      id: 'u1',
      name: 'alice',
      email: null,
      createdAt: new Date(0).toISOString(),
    });
    await tx.users.addToProject('u1', 'p1');
  });

  assert.deepEqual(store.readView().users.projectIds('u1'), ['p1']);
  assert.ok(Object.isFrozen(store.readView().services.listByProject('p1')), 'lists are frozen too');
  assert.deepEqual(
    store
      .readView()
      .services.listByProject('p1')
      .map((s) => s.id),
    ['s1'],
  );
  await other.transaction(async (tx) => {
    await tx.users.addToProject('u1', 'p2');
    await tx.services.insert({ ...service('s2', 'more'), createdAt: new Date(1).toISOString() });
  });
  await nextTurn();
  assert.deepEqual(store.readView().users.projectIds('u1'), ['p1', 'p2']);
  assert.deepEqual(
    store
      .readView()
      .services.listByProject('p1')
      .map((s) => s.id),
    ['s1', 's2'],
  );
});

test('a commit to tables a view does not read keeps everything it cached', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  const other = open(t, file);
  await seed(store);
  const view = store.readView();
  const svc = view.services.get('s1');
  const list = view.services.listByProject('p1');
  const cred = view.credentials.findByBearerHash('hash-c1');
  // What the engine commits most: its operations and the services' logs.
  await store.transaction(async (tx) => {
    await tx.events.add({
      resourceKind: 'service',
      resourceId: 's1',
      node: null,
      at: 1,
      severity: 'INFO',
      message: 'basin: something happened',
    });
  });
  await other.transaction((tx) => tx.counters.next('anything', 1));
  await nextTurn();
  const after = store.readView();
  assert.equal(after.services.get('s1'), svc, 'the same service object');
  assert.equal(after.services.listByProject('p1'), list, 'the same list');
  assert.equal(after.credentials.findByBearerHash('hash-c1'), cred, 'the same credential');
});

test('a list after one service changed: the others are the objects read before, the changed one and new ones are read, gone ones leave', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  const other = open(t, file);
  await seed(store);
  await store.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p2', name: 'two', createdAt: new Date(0).toISOString() });
    for (let i = 2; i <= 5; i++) {
      await tx.services.insert({
        ...service(`s${i}`, `n${i}`),
        createdAt: new Date(i).toISOString(),
      });
    }
    await tx.services.insert({ ...service('x1', 'theirs'), projectId: 'p2' });
  });
  const before = store.readView().services.listByProject('p1');
  assert.deepEqual(
    before.map((s) => s.id),
    ['s1', 's2', 's3', 's4', 's5'],
    "in creation order, the project's own only",
  );
  const s3 = store.readView().services.get('s3');
  assert.equal(s3, before[2], 'a GET hands out the object the list holds');

  // Another process changes s2, deletes s4 and adds s6 (and p2's service changes).
  await other.transaction(async (tx) => {
    await tx.services.update({ ...((await tx.services.get('s2')) as Service), name: 'renamed' });
    await tx.services.delete('s4');
    await tx.services.insert({ ...service('s6', 'n6'), createdAt: new Date(6).toISOString() });
    await tx.services.update({ ...((await tx.services.get('x1')) as Service), name: 'moved' });
  });
  await nextTurn();
  const view = store.readView();
  const after = view.services.listByProject('p1');
  assert.notEqual(after, before, 'a new list');
  assert.ok(Object.isFrozen(after));
  assert.deepEqual(
    after.map((s) => [s.id, s.name]),
    [
      ['s1', 'first'],
      ['s2', 'renamed'],
      ['s3', 'n3'],
      ['s5', 'n5'],
      ['s6', 'n6'],
    ],
  );
  assert.equal(after[0], before[0], 's1 unchanged: the same object');
  assert.equal(after[2], before[2], 's3 unchanged: the same object');
  assert.equal(after[3], before[4], 's5 unchanged: the same object');
  assert.notEqual(after[1], before[1], 's2 changed: read again');
  assert.ok(Object.isFrozen(after[1]) && Object.isFrozen(after[4]), 'what is read is frozen');
  assert.equal(view.services.get('s4'), undefined, 'a deleted service is not found');
  assert.equal(view.services.get('s2')?.name, 'renamed');
  assert.equal(view.services.get('x1')?.name, 'moved');
  assert.deepEqual(
    view.services.listByProject('p2').map((s) => s.id),
    ['x1'],
  );

  // Deleted and made again under the same id and version (a restored copy):
  // its creation time tells it apart.
  await other.transaction(async (tx) => {
    await tx.services.delete('s3');
    await tx.services.insert({
      ...service('s3', 'again'),
      createdAt: new Date(3000).toISOString(),
    });
  });
  await nextTurn();
  assert.equal(store.readView().services.get('s3')?.name, 'again');
  assert.equal(
    store
      .readView()
      .services.listByProject('p1')
      .find((s) => s.id === 's3')?.name,
    'again',
  );
});

test('a store without the change counts (not migrated) empties everything at each commit, as before', async (t) => {
  const file = dbFile(t);
  const store = open(t, file);
  await seed(store);
  const reader = new Database(file, { readonly: true });
  t.after(() => reader.close());
  const writer = new Database(file);
  t.after(() => writer.close());
  const triggers = writer
    .prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'read_changes_%'`)
    .pluck()
    .all() as string[];
  for (const name of triggers) writer.exec(`DROP TRIGGER ${name}`);
  writer.exec('DROP TABLE read_changes');
  const cache = new ReadCache(reader, createReadView(reader));
  const first = cache.check().services.get('s1');
  assert.equal(first?.name, 'first');
  await store.transaction(async (tx) => {
    await tx.services.update({ ...(first as Service), name: 'second' });
  });
  await nextTurn();
  assert.equal(cache.check().services.get('s1')?.name, 'second');
  await store.transaction((tx) => tx.credentials.revoke('c1', new Date(1).toISOString()));
  await nextTurn();
  assert.equal(
    cache.check().credentials.findByBearerHash('hash-c1')?.revokedAt,
    new Date(1).toISOString(),
  );
});

/** Resolves in the next turn of the event loop, after the check phase. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
