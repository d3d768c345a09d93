import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostResourcesOf, hostState, nodeResourceId } from './hosts.js';

test("what a host keeps for a placement: the service, or the Patroni node of the row's index", () => {
  assert.deepEqual(hostResourcesOf('abcdefghij'), ['abcdefghij', 'abcdefghijn0']);
  assert.deepEqual(hostResourcesOf(nodeResourceId('abcdefghij', 2)), ['abcdefghijn2']);
  assert.deepEqual(hostResourcesOf(nodeResourceId('abcdefghij', 1)), ['abcdefghijn1']);
});

test('a host silent longer than it may is LOST; within it, ONLINE', () => {
  assert.equal(hostState({ heartbeatAt: 1_000 }, 10_000, 9_000), 'ONLINE');
  assert.equal(hostState({ heartbeatAt: 1_000 }, 10_001, 9_000), 'LOST');
});

test('silence from before the judge listened is not counted (a control plane restarted)', () => {
  // Its last report was 60 s ago, but the control plane listens since 5 s ago.
  assert.equal(hostState({ heartbeatAt: 0 }, 60_000, 15_000, 55_000), 'ONLINE');
  // Silent for 15 s of the time it listened: lost.
  assert.equal(hostState({ heartbeatAt: 0 }, 70_001, 15_000, 55_000), 'LOST');
  // A report after the judge began counts as ever.
  assert.equal(hostState({ heartbeatAt: 58_000 }, 70_001, 15_000, 55_000), 'ONLINE');
});
