import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { isDeadWorker, newWorkerId, processRuns } from './worker-id.js';

const self = { host: 'h1', pid: 100, runs: (pid: number) => pid === 200 };

test('a worker id names host, pid and a nonce', () => {
  assert.match(newWorkerId('db-host.example', 4321), /^db-host\.example\/4321\/[0-9a-f]{8}$/);
  assert.notEqual(newWorkerId('h', 1), newWorkerId('h', 1));
});

test('dead: an engine of this host whose process is gone, or an earlier one with our pid', () => {
  assert.equal(isDeadWorker('h1/300/abcd', self), true, 'its process no longer runs');
  assert.equal(isDeadWorker('h1/100/abcd', self), true, 'our pid: an earlier engine of ours');
  assert.equal(isDeadWorker('h1/200/abcd', self), false, 'alive');
  assert.equal(isDeadWorker('h2/300/abcd', self), false, 'another host: wait for expiry');
  assert.equal(isDeadWorker('engine-1a2b3c4d', self), false, 'unknown form: wait for expiry');
});

test('processRuns: this process runs, an exited child does not', () => {
  assert.equal(processRuns(process.pid), true);
  const child = spawnSync(process.execPath, ['-e', 'process.exit(0)']);
  assert.equal(processRuns(child.pid as number), false);
});
