import assert from 'node:assert/strict';
import { test } from 'node:test';
import { peers } from './pgbouncer-install.js';

test('peering (several processes on one port) from PgBouncer 1.19 on', () => {
  assert.equal(peers(1, 18), false);
  assert.equal(peers(1, 19), true);
  assert.equal(peers(1, 24), true);
  assert.equal(peers(2, 0), true);
  assert.equal(peers(0, 99), false);
});
