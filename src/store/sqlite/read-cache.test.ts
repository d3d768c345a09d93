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

/** Resolves in the next turn of the event loop, after the check phase. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
