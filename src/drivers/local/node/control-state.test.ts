import assert from 'node:assert/strict';
import { endianness } from 'node:os';
import { test } from 'node:test';
import { controlState } from './control-state.js';

/** A control file's first bytes as PostgreSQL 15 writes them (the offsets pg_controldata showed). */
function control(state: number, checkpoint: bigint, timeline: number): Buffer {
  const b = Buffer.alloc(8192);
  const le = endianness() === 'LE';
  if (le) {
    b.writeInt32LE(state, 16);
    b.writeBigUInt64LE(checkpoint, 32);
    b.writeUInt32LE(timeline, 48);
  } else {
    b.writeInt32BE(state, 16);
    b.writeBigUInt64BE(checkpoint, 32);
    b.writeUInt32BE(timeline, 48);
  }
  return b;
}

test("a control file says how its PostgreSQL stopped: a primary's clean shutdown, a standby's, or none", () => {
  // 0/1511B00 on timeline 1: a fresh initdb's shutdown checkpoint.
  assert.deepEqual(controlState(control(1, 0x1511b00n, 1)), {
    shutDown: 'primary',
    checkpoint: String(0x1511b00),
    timeline: 1,
  });
  assert.equal(controlState(control(2, 5n, 3)).shutDown, 'standby');
  // In production (running, or crashed), in crash or archive recovery, starting.
  for (const s of [0, 3, 4, 5, 6]) assert.equal(controlState(control(s, 5n, 3)).shutDown, 'other');
  // 64-bit locations are kept whole (decimal).
  assert.equal(controlState(control(1, 2n ** 64n - 1n, 2)).checkpoint, '18446744073709551615');
});
