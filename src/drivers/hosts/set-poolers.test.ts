import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setPoolers } from './replica-sets.js';

test("a read replica set's pooler across hosts: one per host, run by the node of the lowest index there", () => {
  const placed = new Map([
    [0, { id: 'h2' }],
    [1, { id: 'h3' }],
    [2, { id: 'h2' }],
  ]);
  const on = setPoolers({ pooler: { enabled: true, port: 6600 } }, placed);
  assert.deepEqual([0, 1, 2].map(on), [{ pooler: { poolers: 2 } }, { pooler: { poolers: 2 } }, {}]);
  // Disabled (or no port): no node runs one.
  const off = setPoolers({ pooler: { enabled: false, port: 6600 } }, placed);
  assert.deepEqual([0, 1, 2].map(off), [{}, {}, {}]);
});
