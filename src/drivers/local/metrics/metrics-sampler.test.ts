import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { diskUsageBytes } from './disk-usage.js';
import { MetricsSampler } from './metrics-sampler.js';

const MiB = 1024 * 1024;

/** A data directory holding `mb` MiB of incompressible bytes. */
function withDataDir(fn: (dir: string) => Promise<void>, mb = 2) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basin-metrics-'));
    try {
      writeFileSync(join(dir, 'data'), Buffer.alloc(mb * MiB, 7));
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
  'this process: memory, CPU over the window, storage',
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
    assert.ok(first.storageMb >= 2 && first.storageMb < 2.1, `${first.storageMb} MB`);

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
  'a stopped or dead node has no memory or CPU, but its storage',
  withDataDir(async (dir) => {
    const child = spawn('true');
    await once(child, 'exit');
    const sampler = new MetricsSampler({ intervalMs: 60_000 });
    sampler.track('dead', { pgdata: dir, pid: child.pid });
    sampler.track('stopped', { pgdata: dir, pid: undefined });
    sampler.track('nowhere', { pgdata: join(dir, 'missing'), pid: 99_999_999 });
    await sampler.sampleNow();
    for (const key of ['dead', 'stopped']) {
      assert.deepEqual(sampler.latest(key), { memoryMb: 0, milliCpu: 0, storageMb: 2 }, key);
    }
    assert.deepEqual(sampler.latest('nowhere'), { memoryMb: 0, milliCpu: 0, storageMb: 0 });
  }, 2),
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
      assert.deepEqual(sampler.latest('n'), { memoryMb: 0, milliCpu: 0, storageMb: 2 });
    } finally {
      sleeper.kill('SIGKILL');
      await once(sleeper, 'exit');
    }
  }),
);

test(
  'storage is measured on track, then only every storageIntervalMs',
  withDataDir(async (dir) => {
    const clock = { now: 1_000 };
    const sampler = new MetricsSampler({
      intervalMs: 60_000,
      storageIntervalMs: 30_000,
      clock: () => clock.now,
    });
    sampler.track('n', { pgdata: dir, pid: undefined });
    await sampler.sampleNow();
    assert.equal(sampler.latest('n')!.storageMb, 2);
    writeFileSync(join(dir, 'more'), Buffer.alloc(3 * MiB, 7));
    clock.now += 29_000;
    await sampler.sampleNow();
    assert.equal(sampler.latest('n')!.storageMb, 2); // not due yet
    clock.now += 1_000;
    await sampler.sampleNow();
    assert.equal(sampler.latest('n')!.storageMb, 5);
    // Another pgdata for the same key is measured at once.
    const other = mkdtempSync(join(tmpdir(), 'basin-metrics-'));
    try {
      sampler.track('n', { pgdata: other, pid: undefined });
      await sampler.sampleNow();
      assert.ok(sampler.latest('n')!.storageMb < 0.1);
    } finally {
      rmSync(other, { recursive: true, force: true });
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

test(
  'a data directory of many files is walked a bounded pass per tick; its last complete size shows meanwhile',
  withDataDir(async (dir) => {
    const clock = { now: 1_000 };
    const sampler = new MetricsSampler({
      intervalMs: 60_000,
      storageIntervalMs: 30_000,
      clock: () => clock.now,
      walk: { entriesPerTick: 40, entriesPerSlice: 20 },
    });
    sampler.track('n', { pgdata: dir, pid: undefined });
    await sampler.sampleNow();
    assert.equal(sampler.latest('n')!.storageMb, 2);

    // A tenant adds files by the hundred (each takes a block or more).
    mkdirSync(join(dir, 'many'));
    for (let i = 0; i < 300; i++) writeFileSync(join(dir, 'many', `f${i}`), Buffer.alloc(8192, 1));
    clock.now += 30_000;
    let passes = 0;
    while (sampler.latest('n')!.storageMb === 2) {
      await sampler.walkTick();
      passes++;
      assert.ok(passes < 100, 'the walk ends');
    }
    // 302 entries, at most about 40 a pass.
    assert.ok(passes >= 6, `${passes} passes`);
    assert.equal(
      sampler.latest('n')!.storageMb,
      Math.round(((await diskUsageBytes(dir)) / MiB) * 10) / 10,
    );

    // A node untracked half way through its walk leaves no directory open.
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    sampler.track('other', { pgdata: dir, pid: undefined });
    await sampler.walkTick();
    assert.ok(fds() > before, 'the walk is under way');
    sampler.untrack('other');
    for (let i = 0; i < 100 && fds() > before; i++) await sleep(10); // closing is asynchronous
    assert.equal(fds(), before);
  }),
);
