import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  clockTicksPerSecond,
  childrenOf,
  memoryKb,
  pageSize,
  parseStat,
  processTree,
  readProcessTable,
  readStat,
} from './proc.js';

/** A pid no process has: above any pid_max (2^22). */
const NO_SUCH_PID = 99_999_999;

test('parseStat reads fields after a command name with spaces and parentheses', () => {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime stime cutime cstime priority nice threads itrealvalue starttime …
  const text =
    '4242 (post (gres) x) S 1 4242 4242 0 -1 4194560 90 0 0 0 7 3 20 10 20 0 1 0 5555 1 2\n';
  assert.deepEqual(parseStat(text), {
    pid: 4242,
    ppid: 1,
    state: 'S',
    cpuTicks: 40,
    startTime: 5555,
  });
  assert.equal(parseStat('garbage'), undefined);
  assert.equal(parseStat('1 (x) S'), undefined);
});

test('the process table knows this process and its parent', async () => {
  const table = await readProcessTable();
  const self = table.get(process.pid);
  assert.ok(self);
  assert.equal(self.ppid, process.ppid);
  assert.ok(self.cpuTicks >= 0 && self.startTime > 0);
  assert.equal(await readStat(NO_SUCH_PID), undefined);
  assert.deepEqual(processTree(table, NO_SUCH_PID), []);
});

test('a process tree holds grandchildren', async () => {
  const sh = spawn('sh', ['-c', 'sleep 30 & sleep 30 & wait'], { stdio: 'ignore' });
  try {
    let tree: number[] = [];
    for (let i = 0; i < 100 && tree.length < 3; i++) {
      await sleep(20);
      tree = processTree(await readProcessTable(), sh.pid!).map((p) => p.pid);
    }
    assert.equal(tree.length, 3);
    assert.equal(tree[0], sh.pid);
    // And from further up: this process → sh → two sleeps.
    const table = await readProcessTable();
    const mine = processTree(table, process.pid).map((p) => p.pid);
    assert.ok(tree.every((pid) => mine.includes(pid)));
    // The children map made once for the table (the sampler's many trees) reads the same trees.
    const children = childrenOf(table);
    assert.deepEqual(
      processTree(table, process.pid, children).map((p) => p.pid),
      mine,
    );
    assert.deepEqual(
      processTree(table, sh.pid!, children).map((p) => p.pid),
      processTree(table, sh.pid!).map((p) => p.pid),
    );
  } finally {
    await killTree(sh);
  }
});

test('memory is proportional resident size, 0 for a gone process', async () => {
  const kb = await memoryKb(process.pid);
  assert.ok(kb > 10_000, `${kb} KiB`); // Node itself takes tens of MB
  assert.equal(await memoryKb(NO_SUCH_PID), 0);
  assert.ok(clockTicksPerSecond() > 0);
  assert.ok(pageSize() >= 4096);
});

/**
 * Kills a child's descendants, then waits for the child to exit by itself
 * (the shell's `wait` returns): killed first, it would leave its children to
 * this container's init, which does not reap them.
 */
async function killTree(child: ChildProcess): Promise<void> {
  const running = () => child.exitCode === null && child.signalCode === null;
  if (child.pid === undefined || !running()) return;
  const tree = processTree(await readProcessTable(), child.pid);
  for (const p of tree.slice(1).reverse()) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
  if (running()) await once(child, 'exit');
  clearTimeout(timer);
}
