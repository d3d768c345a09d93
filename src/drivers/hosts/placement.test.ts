import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Host, nodePlacements, nodeResourceId, type Placement } from '../../domain/hosts.js';
import {
  chooseHost,
  chooseHosts,
  chooseReplicaHosts,
  haPlacementRefusal,
  reservation,
  roomLeft,
  SHARED_RESERVATION,
} from './placement.js';

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
const placed = (hostId: string, cpuMillis: number, memoryMb: number): Placement => ({
  resourceId: `${hostId}-${cpuMillis}-${memoryMb}`,
  hostId,
  cpuMillis,
  memoryMb,
});

test('a service goes to the host with the most memory left (spread), ties to the first name', () => {
  const hosts = [host('b', 4, 16), host('a', 4, 16), host('c', 4, 16)];
  const need = { cpuMillis: 1000, memoryMb: 4096 };
  assert.equal(chooseHost(hosts, [], need)?.id, 'a');
  assert.equal(chooseHost(hosts, [placed('a', 1000, 4096)], need)?.id, 'b');
  assert.equal(
    chooseHost(hosts, [placed('a', 1000, 4096), placed('b', 1000, 4096)], need)?.id,
    'c',
  );
});

test('a host without room in CPU or in memory is passed over; none with room: undefined', () => {
  const hosts = [host('a', 2, 64), host('b', 8, 8)];
  // a has the memory but its two CPUs are held.
  assert.equal(
    chooseHost(hosts, [placed('a', 2000, 1024)], { cpuMillis: 500, memoryMb: 2048 })?.id,
    'b',
  );
  assert.equal(chooseHost(hosts, [], { cpuMillis: 16_000, memoryMb: 1024 }), undefined);
  assert.equal(chooseHost([], [], { cpuMillis: 0, memoryMb: 1 }), undefined);
});

test('a repository host runs no nodes: never chosen, however much room it has', () => {
  const repository: Host = { ...host('r', 64, 512), role: 'repository' };
  const need = { cpuMillis: 1000, memoryMb: 1024 };
  assert.equal(chooseHost([repository, host('a', 2, 4)], [], need)?.id, 'a');
  assert.equal(chooseHost([repository], [], need), undefined);
});

test('what a size holds of its host: its CPUs and memory; a shared one a share', () => {
  assert.deepEqual(reservation({ shared: false, cpuMillis: 500, memoryGbs: 2 }), {
    cpuMillis: 500,
    memoryMb: 2048,
  });
  assert.deepEqual(reservation({ shared: true, cpuMillis: 0, memoryGbs: 0 }), SHARED_RESERVATION);
});

test("a host's room left: what its placements do not hold, the one being resized set aside", () => {
  const h = host('a', 4, 16);
  const there = [placed('a', 1000, 4096), placed('a', 500, 1024), placed('b', 2000, 8192)];
  assert.deepEqual(roomLeft(h, there), { cpuMillis: 2500, memoryMb: 16 * 1024 - 5120 });
  const resized = (there[0] as Placement).resourceId;
  assert.deepEqual(roomLeft(h, there, resized), { cpuMillis: 3500, memoryMb: 16 * 1024 - 1024 });
});

const inZone = (h: Host, zone: string): Host => ({ ...h, zone });

test("an HA service's nodes each go to a host of their own, other zones first", () => {
  const hosts = [
    inZone(host('a1', 4, 16), 'a'),
    inZone(host('a2', 4, 32), 'a'),
    inZone(host('b1', 4, 8), 'b'),
    inZone(host('c1', 4, 8), 'c'),
  ];
  const need = { cpuMillis: 1000, memoryMb: 1024 };
  // One per zone before a second in any, the most memory left first within a zone.
  assert.deepEqual(
    chooseHosts(hosts, [], need, 3)?.map((h) => h.id),
    ['a2', 'b1', 'c1'],
  );
  // A fourth node: zone a again, on its other host (never a host twice).
  assert.deepEqual(
    chooseHosts(hosts, [], need, 4)?.map((h) => h.id),
    ['a2', 'b1', 'c1', 'a1'],
  );
  assert.equal(chooseHosts(hosts, [], need, 5), undefined);
  // A standby added to a service whose primary is on b1: another zone first, then another host.
  assert.deepEqual(
    chooseHosts(hosts, [], need, 1, [hosts[2] as Host])?.map((h) => h.id),
    ['a2'],
  );
  assert.deepEqual(
    chooseHosts(hosts, [], need, 2, [hosts[2] as Host])?.map((h) => h.id),
    ['a2', 'c1'],
  );
});

test('an HA node passes over hosts without room and repository hosts', () => {
  const repository: Host = { ...host('r', 64, 512), role: 'repository' };
  const hosts = [host('a', 2, 64), host('b', 8, 8), host('c', 8, 8), repository];
  const need = { cpuMillis: 500, memoryMb: 2048 };
  assert.deepEqual(
    chooseHosts(hosts, [placed('a', 2000, 1024)], need, 2)?.map((h) => h.id),
    ['b', 'c'],
  );
  assert.equal(chooseHosts(hosts, [placed('a', 2000, 1024)], need, 3), undefined);
});

test('an HA placement is refused, saying why, without enough hosts or without etcd quorum', () => {
  const hosts = [host('a', 4, 16), host('b', 4, 16)];
  const need = { cpuMillis: 1000, memoryMb: 1024 };
  const base = { online: hosts, placements: [], need, etcdQuorum: true };
  assert.equal(haPlacementRefusal({ ...base, nodes: 2 }), undefined);
  assert.match(
    haPlacementRefusal({ ...base, nodes: 3 }) ?? '',
    /needs 3 database hosts online, one per node.*2 are online: ask for fewer replicas/,
  );
  assert.match(
    haPlacementRefusal({ ...base, nodes: 2, need: { cpuMillis: 8000, memoryMb: 1 } }) ?? '',
    /not enough of them have room/,
  );
  assert.match(haPlacementRefusal({ ...base, nodes: 2, etcdQuorum: false }) ?? '', /no quorum/);
  // Nothing more to place: nothing to refuse.
  assert.equal(
    haPlacementRefusal({ ...base, nodes: 2, taken: hosts, etcdQuorum: false }),
    undefined,
  );
});

test("a service's nodes' placement ids: the service's own for node 0, one per standby", () => {
  assert.equal(nodeResourceId('svc1', 0), 'svc1');
  assert.equal(nodeResourceId('svc1', 2), 'svc1:node2');
  const rows = [
    placed('x', 1, 1),
    { ...placed('b', 1, 1), resourceId: 'svc1:node2' },
    { ...placed('a', 1, 1), resourceId: 'svc1' },
    { ...placed('c', 1, 1), resourceId: 'svc10' },
    { ...placed('c', 1, 1), resourceId: 'svc1:node1' },
  ];
  assert.deepEqual(
    nodePlacements(rows, 'svc1').map((p) => p.resourceId),
    ['svc1', 'svc1:node1', 'svc1:node2'],
  );
});

test("a read replica set's nodes: never on its service's host, other zones first, spread, sharing a host only when it must", () => {
  const zoned = (id: string, zone: string, memoryGib = 16): Host => ({
    ...host(id, 4, memoryGib),
    zone,
  });
  const [p, a, b, c] = [zoned('p', 'z1'), zoned('a', 'z1'), zoned('b', 'z2'), zoned('c', 'z3')];
  const need = { cpuMillis: 1000, memoryMb: 1024 };
  // Two nodes: the other zones' hosts, not the primary's zone's, never the primary's host.
  assert.deepEqual(
    chooseReplicaHosts([p, a, b, c], [], need, 2, [p])?.map((h) => h.id),
    ['b', 'c'],
  );
  // Three: then the primary's zone.
  assert.deepEqual(
    chooseReplicaHosts([p, a, b, c], [], need, 3, [p])
      ?.map((h) => h.id)
      .sort(),
    ['a', 'b', 'c'],
  );
  // More nodes than hosts: they share, evenly.
  const four = chooseReplicaHosts([p, b, c], [], need, 4, [p])?.map((h) => h.id);
  assert.deepEqual(four?.sort(), ['b', 'b', 'c', 'c']);
  // Nodes already placed count (a converge again places only the missing).
  assert.deepEqual(
    chooseReplicaHosts([p, b, c], [], need, 1, [p], [b])?.map((h) => h.id),
    ['c'],
  );
  // Room runs out as nodes are picked: b holds one node of 3 GB, not two.
  const small = zoned('b', 'z2', 4);
  const big = { cpuMillis: 1000, memoryMb: 3072 };
  assert.equal(chooseReplicaHosts([p, small], [], big, 2, [p]), undefined);
  assert.deepEqual(
    chooseReplicaHosts([p, small], [], big, 1, [p])?.map((h) => h.id),
    ['b'],
  );
  // Only the primary's host: none.
  assert.equal(chooseReplicaHosts([p], [], need, 1, [p]), undefined);
});
