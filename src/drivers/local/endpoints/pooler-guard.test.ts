// Failed logins at a pooler, per client address (pooler-guard.ts): which
// log lines count, and when an address is blocked and let in again.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Blocks, FailedLogins, failedLoginAddress, sameAddresses } from './pooler-guard.js';

const failed = (addr: string, what = 'password authentication failed') =>
  `2026-11-28 03:01:25.603 UTC [21795] ERROR C-0x55c33493bc30: tsdb/tsdbadmin@${addr}:60760 ${what}`;

test("PgBouncer's failed logins and their addresses; nothing else counts", () => {
  assert.equal(failedLoginAddress(failed('10.1.2.3')), '10.1.2.3');
  assert.equal(failedLoginAddress(failed('[2001:DB8::7]')), '2001:db8::7');
  assert.equal(failedLoginAddress(failed('[::ffff:10.1.2.3]')), '10.1.2.3');
  assert.equal(
    failedLoginAddress(
      '2026-11-28 03:01:25.652 UTC [21795] LOG C-0x55c33493bc30: (nodb)/(nouser)@10.1.2.4:60776 no such user: other',
    ),
    '10.1.2.4',
  );
  assert.equal(failedLoginAddress(failed('10.1.2.5', 'SASL authentication failed')), '10.1.2.5');
  for (const line of [
    failed('10.1.2.3', 'login rejected'), // already refused: not a guess
    failed('999.1.2.3'),
    failed('[not-an-address]'),
    '2026-11-28 03:01:24.590 UTC [21795] LOG listening on 127.0.0.1:16399',
    'password authentication failed @10.1.2.3:1',
    '',
  ]) {
    assert.equal(failedLoginAddress(line), undefined, line);
  }
});

test('20 failed logins of one address within a minute block it for 5 minutes; others are not held back', () => {
  const logins = new FailedLogins({ maxFailures: 20, windowMs: 60_000, blockMs: 300_000 });
  let now = 1_000_000;
  let blocks: Blocks = {};
  // 19 in the window, and another address's failures beside them: no block.
  for (let i = 0; i < 19; i++) {
    blocks = logins.note([failed('10.0.0.1'), failed('10.0.0.2')], blocks, now);
    now += 1_000;
  }
  assert.deepEqual(blocks, {});
  // The first of them leaves the window as the 20th comes: still 19.
  now += 41_000;
  blocks = logins.note([failed('10.0.0.1')], blocks, now);
  assert.deepEqual(blocks, {});
  blocks = logins.note([failed('10.0.0.1')], blocks, now);
  assert.deepEqual(blocks, { '10.0.0.1': now + 300_000 });
  // More failures while blocked do not lengthen it.
  const until = blocks['10.0.0.1'];
  blocks = logins.note([failed('10.0.0.1'), failed('10.0.0.1')], blocks, now + 10_000);
  assert.deepEqual(blocks, { '10.0.0.1': until });
  // It expires; counting starts afresh.
  blocks = logins.note([failed('10.0.0.1')], blocks, now + 300_001);
  assert.deepEqual(blocks, {});
  // Twenty in one look are as many as twenty looks.
  blocks = logins.note(Array(20).fill(failed('10.0.0.3')), blocks, now + 400_000);
  assert.deepEqual(Object.keys(blocks), ['10.0.0.3']);
});

test('blocks written by someone else are checked: expired and malformed addresses go', () => {
  const logins = new FailedLogins({ maxFailures: 2, windowMs: 1_000, blockMs: 5_000 });
  const kept = logins.note(
    [],
    { '10.0.0.1': 2_000, '10.0.0.2': 500, 'not an address': 9_000 },
    1_000,
  );
  assert.deepEqual(kept, { '10.0.0.1': 2_000 });
  assert.ok(sameAddresses(kept, { '10.0.0.1': 7 }));
  assert.ok(!sameAddresses(kept, {}));
});
