import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Host, Placement } from '../../domain/hosts.js';
import { DONE } from '../../domain/progress.js';
import { silentLogger } from '../../lib/logger.js';
import type { ReplicaSetSpec } from '../driver.js';
import {
  ReplicaSets,
  type ReplicaSetsOptions,
  replicaRows,
  resizeShortfall,
} from './replica-sets.js';

const GIB = 2 ** 30;
const host = (id: string, cpus: number, memoryGib: number): Host => ({
  id,
  role: 'database',
  name: id,
  address: '10.0.0.1',
  agentPort: 9444,
  zone: 'a',
  capacity: { cpus, memoryBytes: memoryGib * GIB, diskBytes: 0 },
  usage: null,
  certSha256: '',
  joinedAt: '',
  heartbeatAt: 0,
});
const row = (resourceId: string, hostId: string, cpuMillis = 500, memoryMb = 2048): Placement => ({
  resourceId,
  hostId,
  cpuMillis,
  memoryMb,
});

test("a set's rows are its nodes' (`<set>:node<i>`), by index, not another set's", () => {
  const rows = [row('s1:node1', 'b'), row('s1:node0', 'a'), row('s10:node0', 'c'), row('s1', 'x')];
  assert.deepEqual(
    replicaRows(rows, 's1').map((p) => p.resourceId),
    ['s1:node0', 's1:node1'],
  );
});

test('a resize is refused where a host of its nodes has no room for them at the new size', () => {
  const hosts = [host('a', 2, 16), host('b', 2, 16)];
  // Two nodes of one set share b; a has one, beside a service of 1000 millis.
  const placements = [
    row('svc', 'a', 1000, 4096),
    row('s:node0', 'a'),
    row('s:node1', 'b'),
    row('s:node2', 'b'),
  ];
  // 1000 millis each: a holds 2000 with the service (fits); b 2000 (fits).
  assert.equal(resizeShortfall(hosts, placements, 's', { cpuMillis: 1000, memoryMb: 4096 }), undefined); // prettier-ignore
  // 2000 millis each: a would hold 3000 of its 2000.
  const why = resizeShortfall(hosts, placements, 's', { cpuMillis: 2000, memoryMb: 8192 });
  assert.match(why ?? '', /^host a, which runs its node0, has 500 millis and \d+ MB free, and 1 node\(s\) of 2000 millis and 8192 MB need 1500 millis and 6144 MB more: choose a smaller size/); // prettier-ignore
  // Without the service, b is the one: two nodes of 2000 on two CPUs.
  const bare = placements.filter((p) => p.resourceId !== 'svc');
  assert.match(
    resizeShortfall(hosts, bare, 's', { cpuMillis: 2000, memoryMb: 8192 }) ?? '',
    /^host b, which runs its node1, node2, .* 2 node\(s\)/,
  );
  // A smaller size always fits where the larger one ran, over-committed or not.
  const full = [...placements, row('other', 'a', 4000, 4096)];
  assert.equal(resizeShortfall(hosts, full, 's', { cpuMillis: 0, memoryMb: 256 }), undefined);
  // A set with no rows yet (not placed): nothing to refuse here.
  assert.equal(resizeShortfall(hosts, [], 's', { cpuMillis: 32000, memoryMb: 131072 }), undefined); // prettier-ignore
});

test('a drain moves every node of a set off the host, one at a time in one converge, and a control plane started anew mid-move resumes it from the rows', async () => {
  let now = 1_000;
  const hosts = ['h0', 'h1', 'h2', 'h3'].map((id, i) => ({
    ...host(id, 4, 32),
    address: `10.0.0.${i + 1}`,
    zone: `z${i}`,
    ...(id === 'h2' ? { draining: true } : {}),
  }));
  // An HA service on h0 and h1; its set's two nodes both on h2, drained.
  let placements: Placement[] = [
    row('svc', 'h0'),
    row('svc:node1', 'h1'),
    row('rs:node0', 'h2'),
    row('rs:node1', 'h2'),
  ];
  const calls: string[] = [];
  const options: ReplicaSetsOptions = {
    hosts: async () => hosts.map((h) => ({ ...h, heartbeatAt: now })),
    placements: {
      list: async () => placements,
      put: async (p) => {
        placements = [...placements.filter((x) => x.resourceId !== p.resourceId), p];
      },
      remove: async (id) => {
        placements = placements.filter((x) => x.resourceId !== id);
      },
    },
    call: async (h, method, args) => {
      if (method === 'deleteService' || method === 'applyReplicaNode') {
        calls.push(`${method} ${String(args[0])} on ${h.id}`);
      }
      return DONE;
    },
    replicationSecret: async () => 'secret',
    applyService: async () => DONE,
    serviceOf: async () => undefined,
    lostAfterMs: 15_000,
    lost: () => false,
    clock: () => now,
    log: silentLogger,
  };
  const spec = {
    replicaSetId: 'rs',
    serviceId: 'svc',
    primary: { serviceId: 'svc', port: 5000, nodes: [{ index: 0, role: 'primary', port: 5001 }, { index: 1, role: 'standby', port: 5002 }] }, // prettier-ignore
    nodePorts: [6001, 6002],
    nodes: 2,
    size: { shared: false, cpuMillis: 500, memoryGbs: 2 },
    port: 6000,
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
  } as unknown as ReplicaSetSpec;
  const converge = async (sets: ReplicaSets, until?: () => boolean) => {
    for (let k = 0; k < 50; k++) {
      const p = await sets.apply(spec, hosts[0] as Host);
      if (p.done) return;
      if (until?.()) return;
      now += p.retryAfterMs;
    }
    assert.fail(`no convergence: ${calls.join('; ')}`);
  };
  // The first node's row is marked moving: the control plane "dies" there.
  await converge(new ReplicaSets(options), () => placements.some((p) => p.movedFrom !== undefined)); // prettier-ignore
  assert.equal(calls.length, 0, calls.join('; '));
  // A process started anew (nothing in memory) goes on from the rows.
  await converge(new ReplicaSets(options));
  const rows = replicaRows(placements, 'rs');
  assert.deepEqual(rows.map((p) => [p.resourceId, p.hostId, p.movedFrom]), [['rs:node0', 'h3', undefined], ['rs:node1', 'h3', undefined]]); // prettier-ignore
  // Each old copy removed before its new one is made, one node after the other.
  const moves = calls.filter((c) => c.startsWith('deleteService') || c.includes(' on h3'));
  for (const c of ['deleteService rsn0 on h2', 'deleteService rsn1 on h2', 'applyReplicaNode rsn0 on h3', 'applyReplicaNode rsn1 on h3']) assert.ok(moves.includes(c), `${c}: ${moves.join('; ')}`); // prettier-ignore
  assert.ok(
    moves.indexOf('deleteService rsn0 on h2') < moves.indexOf('applyReplicaNode rsn0 on h3'),
  );
  assert.ok(
    moves.indexOf('deleteService rsn1 on h2') < moves.indexOf('applyReplicaNode rsn1 on h3'),
  );
  assert.ok(
    moves.indexOf('applyReplicaNode rsn0 on h3') < moves.indexOf('deleteService rsn1 on h2'),
  );
});
