// The start check: the service network may not collide with an address or
// route of the host, other than this installation's own veths.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBlock } from './addresses.js';
import { conflicts, describeEntry, type HostEntry } from './host-routes.js';

const block = parseBlock('198.18.0.0/15');

test('an address or route in (or around) the block collides; the default route and our veths do not', () => {
  const host: HostEntry[] = [
    { kind: 'address', cidr: '127.0.0.1/8', dev: 'lo' },
    { kind: 'address', cidr: '192.0.2.2/24', dev: 'eth0' },
    { kind: 'route', cidr: 'default', dev: 'eth0' },
    { kind: 'route', cidr: '0.0.0.0/0', dev: 'eth0' },
    { kind: 'address', cidr: '198.18.0.0/31', dev: 'bsnaaaaaaaaaaaa' },
    { kind: 'route', cidr: '198.18.0.0/31', dev: 'bsnaaaaaaaaaaaa' },
    { kind: 'address', cidr: '198.19.7.1/24', dev: 'tun0' },
    { kind: 'route', cidr: '198.0.0.0/8', dev: 'wg0' },
    { kind: 'route', cidr: '198.18.4.0/31' },
    { kind: 'route', cidr: 'fe80::/64', dev: 'eth0' },
    { kind: 'address', cidr: '198.18.2.0/31', dev: 'bsnbbbbbbbbbbbb' },
  ];
  const found = conflicts(block, host, new Set(['bsnaaaaaaaaaaaa']));
  assert.deepEqual(found.map(describeEntry), [
    'address 198.19.7.1/24 on tun0',
    'route 198.0.0.0/8 on wg0',
    'route 198.18.4.0/31',
    // Another installation's veth: two installations may not share a block.
    'address 198.18.2.0/31 on bsnbbbbbbbbbbbb',
  ]);
  assert.deepEqual(conflicts(block, host.slice(0, 6), new Set(['bsnaaaaaaaaaaaa'])), []);
});
