// What a killed Basin staged is removed at the next start, whatever its age,
// with the processes still working in it (drivers/local/leftovers.ts); what
// live nodes own stays.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { removeLeftovers } from '../../src/drivers/local/leftovers.js';
import { silentLogger } from '../../src/lib/logger.js';
import { makeDataDir, removeDir } from './helpers.js';

test('every staged directory and ownerless socket directory goes at start, with what runs in it', async (t) => {
  const dataDir = makeDataDir();
  t.after(() => removeDir(dataDir));
  const layout = new Layout(dataDir);
  const mk = (...parts: string[]) => {
    const dir = join(layout.root, ...parts);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  // What live nodes own.
  const kept = [
    mk('instances', 'svc1', '0', 'pgdata'),
    mk('instances', 'svc1', '1', 'pgdata'),
    mk('s', 'svc1-0'),
    mk('s', 'svc1-1'),
    mk('backup', 'svc1', 'repo'),
    mk('template', 'pgdata'),
  ];
  // What a dead Basin staged (just now: age does not matter).
  const staged = [
    mk('.staging-template-0a0b0c0d', 'pgdata'),
    mk('.staging-cert-01020304'),
    mk('instances', 'svc1', '.clone-2-aabbccdd', 'pgdata'),
    mk('instances', 'svc2', '.restore-0-aabbccdd', 'pgdata'),
    mk('instances', 'svc1', '1', '.basebackup', 'pgdata'),
    mk('instances', 'svc1', '0', '.rewind'),
    mk('backup', 'svc1', '.source-11223344'),
    mk('s', 'tpl-0a0b0c0d'),
    mk('s', 'svc1-2'), // its node directory is gone
    mk('s', 'gone-0'),
  ];
  writeFileSync(join(layout.root, '.staging-cert-01020304', 'server.key'), 'secret');
  // A process still working in the template's staging, as its postmaster would.
  const worker = spawn('sleep', ['600'], { cwd: staged[0], stdio: 'ignore' });
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  t.after(() => worker.kill('SIGKILL'));

  const removed = await removeLeftovers(layout, silentLogger);
  const parentOf = (p: string) => (p.endsWith('/pgdata') ? join(p, '..') : p);
  assert.deepEqual(removed.sort(), staged.map(parentOf).sort());
  for (const dir of staged) assert.equal(existsSync(parentOf(dir)), false, dir);
  for (const dir of kept) assert.equal(existsSync(dir), true, dir);
  assert.equal(
    await Promise.race([exited.then(() => 'killed'), sleep(5_000, 'running')]),
    'killed',
  );
  assert.deepEqual(await removeLeftovers(layout, silentLogger), [], 'nothing more the second time');
});
