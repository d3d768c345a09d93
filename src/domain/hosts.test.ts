import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostResourcesOf, nodeResourceId } from './hosts.js';

test("what a host keeps for a placement: the service, or the Patroni node of the row's index", () => {
  assert.deepEqual(hostResourcesOf('abcdefghij'), ['abcdefghij', 'abcdefghijn0']);
  assert.deepEqual(hostResourcesOf(nodeResourceId('abcdefghij', 2)), ['abcdefghijn2']);
  assert.deepEqual(hostResourcesOf(nodeResourceId('abcdefghij', 1)), ['abcdefghijn1']);
});
