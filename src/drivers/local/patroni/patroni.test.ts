import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { patroniFiles } from './files.js';
import { patroniStatus, startPatroni } from './patroni.js';

// A node's Patroni that runs but is not recorded (its record names a
// process long gone) is found and adopted, never started a second time:
// a second Patroni would first kill the node's PostgreSQL as one left by a
// killed Patroni, then exit on the REST API's port held by the first.
test('a Patroni of the node running unrecorded is adopted and recorded, not started again', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'patroni-adopt-'));
  const f = patroniFiles(dir);
  await mkdir(f.data, { recursive: true });
  // A stand-in named `patroni` (what the status checks: the program's name
  // and the node's configuration as its last argument), run as this user.
  const bin = join(dir, 'bin', 'patroni');
  await writeFile(f.config, '');
  const running = spawn('tail', ['-f', f.config], { argv0: bin, stdio: 'ignore' });
  t.after(async () => {
    running.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  await new Promise((r) => setTimeout(r, 200));
  const user = { name: 'me', uid: process.getuid!(), gid: process.getgid!() };
  await writeFile(f.state, JSON.stringify({ pid: 999_999_999, startTime: '1' }));
  assert.deepEqual(await patroniStatus(f, user), { up: true, pid: running.pid });
  const started = await startPatroni({ files: f, user });
  assert.deepEqual(started, { pid: running.pid, adopted: true });
  const rec = JSON.parse(await readFile(f.state, 'utf8')) as { pid: number };
  assert.equal(rec.pid, running.pid, 'the adopted process is recorded');
  running.kill('SIGKILL');
  await new Promise((r) => running.once('exit', r));
  assert.deepEqual(await patroniStatus(f, user), { up: false });
});
