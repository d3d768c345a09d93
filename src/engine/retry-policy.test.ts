import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceConverge } from '../domain/operations.js';
import type { Service } from '../domain/types.js';
import {
  backoffMs,
  DEFAULT_RETRY,
  duration,
  failedEvent,
  outOfAttempts,
  outOfAttemptsReason,
  recoveredEvent,
  retryEvent,
  waitedTooLong,
} from './retry-policy.js';

const op = serviceConverge({ id: 's', projectId: 'p', status: 'QUEUED' } as Service);
const middle = () => 0.5;

test('backoff doubles from 1 s and stops at 5 min', () => {
  const delays = [1, 2, 3, 4, 5, 8, 9, 10, 50, 5000].map((n) =>
    backoffMs(DEFAULT_RETRY, n, middle),
  );
  assert.deepEqual(
    delays,
    [1_000, 2_000, 4_000, 8_000, 16_000, 128_000, 256_000, 300_000, 300_000, 300_000],
  );
});

test('jitter stays within ±25 % and never passes the cap', () => {
  assert.equal(
    backoffMs(DEFAULT_RETRY, 3, () => 0),
    3_000,
  );
  assert.equal(
    backoffMs(DEFAULT_RETRY, 3, () => 0.999999),
    5_000,
  );
  assert.equal(
    backoffMs(DEFAULT_RETRY, 9, () => 0.999999),
    300_000,
  );
});

test('retries are written on the first attempt, each doubling, and when the resource is marked failed', () => {
  const written = [];
  for (let n = 1; n <= 100; n++) {
    const e = retryEvent(DEFAULT_RETRY, op, n, 1000, 'boom');
    if (e) written.push([n, e.severity]);
  }
  assert.deepEqual(written, [
    [1, 'WARNING'],
    [2, 'WARNING'],
    [4, 'WARNING'],
    [5, 'ERROR'],
    [8, 'ERROR'],
    [16, 'ERROR'],
    [32, 'ERROR'],
    [64, 'ERROR'],
  ]);
});

test('the messages a user reads in the logs', () => {
  assert.deepEqual(retryEvent(DEFAULT_RETRY, op, 2, 2_000, 'port busy'), {
    severity: 'WARNING',
    message: 'basin: provisioning failed (attempt 2), retrying in 2 s: port busy',
  });
  assert.deepEqual(failedEvent(op, 'the extension is missing'), {
    severity: 'ERROR',
    message: 'basin: provisioning failed: the extension is missing',
  });
  assert.deepEqual(recoveredEvent(op, 3), {
    severity: 'LOG',
    message: 'basin: provisioning succeeded after 3 failed attempts',
  });
  assert.deepEqual([800, 8_000, 119_000, 300_000].map(duration), [
    '800 ms',
    '8 s',
    '119 s',
    '5 min',
  ]);
});

test('attempts run out at maxAttempts, and the reason keeps the last failure', () => {
  const policy = { ...DEFAULT_RETRY, maxAttempts: 3 };
  assert.deepEqual(
    [1, 2, 3, 4].map((n) => outOfAttempts(policy, n)),
    [false, false, true, true],
  );
  assert.equal(outOfAttempts(DEFAULT_RETRY, 19), false);
  assert.equal(outOfAttempts(DEFAULT_RETRY, 20), true);
  assert.equal(
    outOfAttemptsReason(3, 'port busy'),
    'gave up after 3 failed attempts; the last: port busy',
  );
});

test('a wait is too long from maxWaitMs after the first, and says what it waited for', () => {
  const policy = { ...DEFAULT_RETRY, maxWaitMs: 60_000 };
  assert.equal(waitedTooLong(policy, 1_000, 60_999, 30, 'starting'), undefined);
  assert.equal(
    waitedTooLong(policy, 1_000, 61_000, 31, 'waiting for PostgreSQL to accept connections'),
    'still waiting for PostgreSQL to accept connections after 60 s (31 checks); Basin waits at most 60 s',
  );
  assert.equal(DEFAULT_RETRY.maxWaitMs, 86_400_000, 'a day: a large base backup takes hours');
});
