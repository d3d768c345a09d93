// Counters only go up, from their floor, and survive a reopen of the store:
// the local driver relies on this never to give a uid twice.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openSqliteStore } from './sqlite-store.js';

test('a counter starts at its floor, goes up by one, and never comes down', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-counters-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'basin.db');
  let store = openSqliteStore(file);
  const next = (name: string, floor: number) =>
    store.transaction((tx) => tx.counters.next(name, floor));

  assert.equal(await next('service-uid', 2_000_000), 2_000_000);
  assert.equal(await next('service-uid', 2_000_000), 2_000_001);
  // A lower floor (a range moved down) does not bring it back…
  assert.equal(await next('service-uid', 1_000), 2_000_002);
  // …a higher one moves it up.
  assert.equal(await next('service-uid', 3_000_000), 3_000_000);
  assert.equal(await next('other', 5), 5);

  // A transaction that fails gives nothing out.
  await assert.rejects(
    store.transaction(async (tx) => {
      await tx.counters.next('service-uid', 0);
      throw new Error('rolled back');
    }),
    /rolled back/,
  );
  store.close();
  store = openSqliteStore(file);
  t.after(() => store.close());
  assert.equal(await next('service-uid', 0), 3_000_001);
});
