import assert from 'node:assert/strict';
import { test } from 'node:test';
import { etcdLeaderTarget, type EtcdLeaderMember, primariesByAddress } from './etcd-leader.js';

const member = (id: string, address: string, leader = false, healthy = true): EtcdLeaderMember => ({
  id,
  address,
  leader,
  healthy,
});
const api = (address: string) => JSON.stringify({ api_url: `https://${address}:6001/patroni` });

test("Patroni's leaders counted by their hosts' addresses, from the keys under the namespace", () => {
  const keys = [
    { key: '/basin/s1/leader', value: 'node0' },
    { key: '/basin/s1/members/node0', value: api('10.0.0.2') },
    { key: '/basin/s1/members/node1', value: api('10.0.0.3') },
    { key: '/basin/s2/leader', value: 'node1' },
    { key: '/basin/s2/members/node0', value: api('10.0.0.3') },
    { key: '/basin/s2/members/node1', value: api('10.0.0.2') },
    { key: '/basin/s3/leader', value: 'node2' },
    { key: '/basin/s3/members/node2', value: api('10.0.0.4') },
    // Not counted: a leader whose member key is gone or unreadable, keys of other prefixes.
    { key: '/basin/s4/leader', value: 'node0' },
    { key: '/basin/s5/leader', value: 'node0' },
    { key: '/basin/s5/members/node0', value: 'not json' },
    { key: '/other/s6/leader', value: 'node0' },
    { key: '/other/s6/members/node0', value: api('10.0.0.4') },
    { key: '/basin/s1/config', value: '{}' },
    { key: '/basin/s7/leader', value: 'node0' },
    { key: '/basin/s7/members/node0', value: api('[fd00::5]') },
  ];
  assert.deepEqual([...primariesByAddress('/basin/', keys)].sort(), [
    ['10.0.0.2', 2],
    ['10.0.0.4', 1],
    ['fd00::5', 1],
  ]);
});

test("etcd's leader moves to the healthy member whose host runs the fewest primaries", () => {
  const members = [member('a', '10.0.0.2', true), member('b', '10.0.0.3'), member('c', '10.0.0.4')];
  // The leader on the only primary's host: to the first of the others by id.
  assert.equal(etcdLeaderTarget(members, new Map([['10.0.0.2', 1]])), 'b');
  // Fewest wins over the id.
  assert.equal(
    etcdLeaderTarget(
      members,
      new Map([
        ['10.0.0.2', 3],
        ['10.0.0.3', 2],
        ['10.0.0.4', 1],
      ]),
    ),
    'c',
  );
  // An unhealthy member is never the target.
  assert.equal(
    etcdLeaderTarget(
      [
        member('a', '10.0.0.2', true),
        member('b', '10.0.0.3', false, false),
        member('c', '10.0.0.4'),
      ],
      new Map([
        ['10.0.0.2', 1],
        ['10.0.0.4', 1],
      ]),
    ),
    undefined,
  );
});

test("etcd's leader stays: no primaries, the leader's host no worse than any, no leader, no healthy other", () => {
  const members = [member('a', '10.0.0.2', true), member('b', '10.0.0.3'), member('c', '10.0.0.4')];
  assert.equal(etcdLeaderTarget(members, new Map()), undefined);
  assert.equal(etcdLeaderTarget(members, new Map([['10.0.0.3', 1]])), undefined);
  assert.equal(
    etcdLeaderTarget(
      members,
      new Map([
        ['10.0.0.2', 1],
        ['10.0.0.3', 1],
        ['10.0.0.4', 1],
      ]),
    ),
    undefined,
  );
  assert.equal(
    etcdLeaderTarget(
      members.map((m) => ({ ...m, leader: false })),
      new Map([['10.0.0.2', 1]]),
    ),
    undefined,
  );
  assert.equal(
    etcdLeaderTarget([member('a', '10.0.0.2', true)], new Map([['10.0.0.2', 1]])),
    undefined,
  );
});
