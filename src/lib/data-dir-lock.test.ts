import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DataDirInUseError, lockDataDir } from './data-dir-lock.js';

/** Another process holding the lock of `dir` until it is killed. */
async function holder(dir: string): Promise<{ pid: number; kill(): Promise<void> }> {
  const lib = new URL('./data-dir-lock.ts', import.meta.url).pathname;
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '-e',
      `import(${JSON.stringify(lib)}).then((m) => { m.lockDataDir(${JSON.stringify(dir)}); console.log('locked'); setInterval(() => {}, 1000); })`,
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('locked') && resolve());
    child.once('exit', (code) => reject(new Error(`the holder exited (${code})`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    pid: child.pid!,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

test('one Basin per data directory: a second is refused, naming the first; kill -9 frees it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-lock-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));

  const mine = lockDataDir(dir);
  assert.throws(() => lockDataDir(dir), DataDirInUseError, 'twice in one process');
  // The refused attempt closed its file without dropping the lock (fcntl locks are per process).
  await assert.rejects(holder(dir), /the holder exited/);
  mine.release();

  const other = await holder(dir);
  assert.throws(
    () => lockDataDir(dir),
    (err: Error) => err instanceof DataDirInUseError && err.message.includes(`pid ${other.pid}`),
  );
  await other.kill(); // no shutdown: the kernel drops the lock
  const again = lockDataDir(dir);
  again.release();
});
