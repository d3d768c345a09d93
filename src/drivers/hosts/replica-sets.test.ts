import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Host, Placement } from '../../domain/hosts.js';
import { replicaRows, resizeShortfall } from './replica-sets.js';

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
