import assert from 'node:assert/strict';
import { test } from 'node:test';
import { patroniNodeId } from '../driver.js';
import { apiPortOf } from './ha-nodes.js';
import { silentLogger } from '../../lib/logger.js';
import { HostsDriver } from './hosts-driver.js';

const nodes = (...ports: number[]) =>
  ports.map((port, index) => ({ index, role: index === 0 ? 'primary' : 'standby', port }) as const);

test("a node's REST API listens on the next node's port: each node's two ports are distinct and the service's own", () => {
  const spec = { nodes: nodes(40002, 40003, 40004) };
  assert.deepEqual(
    [0, 1, 2].map((i) => apiPortOf(spec, i)),
    [40003, 40004, 40002],
  );
  // Never a node's own PostgreSQL port, whatever the order they are listed in.
  const shuffled = { nodes: [...nodes(5, 6, 7)].reverse() };
  for (const n of shuffled.nodes) assert.notEqual(apiPortOf(shuffled, n.index), n.port);
  assert.throws(() => apiPortOf({ nodes: nodes(5) }, 0), /not a node of an HA service/);
  assert.throws(() => apiPortOf(spec, 7), /not a node of an HA service/);
});

test("a node's resource on its host is never another resource's id, nor another node's", () => {
  const ids = [0, 1, 2].map((i) => patroniNodeId('abcdefghij', i));
  assert.deepEqual(ids, ['abcdefghijn0', 'abcdefghijn1', 'abcdefghijn2']);
  // Resource ids are 10 characters (lib/ids.ts); the local driver's ids are [a-z0-9]{1,32}.
  for (const id of ids) assert.match(id, /^[a-z0-9]{11,32}$/);
});

test('on hosts, a service is under Patroni from its creation or never: setHA may not cross zero replicas', () => {
  const d = new HostsDriver({
    hosts: async () => [],
    placements: {
      list: async () => [],
      get: async () => undefined,
      put: async () => {},
      remove: async () => {},
    },
    identity: async () => ({ cert: '', key: '', ca: '' }),
    lostAfterMs: 15_000,
    clock: () => 0,
    log: silentLogger,
    serviceSpec: async () => undefined,
    forksBeingMade: async () => [],
  });
  assert.equal(d.capabilities.haReplicas, true);
  assert.equal(d.haChangeRefusal(2, 1), undefined);
  assert.equal(d.haChangeRefusal(1, 2), undefined);
  assert.equal(d.haChangeRefusal(0, 0), undefined);
  assert.match(d.haChangeRefusal(0, 2) ?? '', /at its creation only/);
  assert.match(d.haChangeRefusal(2, 0) ?? '', /keeps at least one replica/);
});
