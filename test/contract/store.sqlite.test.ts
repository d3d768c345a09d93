// The store contract (store-contract.ts) against the embedded SQLite store,
// and what only SQLite has: data directories written by earlier schemas.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { AppError } from '../../src/domain/errors.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { tempDir } from '../helpers.js';
import { storeContract } from './store-contract.js';

storeContract('sqlite', {
  async open(t) {
    const file = join(tempDir(t), 'basin.db');
    const store = openSqliteStore(file);
    t.after(() => store.close());
    return {
      store,
      async insertRawOperation(row) {
        const db = new Database(file);
        try {
          const res = db
            .prepare(
              `INSERT INTO operations (kind, resource_kind, resource_id, project_id, state, payload,
                 run_after, created_at, updated_at)
               VALUES (?, ?, ?, ?, 'pending', ?, 0, '1970-01-01T00:00:00.000Z', '1970-01-01T00:00:00.000Z')`,
            )
            .run(row.kind, row.resourceKind, row.resourceId, row.projectId, row.payload);
          return Number(res.lastInsertRowid);
        } finally {
          db.close();
        }
      },
    };
  },
});

test('sqlite: an operation queued by an earlier Basin (schema 1) is read back typed, with its project', async (t) => {
  const file = join(tempDir(t), 'basin.db');
  const old = new Database(file);
  old.exec(MIGRATIONS[0] as string);
  old.pragma('user_version = 1');
  old
    .prepare(
      `INSERT INTO services (id, project_id, parent_id, version, created_at, doc)
       VALUES ('s1', 'p1', NULL, 1, '2025-01-01T00:00:00.000Z', '{}')`,
    )
    .run();
  old
    .prepare(
      `INSERT INTO operations (kind, resource_kind, resource_id, state, payload, run_after,
         locked_by, lease_expires_at, created_at, updated_at)
       VALUES ('service.converge', 'service', 's1', 'pending',
         '{"provision":true,"from":"CONFIGURING","settle":"READY"}', 0, 'engine-1a2b3c4d', 5,
         '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')`,
    )
    .run();
  old.close();

  const store = openSqliteStore(file);
  t.after(() => store.close());
  const [op] = await store.operations.listPending();
  assert.equal(op?.kind, 'service.converge');
  assert.equal(op?.projectId, 'p1');
  assert.deepEqual(op?.payload, { provision: true, from: 'CONFIGURING', settle: 'READY' });
  // Its lease (of an engine id of the old form) is taken once expired.
  const claimed = await store.transaction((tx) =>
    tx.operations.claim('h/1/aa', 10, { leaseMs: 1000, limit: 1, perProject: 1 }),
  );
  assert.equal(claimed[0]?.id, op?.id);
});

test('sqlite: users of an earlier Basin (schema 3) come back without an email, and can get one', async (t) => {
  const file = join(tempDir(t), 'basin.db');
  const old = new Database(file);
  for (const m of MIGRATIONS.slice(0, 3)) old.exec(m);
  old.pragma('user_version = 3');
  old
    .prepare(
      `INSERT INTO users (id, name, created_at) VALUES ('u1', 'alice', '2025-01-01T00:00:00.000Z')`,
    )
    .run();
  old.close();

  const store = openSqliteStore(file);
  t.after(() => store.close());
  assert.deepEqual(await store.users.get('u1'), {
    id: 'u1',
    name: 'alice',
    email: null,
    createdAt: '2025-01-01T00:00:00.000Z',
  });
  assert.equal(await store.transaction((tx) => tx.users.setEmail('u1', 'alice@example.com')), true);
  assert.equal((await store.users.get('u1'))?.email, 'alice@example.com');
  assert.equal(
    await store.transaction((tx) => tx.users.setEmail('nobody', 'x@example.com')),
    false,
  );
});

test('sqlite: a write the disk has no room for is a 503 that says so; with room again, writes go on', async (t) => {
  // A file system of 4 MB of its own (tmpfs), filled up by the test.
  const dir = mkdtempSync(join(tmpdir(), 'basin-full-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', dir]);
  t.after(() => {
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });
  const store = openSqliteStore(join(dir, 'basin.db'));
  t.after(() => store.close());
  const event = (message: string) => ({
    resourceKind: 'service' as const,
    resourceId: 's1',
    node: null,
    at: 0,
    severity: 'LOG',
    message,
  });
  await store.transaction((tx) => tx.events.add({ ...event('before'), at: 1 }));
  const filler = join(dir, 'filler');
  // Everything that is left, and then some: the write fails with ENOSPC part way.
  try {
    execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k', 'count=100'], {
      stdio: 'ignore',
    });
  } catch {
    // No space left on device: the point.
  }
  await assert.rejects(
    store.transaction((tx) => tx.events.add(event('x'.repeat(512 * 1024)))),
    (err: unknown) =>
      err instanceof AppError &&
      err.code === 'UNAVAILABLE' &&
      /has no room left on its disk: nothing was changed/.test(err.message),
  );
  rmSync(filler);
  await store.transaction((tx) => tx.events.add({ ...event('after'), at: 2 }));
  const events = await store.events.list('service', 's1', {
    node: 0,
    limit: 10,
    severities: [],
    search: [],
  });
  assert.deepEqual(
    events.map((e) => e.message),
    ['after', 'before'],
  );
});
