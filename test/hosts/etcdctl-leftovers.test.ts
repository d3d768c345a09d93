// A kill -9 during an etcdctl call leaves its private directory, with the
// client key of an etcd user, in the temporary directory: the next process's
// first call removes such directories once they are older than any call can
// last, and leaves a younger one (another process's call running) alone.

import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { etcdctl } from '../../src/hosts/etcdctl.js';

test("an etcdctl call removes the files a killed call left, never a live call's", async () => {
  const stale = await mkdtemp(join(tmpdir(), 'basin-etcdctl-'));
  await writeFile(join(stale, 'client.key'), 'key', { mode: 0o600 });
  const old = new Date(Date.now() - 10 * 60_000);
  await utimes(stale, old, old);
  const live = await mkdtemp(join(tmpdir(), 'basin-etcdctl-'));
  try {
    // `version` reaches no member: the call itself succeeds without etcd.
    const out = await etcdctl({ ca: '', cert: '', key: '', endpoints: ['https://127.0.0.1:9'] }, [
      'version',
    ]);
    assert.match(out, /etcdctl version: 3\.4/);
    await assert.rejects(stat(stale), { code: 'ENOENT' });
    assert.ok((await stat(live)).isDirectory());
  } finally {
    await rm(live, { recursive: true, force: true });
  }
});
