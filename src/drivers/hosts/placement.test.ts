import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Host, Placement } from '../../domain/hosts.js';
import { chooseHost, reservation, roomLeft, SHARED_RESERVATION } from './placement.js';

const GIB = 2 ** 30;
const host = (id: string, cpus: number, memoryGib: number): Host => ({
  id,
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
