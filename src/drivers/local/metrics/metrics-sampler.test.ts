import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MetricsSampler } from './metrics-sampler.js';

/** A node's data directory (the sampler tells a node's successive servers apart by it). */
function withDataDir(fn: (dir: string) => Promise<void>) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basin-metrics-'));
    try {
      await fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** Burns `ms` of CPU time (not wall time: a busy host must not make it less). */
function busy(ms: number) {
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if (used.user + used.system >= ms * 1000) return;
  }
}

/** A clock the test moves: CPU windows of known length, however slow the host. */
function manualClock() {
  const clock = { now: 1_000_000, read: () => clock.now };
  return clock;
}

test(
  'this process: memory, CPU over the window',
  withDataDir(async (dir) => {
    const clock = manualClock();
    const sampler = new MetricsSampler({ intervalMs: 60_000, clock: clock.read });
    assert.equal(sampler.latest('self'), undefined);
    sampler.track('self', { pgdata: dir, pid: process.pid });
    await sampler.sampleNow();
    const first = sampler.latest('self');
    assert.ok(first);
    assert.ok(first.memoryMb > 10 && Number.isInteger(first.memoryMb), `${first.memoryMb} MB`);
    assert.equal(first.milliCpu, 0); // no window yet

    busy(300);
    clock.now += 1_000; // 300 ms of CPU in a 1 s window: 300 millicores, plus whatever else ran
    await sampler.sampleNow();
    const second = sampler.latest('self')!;
    assert.ok(second.milliCpu >= 280 && second.milliCpu < 1000, `${second.milliCpu} mCPU`);

    sampler.untrack('self');
    assert.equal(sampler.latest('self'), undefined);
  }),
);

test(
  'children that exited during the window still count',
  withDataDir(async (dir) => {
    const clock = manualClock();
    const sampler = new MetricsSampler({ intervalMs: 60_000, clock: clock.read });
    sampler.track('self', { pgdata: dir, pid: process.pid });
    await sampler.sampleNow();
    // A child burns 500 ms of CPU and is reaped: its time moves to this process's cutime.
    const script = `const s = process.cpuUsage(); let u;
      do u = process.cpuUsage(s); while (u.user + u.system < 500_000);`;
    await promisify(execFile)(process.execPath, ['-e', script]);
    clock.now += 1_000;
    await sampler.sampleNow();
    const m = sampler.latest('self')!;
    assert.ok(m.milliCpu >= 480, `${m.milliCpu} mCPU`);
  }),
);

test(
  'a stopped or dead node has no memory or CPU',
  withDataDir(async (dir) => {
    const child = spawn('true');
    await once(child, 'exit');
    const sampler = new MetricsSampler({ intervalMs: 60_000 });
    sampler.track('dead', { pgdata: dir, pid: child.pid });
    sampler.track('stopped', { pgdata: dir, pid: undefined });
    sampler.track('nowhere', { pgdata: join(dir, 'missing'), pid: 99_999_999 });
    await sampler.sampleNow();
    for (const key of ['dead', 'stopped', 'nowhere']) {
      assert.deepEqual(sampler.latest(key), { memoryMb: 0, milliCpu: 0 }, key);
    }
  }),
);

test(
  'a new postmaster starts a new CPU window',
  withDataDir(async (dir) => {
    const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const sampler = new MetricsSampler({ intervalMs: 60_000 });
      sampler.track('n', { pgdata: dir, pid: process.pid });
      await sampler.sampleNow();
      busy(200);
      sampler.track('n', { pgdata: dir, pid: sleeper.pid });
      await sampler.sampleNow();
      const m = sampler.latest('n')!;
      assert.equal(m.milliCpu, 0); // neither this process's ticks nor a difference of two trees
      assert.ok(m.memoryMb < 10, `${m.memoryMb} MB`); // sleep's, not Node's
      sampler.track('n', { pgdata: dir, pid: undefined });
      await sampler.sampleNow();
      assert.deepEqual(sampler.latest('n'), { memoryMb: 0, milliCpu: 0 });
    } finally {
      sleeper.kill('SIGKILL');
      await once(sleeper, 'exit');
    }
  }),
);

test(
  'start() samples in the background; stop() ends it',
  withDataDir(async (dir) => {
    const sampler = new MetricsSampler({ intervalMs: 10 });
    sampler.track('self', { pgdata: dir, pid: process.pid });
    sampler.start();
    sampler.start(); // idempotent
    try {
      const deadline = Date.now() + 5_000;
      while (sampler.latest('self') === undefined && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.ok(sampler.latest('self')!.memoryMb > 0);
    } finally {
      sampler.stop();
    }
  }),
);

test('a started sampler does not keep the process alive', { timeout: 30_000 }, async () => {
  const module = new URL('./metrics-sampler.ts', import.meta.url).href;
  const script = [
    `import { MetricsSampler } from ${JSON.stringify(module)};`,
    'const s = new MetricsSampler({ intervalMs: 5 });',
    's.track("self", { pgdata: "/nonexistent", pid: process.pid });',
    's.start();',
  ].join('\n');
  const started = Date.now();
  const { stderr } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    { timeout: 20_000 },
  );
  assert.equal(stderr, '');
  assert.ok(Date.now() - started < 20_000);
});
