import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Backup, backupDue, forkSource, oldestToKeep, recoveryWindow } from './backups.js';

const H = 3_600_000;
const T0 = Date.parse('2030-01-01T00:00:00Z');
const at = (ms: number) => new Date(ms).toISOString();

/** A backup started at T0 + `hours`, taking a minute. */
function backup(hours: number): Backup {
  const start = T0 + hours * H;
  return {
    serviceId: 's1',
    label: `L${String(hours).padStart(4, '0')}`,
    startedAt: at(start),
    stoppedAt: at(start + 60_000),
  };
}

const DAILY = { scheduleMs: 24 * H, windowMs: 72 * H };

test('a backup is due when there is none, or the last started a schedule ago', () => {
  assert.equal(backupDue([], DAILY, T0), true);
  const b = [backup(0), backup(24)];
  assert.equal(backupDue(b, DAILY, T0 + 47 * H), false);
  assert.equal(backupDue(b, DAILY, T0 + 48 * H), true);
  // Order of the records does not matter.
  assert.equal(backupDue([...b].reverse(), DAILY, T0 + 47 * H), false);
});

test('expiry keeps the window restorable and no more', () => {
  const b = [backup(0), backup(24), backup(48), backup(72), backup(96)];
  // At 100 h the window starts at 28 h: the backup of 24 h covers it, the one of 0 h goes.
  assert.equal(oldestToKeep(b, DAILY, T0 + 100 * H)?.label, 'L0024');
  // At 124 h it starts at 52 h: 48 h covers it.
  assert.equal(oldestToKeep(b, DAILY, T0 + 124 * H)?.label, 'L0048');
  // All within the window: nothing goes.
  assert.equal(oldestToKeep(b, DAILY, T0 + 60 * H)?.label, 'L0000');
  // Long after the last one: it stays, alone.
  assert.equal(oldestToKeep(b, DAILY, T0 + 1000 * H)?.label, 'L0096');
  // A pinned backup (a fork being made restores it) stays, and all newer ones.
  assert.equal(oldestToKeep(b, DAILY, T0 + 124 * H, ['L0024'])?.label, 'L0024');
  assert.equal(oldestToKeep(b, DAILY, T0 + 124 * H, ['L0072'])?.label, 'L0048');
  assert.equal(oldestToKeep([], DAILY, T0), undefined);
});

test('the recovery window starts when the oldest backup ended', () => {
  assert.equal(recoveryWindow([]), undefined);
  assert.deepEqual(recoveryWindow([backup(24), backup(0)]), { oldest: at(T0 + 60_000) });
});

test('forkSource: NOW needs no backup; LAST_SNAPSHOT the newest', () => {
  const b = [backup(0), backup(24)];
  assert.deepEqual(forkSource('p', [], 'NOW', undefined, T0), { backup: null, targetTime: null });
  assert.deepEqual(forkSource('p', b, 'LAST_SNAPSHOT', undefined, T0 + 30 * H), {
    backup: b[1],
    targetTime: null,
  });
});

test('forkSource: PITR restores the newest backup that ended by the target', () => {
  const b = [backup(0), backup(24)];
  const now = T0 + 30 * H;
  const pick = (target: string) => forkSource('p', b, 'PITR', target, now);
  assert.equal(pick(at(T0 + 60_000)).backup?.label, 'L0000');
  assert.equal(pick(at(T0 + 24 * H)).backup?.label, 'L0000');
  assert.equal(pick(at(T0 + 24 * H + 60_000)).backup?.label, 'L0024');
  // Normalised to UTC; the bounds are inclusive.
  assert.deepEqual(pick('2030-01-02T03:30:00+02:00'), {
    backup: b[1],
    targetTime: '2030-01-02T01:30:00.000Z',
  });
  assert.equal(pick(at(now)).targetTime, at(now));
});

test('forkSource refuses a target outside the window, saying what the window is', () => {
  const b = [backup(0)];
  const now = T0 + 2 * H;
  const window =
    /^target_time must be between 2030-01-01T00:01:00\.000Z and now \(2030-01-01T02:00:00\.000Z\)/;
  for (const target of [at(T0 + 59_999), at(T0 - H), at(now + 1), '2031-01-01T00:00:00Z']) {
    assert.throws(() => forkSource('p', b, 'PITR', target, now), {
      code: 'INVALID_REQUEST',
      message: window,
    });
  }
  for (const target of [
    'yesterday',
    '2030-01-01',
    '2030-01-01T00:30:00',
    '',
    '2030-02-30T00:00:00Z',
  ]) {
    assert.throws(() => forkSource('p', b, 'PITR', target, now), {
      code: 'INVALID_REQUEST',
      message: /^target_time must be an RFC 3339 timestamp; got /,
    });
  }
});

test('forkSource: without a backup, LAST_SNAPSHOT and PITR are a conflict that says when to retry', () => {
  for (const strategy of ['LAST_SNAPSHOT', 'PITR'] as const) {
    assert.throws(() => forkSource('p', [], strategy, at(T0), T0), {
      code: 'CONFLICT',
      message: /^Service p has no backup yet: its first is taken once it is READY/,
    });
  }
});
