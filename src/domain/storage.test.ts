import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  allowanceOf,
  DEFAULT_ALLOWANCE,
  diskLow,
  GB,
  MB,
  nextStorageState,
  parseAllowance,
  parseBytes,
  parseReserve,
  reserveOf,
  type StorageLevel,
  storageLimits,
  storageMargins,
  storageMessage,
  holdMessage,
} from './storage.js';
import type { Size } from './types.js';

const shared: Size = { shared: true, cpuMillis: 0, memoryGbs: 0 };
const size = (memoryGbs: number): Size => ({ shared: false, cpuMillis: 1000, memoryGbs });

test('an allowance comes from the size (per GB of memory) or is the same for every size', () => {
  assert.equal(allowanceOf(DEFAULT_ALLOWANCE, size(2)), 50 * GB);
  assert.equal(allowanceOf(DEFAULT_ALLOWANCE, size(128)), 3200 * GB);
  assert.equal(allowanceOf(DEFAULT_ALLOWANCE, shared), 10 * GB);
  const fixed = parseAllowance('200MB', 10 * GB);
  for (const s of [shared, size(2), size(64)]) assert.equal(allowanceOf(fixed, s), 200 * MB);
  const ratio = parseAllowance('0.5x', 300 * MB);
  assert.equal(allowanceOf(ratio, size(1)), 512 * MB);
  assert.equal(allowanceOf(ratio, shared), 300 * MB);
  // A resize to more memory raises it; whole megabytes always.
  assert.ok(allowanceOf(ratio, size(4)) > allowanceOf(ratio, size(2)));
  assert.equal(allowanceOf(parseAllowance('0.001x', MB), size(1)) % MB, 0);
});

test('limits: a margin of a tenth, between 64 MB and 1 GB, between the levels', () => {
  const small = storageLimits(200 * MB);
  assert.deepEqual(small, {
    allowance: 200 * MB,
    ceiling: 264 * MB,
    limit: 328 * MB,
    slack: 32 * MB,
    backups: 4 * 328 * MB,
  });
  const mid = storageLimits(5 * GB);
  assert.equal(mid.ceiling - mid.allowance, 512 * MB);
  const big = storageLimits(3200 * GB);
  assert.equal(big.ceiling - big.allowance, GB);
  assert.equal(big.limit - big.ceiling, GB);
});

test('the ladder: each level entered at its threshold and left a slack below it', () => {
  const l = storageLimits(200 * MB);
  const at = (prev: StorageLevel, dataMb: number, backupsMb = 0, lowDisk = false) =>
    nextStorageState(prev, { data: dataMb * MB, backups: backupsMb * MB }, l, lowDisk);
  // Going up.
  assert.deepEqual(at('ok', 199), { level: 'ok' });
  assert.deepEqual(at('ok', 200), { level: 'readOnly' });
  assert.deepEqual(at('readOnly', 263), { level: 'readOnly' });
  assert.deepEqual(at('readOnly', 264), { level: 'recovery' });
  assert.deepEqual(at('ok', 300), { level: 'recovery' }); // a fast writer skips levels
  assert.deepEqual(at('recovery', 328), { level: 'stopped', why: 'limit' });
  assert.deepEqual(at('ok', 5000), { level: 'stopped', why: 'limit' });
  // Coming down: a slack below each threshold.
  assert.deepEqual(at('readOnly', 199), { level: 'readOnly' });
  assert.deepEqual(at('readOnly', 168), { level: 'readOnly' });
  assert.deepEqual(at('readOnly', 167), { level: 'ok' });
  assert.deepEqual(at('recovery', 233), { level: 'recovery' });
  assert.deepEqual(at('recovery', 231), { level: 'readOnly' });
  assert.deepEqual(at('recovery', 100), { level: 'ok' });
  // Stopped holds while the data is over the limit, and no longer.
  assert.deepEqual(at('stopped', 400), { level: 'stopped', why: 'limit' });
  assert.deepEqual(at('stopped', 327), { level: 'recovery' });
  assert.deepEqual(at('stopped', 210), { level: 'readOnly' });
  // The repository has a bound of its own; the host's reserve stops the services over their allowance.
  assert.deepEqual(at('ok', 50, 4 * 328), { level: 'stopped', why: 'backups' });
  assert.deepEqual(at('ok', 50, 4 * 328 - 1), { level: 'ok' });
  assert.deepEqual(at('readOnly', 210, 0, true), { level: 'stopped', why: 'lowDisk' });
  assert.deepEqual(at('ok', 150, 0, true), { level: 'ok' });
  assert.deepEqual(at('stopped', 210, 0, false), { level: 'readOnly' });
});

test('margins: how far the data may move before the level could change', () => {
  const l = storageLimits(200 * MB);
  const m = (level: StorageLevel, dataMb: number, backupsMb = 0) => {
    const r = storageMargins(level, { data: dataMb * MB, backups: backupsMb * MB }, l);
    return { up: r.up / MB, down: r.down / MB };
  };
  assert.deepEqual(m('ok', 150), { up: 50, down: Infinity });
  assert.deepEqual(m('readOnly', 210), { up: 54, down: 42 });
  assert.deepEqual(m('recovery', 270), { up: 58, down: 38 });
  assert.deepEqual(m('stopped', 400), { up: Infinity, down: 72 });
  // The repository's bound counts too.
  assert.deepEqual(m('ok', 150, 4 * 328 - 10), { up: 10, down: Infinity });
});

test('the log entries say what happened and what to do', () => {
  const limits = storageLimits(200 * MB);
  const view = (
    level: StorageLevel,
    dataMb: number,
    why?: 'limit' | 'backups' | 'lowDisk',
    grows = true,
  ) => ({
    level,
    ...(why ? { why } : {}),
    usage: { data: dataMb * MB, backups: 30 * MB },
    limits,
    grows,
  });
  const ro = storageMessage({ from: 'ok', view: view('readOnly', 205) }, 'service');
  assert.equal(ro.severity, 'WARNING');
  assert.match(ro.message, /^basin: storage is at 205 MB, over its allowance of 200 MB/);
  assert.match(ro.message, /SET default_transaction_read_only = off/);
  assert.match(
    ro.message,
    /At 264 MB .* recovery, at 328 MB stopped; a resize .* raises the allowance$/,
  );
  const fixed = storageMessage(
    { from: 'ok', view: view('readOnly', 205, undefined, false) },
    'service',
  );
  assert.match(fixed.message, /the operator raises it$/);
  const rec = storageMessage({ from: 'readOnly', view: view('recovery', 270) }, 'service');
  assert.match(rec.message, /restarted read-only, in recovery, where no session can write/);
  assert.match(rec.message, /under 232 MB/);
  const back = storageMessage({ from: 'recovery', view: view('readOnly', 220) }, 'service');
  assert.match(back.message, /out of recovery again/);
  const ok = storageMessage({ from: 'readOnly', view: view('ok', 120) }, 'service');
  assert.equal(ok.severity, 'LOG');
  assert.match(ok.message, /takes writes again/);
  const stop = storageMessage({ from: 'recovery', view: view('stopped', 400, 'limit') }, 'service');
  assert.equal(stop.severity, 'ERROR');
  assert.equal(
    stop.message,
    'basin: storage is at 400 MB, past its limit of 328 MB (allowance 200 MB): every process of the service was stopped',
  );
  const repo = storageMessage({ from: 'ok', view: view('stopped', 50, 'backups') }, 'replica set');
  assert.match(
    repo.message,
    /^basin: its backup repository holds 30 MB, past its bound of 1312 MB/,
  );
  // Why it does not start, and what brings it back: the error of its converges.
  assert.match(
    holdMessage(view('stopped', 400, 'limit'), 'service'),
    /does not start .* resize it/,
  );
  assert.match(
    holdMessage(view('stopped', 400, 'limit', false), 'service'),
    /the operator must raise/,
  );
  assert.match(holdMessage(view('stopped', 210, 'lowDisk'), 'service'), /once the host has room/);
});

test('the reserve: a fraction of the file system or a size, with a slack to leave it', () => {
  assert.equal(reserveOf(parseReserve('5%'), 100 * GB), 5 * GB);
  assert.equal(reserveOf(parseReserve('20GB'), 100 * GB), 20 * GB);
  assert.equal(reserveOf(parseReserve('0%'), 100 * GB), 0);
  const r = 5 * GB;
  assert.equal(diskLow(false, r, r), false);
  assert.equal(diskLow(false, r - 1, r), true);
  assert.equal(diskLow(true, r + 100 * MB, r), true); // still within the slack
  assert.equal(diskLow(true, r + 600 * MB, r), false);
  assert.equal(diskLow(false, r + 100 * MB, r), false);
});

test('parsing: sizes, ratios and percentages, and messages for the rest', () => {
  assert.equal(parseBytes('200MB'), 200 * MB);
  assert.equal(parseBytes('1.5gb'), 1.5 * GB);
  assert.equal(parseBytes('2TB'), 2048 * GB);
  assert.deepEqual(parseAllowance('25x', 10 * GB), {
    kind: 'perMemoryGb',
    bytesPerGb: 25 * GB,
    sharedBytes: 10 * GB,
  });
  for (const bad of ['200', '200KB', '-1GB', '0MB', 'x', '0x', '']) {
    assert.throws(() => parseAllowance(bad, 10 * GB), /^Error: <n>x .* such as 500MB/, bad);
  }
  for (const bad of ['60%', 'lots', '-1%']) {
    assert.throws(() => parseReserve(bad), /^Error: a percentage .* under 50%/, bad);
  }
  assert.throws(() => parseBytes('0.5MB'), /at least 1MB\); got 0.5MB$/);
});
