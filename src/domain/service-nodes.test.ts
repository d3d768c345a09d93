import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  droppedNodes,
  failoverCandidate,
  lsnValue,
  nodesOf,
  observeNodes,
  planNodes,
  primaryOf,
  promoteNode,
  type ServiceNode,
} from './service-nodes.js';
import type { Service } from './types.js';

const svc = (over: Partial<Service> = {}): Service => ({
  id: 'svc0000001',
  projectId: 'prj0000001',
  name: 'a',
  regionCode: 'us-east-1',
  type: 'POSTGRES',
  vector: false,
  status: 'READY',
  environment: 'DEV',
  size: { shared: true, cpuMillis: 0, memoryGbs: 0 },
  port: 16000,
  pooler: { enabled: false, port: null },
  vpcId: null,
  forkedFrom: null,
  ha: { replicaCount: 0, syncReplicaCount: 0 },
  passwordVerifier: 'x',
  createdAt: '2026-01-01T00:00:00Z',
  version: 1,
  ...over,
});

let next = 17000;
const ports = async (_index: number) => next++;

describe('nodes', () => {
  test('a service recorded before nodes has its primary, node 0, on its port', () => {
    assert.deepEqual(nodesOf(svc()), [{ index: 0, role: 'primary', port: 16000, observed: null }]);
  });

  test('replicas: every node gets a port of its own; none: the primary takes the service port back', async () => {
    next = 17000;
    const two = await planNodes(svc(), { replicaCount: 2, syncReplicaCount: 1 }, ports);
    assert.deepEqual(
      two.map((n) => [n.index, n.role, n.port]),
      [
        [0, 'primary', 17000],
        [1, 'standby', 17001],
        [2, 'standby', 17002],
      ],
    );
    const one = await planNodes(
      svc({ nodes: two }),
      { replicaCount: 1, syncReplicaCount: 0 },
      ports,
    );
    assert.deepEqual(
      one.map((n) => n.index),
      [0, 1],
    );
    assert.deepEqual(
      droppedNodes(svc({ nodes: two }), one).map((n) => n.index),
      [2],
    );
    const none = await planNodes(
      svc({ nodes: two }),
      { replicaCount: 0, syncReplicaCount: 0 },
      ports,
    );
    assert.deepEqual(none, [{ ...two[0], port: 16000 }]);
  });

  test('after a failover the recorded primary is kept, and new standbys take fresh indices', async () => {
    const nodes: ServiceNode[] = [
      { index: 0, role: 'standby', port: 17000, observed: null },
      { index: 1, role: 'primary', port: 17001, observed: null },
    ];
    const none = await planNodes(svc({ nodes }), { replicaCount: 0, syncReplicaCount: 0 }, ports);
    assert.deepEqual(
      none.map((n) => [n.index, n.role, n.port]),
      [[1, 'primary', 16000]],
    );
    const three = await planNodes(svc({ nodes }), { replicaCount: 2, syncReplicaCount: 0 }, ports);
    assert.deepEqual(
      three.map((n) => [n.index, n.role]),
      [
        [1, 'primary'],
        [0, 'standby'],
        [2, 'standby'],
      ],
    );
  });

  test('promoteNode swaps the roles; promoting the primary or an unknown node does nothing', () => {
    const s = svc({
      nodes: [
        { index: 0, role: 'primary', port: 1, observed: null },
        { index: 1, role: 'standby', port: 2, observed: null },
      ],
    });
    const promoted = promoteNode(s, 1);
    assert.ok(promoted);
    assert.equal(primaryOf(promoted).index, 1);
    assert.equal(nodesOf(promoted).find((n) => n.index === 0)?.role, 'standby');
    assert.equal(promoteNode(s, 0), undefined);
    assert.equal(promoteNode(s, 7), undefined);
  });

  test('the failover candidate is the standby that received the most WAL; silent ones never', () => {
    assert.equal(
      failoverCandidate([
        { index: 1, lsn: '0/B09CE60' },
        { index: 2, lsn: '1/0' },
        { index: 3, lsn: null },
      ]),
      2,
    );
    assert.equal(failoverCandidate([{ index: 1, lsn: null }]), undefined);
    assert.equal(
      failoverCandidate([
        { index: 2, lsn: '0/10' },
        { index: 1, lsn: '0/10' },
      ]),
      1,
    );
    assert.equal(lsnValue('16/B374D848'), (0x16n << 32n) + 0xb374d848n);
    assert.equal(lsnValue('nonsense'), undefined);
  });

  test('observeNodes records changes only', () => {
    const at = '2026-01-01T00:00:00Z';
    const o = {
      ready: true,
      actsAs: 'primary' as const,
      timeline: 1,
      lsn: '0/1',
      lagBytes: null,
      at,
    };
    const s = svc();
    const seen = observeNodes(s, new Map([[0, o]]));
    assert.ok(seen);
    assert.deepEqual(nodesOf(seen)[0]?.observed, o);
    assert.equal(
      observeNodes(seen, new Map([[0, { ...o, at: '2026-01-02T00:00:00Z' }]])),
      undefined,
    );
  });
});
