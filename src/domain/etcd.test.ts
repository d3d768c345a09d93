import assert from 'node:assert/strict';
import { test } from 'node:test';
import { desiredMembers, pickMemberHosts } from './etcd.js';

const h = (name: string, zone: string) => ({ id: `id-${name}`, name, zone });

test('three members from three hosts, five from five, none under three', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 9].map(desiredMembers), [0, 0, 0, 3, 3, 5, 5]);
});

test('members go to other zones first, then by name', () => {
  const hosts = [h('a1', 'a'), h('a2', 'a'), h('a3', 'a'), h('b1', 'b'), h('c1', 'c')];
  assert.deepEqual(
    pickMemberHosts(hosts, [], 3).map((x) => x.name),
    ['a1', 'b1', 'c1'],
  );
  assert.deepEqual(
    pickMemberHosts(hosts, [], 5).map((x) => x.name),
    ['a1', 'b1', 'c1', 'a2', 'a3'],
  );
});

test('a replacement goes to the zone the remaining members hold least', () => {
  const candidates = [h('a3', 'a'), h('b2', 'b')];
  const members = [{ zone: 'a' }, { zone: 'c' }];
  assert.deepEqual(
    pickMemberHosts(candidates, members, 1).map((x) => x.name),
    ['b2'],
  );
});
