// The storage watch against real directories (files allocated with
// fallocate, so that they take the blocks they say), with a file system
// whose free space the test sets and a clock the test moves.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Target } from '../../../domain/logs.js';
import { GB, MB, parseReserve } from '../../../domain/storage.js';
import { silentLogger } from '../../../lib/logger.js';
import { Layout } from '../layout.js';
import { readStorageRecord } from './storage-record.js';
import { type StorageNotice, StorageWatch, type StorageWatchOptions } from './storage-watch.js';

const SERVICE: Target = { kind: 'service', id: 's1' };

/** A data directory laid out as the driver's, a fake file system and clock, and what the watch said and did. */
function setUp(options: Partial<StorageWatchOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'basin-storage-'));
  const layout = new Layout(dir);
  const fs = { size: 100 * GB, free: 50 * GB, used: 50 * GB };
  const clock = { now: 0 };
  const notices: StorageNotice[] = [];
  const stopped: string[] = [];
  const make = () => {
    const watch = new StorageWatch({
      layout,
      reserve: parseReserve('5%'),
      log: silentLogger,
      stop: async (t) => void stopped.push(t.id),
      statfs: async () => ({ ...fs }),
      clock: () => clock.now,
      periodMs: 10_000,
      ...options,
    });
    watch.onNotice((n) => notices.push(n));
    return watch;
  };
  const node = (id: string, n: number) => {
    const pgdata = layout.pgdata({ id, node: n });
    mkdirSync(pgdata, { recursive: true });
    return pgdata;
  };
  /** Allocates `mb` MB to `path` and tells the fake file system. */
  const fill = (path: string, mb: number) => {
    execFileSync('fallocate', ['-l', `${mb}M`, path]);
    fs.used += mb * MB;
    fs.free -= mb * MB;
  };
  const cleanUp = () => rmSync(dir, { recursive: true, force: true });
  /** The last change of level the watch reported. */
  const lastChange = () => notices.filter((n) => n.change).at(-1)?.change;
  return { dir, layout, fs, clock, notices, stopped, make, node, fill, lastChange, cleanUp };
}

test('a service climbs the ladder as it grows, each step within a tick of the disk filling', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    // 1 MB of allowance: read-only from 1 MB, recovery from 65 MB, stopped from 129 MB.
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    await watch.tick();
    assert.equal(watch.state('s1').level, 'ok');
    assert.ok(watch.view('s1')!.usage.data < MB);

    t.fill(join(pgdata, 'a'), 2);
    t.clock.now += 500; // a tick later, long before the periodic measurement
    await watch.tick();
    assert.deepEqual(watch.state('s1'), { level: 'readOnly' });
    const change = t.lastChange()!;
    assert.equal(change.from, 'ok');
    assert.equal(change.view.level, 'readOnly');
    assert.ok(change.view.usage.data >= 2 * MB);

    t.fill(join(pgdata, 'b'), 70);
    t.clock.now += 500;
    await watch.tick();
    assert.deepEqual(watch.state('s1'), { level: 'recovery' });
    assert.deepEqual(t.stopped, []);

    t.fill(join(pgdata, 'c'), 64);
    t.clock.now += 500;
    await watch.tick();
    assert.deepEqual(watch.state('s1'), { level: 'stopped', why: 'limit' });
    assert.deepEqual(t.stopped, ['s1']);
    // Stopped again now and then, in case something started it meanwhile.
    t.clock.now += 5_000;
    await watch.tick();
    assert.deepEqual(t.stopped, ['s1', 's1']);
    // Its record says so, for a restarted Basin.
    const record = await readStorageRecord(t.layout.storageFile('s1'));
    assert.equal(record?.level, 'stopped');
    assert.equal(record?.allowance, MB);
  } finally {
    t.cleanUp();
  }
});

test('without the disk moving, growth is seen at the periodic measurement', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    await watch.tick();
    // The tenant frees elsewhere what it writes here: the file system does not move.
    execFileSync('fallocate', ['-l', '2M', join(pgdata, 'a')]);
    t.clock.now += 500;
    await watch.tick();
    assert.equal(watch.state('s1').level, 'ok');
    t.clock.now += 10_000;
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly');
  } finally {
    t.cleanUp();
  }
});

test('a resting target (a suspended service) is not measured again every period, until it wakes or is due', async () => {
  const resting = new Set<string>();
  const t = setUp({ resting: (id) => resting.has(id) });
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    await watch.tick();
    const first = watch.view('s1')!.usage.data;
    resting.add('s1');
    // Written without the file system moving (as in the test above): only a
    // new measurement sees it.
    execFileSync('fallocate', ['-l', '2M', join(pgdata, 'a')]);
    t.clock.now += 30_000;
    await watch.tick();
    assert.equal(watch.view('s1')!.usage.data, first, 'not walked again while it rests');
    assert.equal(watch.state('s1').level, 'ok');
    // Due (its nodes changed): measured even while it rests.
    watch.due('s1');
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly');
    // Awake again: the periodic measurement is back.
    execFileSync('fallocate', ['-l', '70M', join(pgdata, 'b')]);
    t.clock.now += 30_000;
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly', 'still resting');
    resting.delete('s1');
    await watch.tick();
    assert.equal(watch.state('s1').level, 'recovery');
  } finally {
    t.cleanUp();
  }
});

test('space freed elsewhere in another tick does not hide a writer', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    await watch.tick();
    const tick = async () => {
      t.clock.now += 500;
      await watch.tick();
    };
    // Another service frees 600 kB; then s1 writes twice as much, 600 kB a
    // tick: the file system is only 600 kB fuller, less than the 1 MB s1
    // had before its threshold, but it grew by 1.2 MB.
    t.fs.used -= 600 * 1024;
    await tick();
    for (const name of ['a', 'b']) {
      assert.equal(watch.state('s1').level, 'ok');
      execFileSync('fallocate', ['-l', '600K', join(pgdata, name)]);
      t.fs.used += 600 * 1024;
      await tick();
    }
    assert.equal(watch.state('s1').level, 'readOnly');
  } finally {
    t.cleanUp();
  }
});

test('a resize that raises the allowance lowers the level at once; a smaller one raises it', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    t.fill(join(pgdata, 'a'), 140);
    await watch.tick();
    assert.deepEqual(watch.state('s1'), { level: 'stopped', why: 'limit' });
    await watch.track({ target: SERVICE, allowance: GB, nodes: [0], grows: true });
    assert.deepEqual(watch.state('s1'), { level: 'ok' });
    assert.equal(t.lastChange()!.view.level, 'ok');
    await watch.track({ target: SERVICE, allowance: 100 * MB, nodes: [0], grows: true });
    assert.deepEqual(watch.state('s1'), { level: 'readOnly' });
  } finally {
    t.cleanUp();
  }
});

test('going down needs a complete measurement, and a slack under the threshold', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: 100 * MB, nodes: [0], grows: true });
    t.fill(join(pgdata, 'a'), 101);
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly');
    // Just under the allowance: still read-only (the slack is 32 MB).
    rmSync(join(pgdata, 'a'));
    t.fs.used -= 101 * MB;
    t.fill(join(pgdata, 'b'), 90);
    t.clock.now += 10_000;
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly');
    // Dropped: ok again, within a tick of the disk emptying.
    rmSync(join(pgdata, 'b'));
    t.fs.used -= 90 * MB;
    t.clock.now += 500;
    await watch.tick();
    assert.equal(watch.state('s1').level, 'ok');
    assert.match(t.lastChange()!.view.level, /^ok$/);
  } finally {
    t.cleanUp();
  }
});

test("everything the service's user holds counts: every node, its socket directory, its repository", async () => {
  const t = setUp();
  try {
    t.node('s1', 0);
    const standby = t.node('s1', 1);
    const socket = t.layout.socketDir({ id: 's1', node: 0 });
    const repo = t.layout.backupDirs('s1').repo;
    mkdirSync(socket, { recursive: true });
    mkdirSync(repo, { recursive: true });
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: 10 * MB, nodes: [0, 1], grows: true });
    t.fill(join(standby, 'junk'), 12);
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly'); // the largest node counts
    rmSync(join(standby, 'junk'));
    t.fill(join(socket, 'junk'), 12);
    t.clock.now += 10_000;
    await watch.tick();
    assert.equal(watch.state('s1').level, 'readOnly');
    rmSync(join(socket, 'junk'));
    // The repository's bound is four times the limit (138 MB): 560 MB.
    t.fill(join(repo, 'junk'), 560);
    t.clock.now += 10_000;
    await watch.tick();
    assert.deepEqual(watch.state('s1'), { level: 'stopped', why: 'backups' });
    assert.ok(watch.view('s1')!.usage.backups >= 560 * MB);
  } finally {
    t.cleanUp();
  }
});

test('a restarted watch takes the level from the record before it measures', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const first = t.make();
    await first.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    t.fill(join(pgdata, 'a'), 140);
    await first.tick();
    assert.equal(first.state('s1').level, 'stopped');
    first.stop();
    const second = t.make();
    await second.adopt(['s1', 'unknown']);
    assert.deepEqual(second.state('s1'), { level: 'stopped', why: 'limit' });
    assert.equal(second.state('unknown').level, 'ok');
  } finally {
    t.cleanUp();
  }
});

test('below the reserve, services over their allowance are stopped, and only those', async () => {
  const t = setUp();
  try {
    const big = t.node('big', 0);
    t.node('small', 0);
    const watch = t.make();
    await watch.track({
      target: { kind: 'service', id: 'big' },
      allowance: MB,
      nodes: [0],
      grows: true,
    });
    await watch.track({
      target: { kind: 'service', id: 'small' },
      allowance: GB,
      nodes: [0],
      grows: true,
    });
    t.fill(join(big, 'a'), 2);
    await watch.tick();
    assert.equal(watch.state('big').level, 'readOnly');
    assert.equal(watch.diskState()!.low, false);
    t.fs.free = 4 * GB; // the reserve is 5 GB
    t.clock.now += 500;
    await watch.tick();
    assert.equal(watch.diskState()!.low, true);
    assert.deepEqual(watch.state('big'), { level: 'stopped', why: 'lowDisk' });
    assert.equal(watch.state('small').level, 'ok');
    assert.deepEqual(t.stopped, ['big']);
    t.fs.free = 6 * GB;
    t.clock.now += 500;
    await watch.tick();
    assert.equal(watch.diskState()!.low, false);
    assert.equal(watch.state('big').level, 'readOnly');
  } finally {
    t.cleanUp();
  }
});

test('the engine is asked to converge a service until its nodes are at its level', async () => {
  const t = setUp();
  try {
    const pgdata = t.node('s1', 0);
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    await watch.tick();
    assert.deepEqual(t.notices, []); // a new service at `ok` needs nothing
    t.fill(join(pgdata, 'a'), 2);
    t.clock.now += 500;
    await watch.tick();
    const asks = () => t.notices.filter((n) => !n.change).length;
    assert.equal(asks(), 1); // besides the change itself
    t.clock.now += 1_000;
    await watch.tick();
    assert.equal(asks(), 1); // not at every tick
    t.clock.now += 5_000;
    await watch.tick();
    assert.equal(asks(), 2);
    await watch.applied('s1', 'readOnly');
    t.clock.now += 5_000;
    await watch.tick();
    assert.equal(asks(), 2);
    assert.equal((await readStorageRecord(t.layout.storageFile('s1')))?.applied, 'readOnly');
  } finally {
    t.cleanUp();
  }
});

test('walks are bounded per tick, and a partial count already raises the level', async () => {
  const t = setUp({
    walk: {
      entriesPerTick: 100,
      msPerTick: 10_000,
      urgent: { entriesPerTick: 100, msPerTick: 10_000 },
    },
  });
  try {
    const pgdata = t.node('s1', 0);
    for (let d = 0; d < 5; d++) {
      mkdirSync(join(pgdata, `d${d}`));
      for (let f = 0; f < 100; f++) writeFileSync(join(pgdata, `d${d}`, String(f)), '');
    }
    const watch = t.make();
    await watch.track({ target: SERVICE, allowance: MB, nodes: [0], grows: true });
    await watch.tick();
    assert.equal(watch.view('s1'), undefined); // 500 entries: not measured in one tick
    let ticks = 1;
    while (watch.view('s1') === undefined) {
      await watch.tick();
      ticks++;
      assert.ok(ticks < 20, 'the measurement never ended');
    }
    assert.ok(ticks >= 5, `${ticks} ticks`);
    // A big file: seen as soon as a slice has counted it, before the walk ends.
    t.fill(join(pgdata, 'big'), 140);
    t.clock.now += 500;
    await watch.tick();
    assert.deepEqual(watch.state('s1'), { level: 'stopped', why: 'limit' });
  } finally {
    t.cleanUp();
  }
});

test('a target of many entries slows its own measurement only; one forgotten half way leaves nothing open', async () => {
  const t = setUp({
    walk: {
      entriesPerTick: 600,
      msPerTick: 10_000,
      urgent: { entriesPerTick: 600, msPerTick: 10_000 },
    },
  });
  try {
    const big = t.node('big', 0);
    for (let d = 0; d < 10; d++) {
      mkdirSync(join(big, `d${d}`));
      for (let f = 0; f < 300; f++) writeFileSync(join(big, `d${d}`, String(f)), '');
    }
    t.node('small', 0);
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    const watch = t.make();
    await watch.track({
      target: { kind: 'service', id: 'big' },
      allowance: GB,
      nodes: [0],
      grows: true,
    });
    await watch.track({
      target: { kind: 'service', id: 'small' },
      allowance: GB,
      nodes: [0],
      grows: true,
    });
    await watch.tick();
    assert.ok(watch.view('small'), 'the small one was measured in the first tick');
    assert.equal(watch.view('big'), undefined);
    assert.ok(fds() > before, 'the big walk is under way, its directories open');
    watch.forget('big');
    for (let i = 0; i < 100 && fds() > before; i++) await sleep(10); // closing is asynchronous
    assert.equal(fds(), before);
  } finally {
    t.cleanUp();
  }
});
