import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodePoolSizes } from './patroni-pooler.js';

test("an HA service's poolers across hosts divide one pooler's server connections among its nodes", () => {
  // Three hosts' poolers reach one leader: together no more than one pooler takes.
  assert.deepEqual(nodePoolSizes({ session: 25, transaction: 25, maxClients: 500 }, 3), {
    session: 8,
    transaction: 8,
    maxClients: 500,
  });
  // At least one each, whatever the count.
  assert.deepEqual(nodePoolSizes({ session: 2, transaction: 2, maxClients: 250 }, 3), {
    session: 1,
    transaction: 1,
    maxClients: 250,
  });
  assert.deepEqual(nodePoolSizes({ session: 12, transaction: 12, maxClients: 250 }, 0).session, 12);
});
