// The service network's pure rules: which blocks are accepted, the /31 pair
// of each slot, the lowest free slot (so a deleted service's pair is given
// again), and the names of namespaces and veths.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  capacity,
  contains,
  DEFAULT_SERVICE_NETWORK,
  lowestFreeSlot,
  namespaceName,
  overlaps,
  pairOf,
  parseBlock,
  parseCidr,
  vethAlias,
  vethAliasOf,
  vethName,
} from './addresses.js';

test('a block is an IPv4 network of /8 to /30, clear of loopback, link-local and multicast', () => {
  assert.deepEqual(parseBlock(DEFAULT_SERVICE_NETWORK), {
    cidr: '198.18.0.0/15',
    base: 198 * 2 ** 24 + 18 * 2 ** 16,
    prefix: 15,
  });
  assert.equal(parseBlock('10.200.0.0/30').prefix, 30);
  assert.throws(
    () => parseBlock('198.18.0.1/15'),
    /host bits set: did you mean 198\.18\.0\.0\/15\?/,
  );
  assert.throws(() => parseBlock('198.18.0.0/31'), /\/8 to \/30/);
  assert.throws(() => parseBlock('10.0.0.0/7'), /\/8 to \/30/);
  assert.throws(() => parseBlock('127.0.0.0/8'), /overlaps 127\.0\.0\.0\/8/);
  assert.throws(() => parseBlock('169.254.0.0/16'), /overlaps 169\.254/);
  assert.throws(() => parseBlock('224.0.0.0/8'), /overlaps 224/);
  assert.throws(() => parseBlock('fd00::/64'), /not an IPv4 block/);
  assert.throws(() => parseBlock('198.18.0.0'), /not an IPv4 block/);
  assert.throws(() => parseBlock('300.18.0.0/16'), /not an IPv4 block/);
});

test('each slot is a /31: the host side (even) and the namespace side (odd)', () => {
  const b = parseBlock('198.18.0.0/15');
  assert.equal(capacity(b), 65536);
  assert.deepEqual(pairOf(b, 0), { hostAddress: '198.18.0.0', address: '198.18.0.1' });
  assert.deepEqual(pairOf(b, 1), { hostAddress: '198.18.0.2', address: '198.18.0.3' });
  assert.deepEqual(pairOf(b, 128), { hostAddress: '198.18.1.0', address: '198.18.1.1' });
  assert.deepEqual(pairOf(b, 65535), { hostAddress: '198.19.255.254', address: '198.19.255.255' });
  assert.throws(() => pairOf(b, 65536), /outside/);
  assert.throws(() => pairOf(b, -1), /outside/);
  const small = parseBlock('10.9.8.0/30');
  assert.equal(capacity(small), 2);
  assert.deepEqual(pairOf(small, 1), { hostAddress: '10.9.8.2', address: '10.9.8.3' });
});

test('the lowest free slot: unique, and a freed one is given again first', () => {
  const b = parseBlock('10.9.8.0/29'); // 4 slots
  assert.equal(lowestFreeSlot(b, new Set()), 0);
  assert.equal(lowestFreeSlot(b, new Set([0, 1, 3])), 2);
  assert.equal(lowestFreeSlot(b, new Set([1, 2, 3])), 0, 'a deleted service gave 0 back');
  assert.equal(lowestFreeSlot(b, new Set([0, 1, 2, 3])), undefined, 'full');
});

test('names: the namespace by installation and id; the veth 15 characters, unique per both', () => {
  const tag = '0123456789abcdef';
  assert.equal(namespaceName(tag, 'abcdefghij'), 'basin-0123456789abcdef-abcdefghij');
  const v = vethName(tag, 'abcdefghij');
  assert.match(v, /^bsn[0-9a-f]{12}$/);
  assert.equal(v.length, 15);
  assert.equal(vethName(tag, 'abcdefghij'), v, 'stable');
  assert.notEqual(vethName(tag, 'abcdefghik'), v);
  assert.notEqual(vethName('fedcba9876543210', 'abcdefghij'), v);
  assert.deepEqual(vethAliasOf(vethAlias(tag, 'abcdefghij')), {
    installation: tag,
    id: 'abcdefghij',
  });
  assert.equal(vethAliasOf('docker bridge'), undefined);
  assert.equal(vethAliasOf(`basin ${tag} ../etc`), undefined);
});

test('overlaps and contains', () => {
  const block = parseCidr('198.18.0.0/15');
  assert.ok(overlaps(block, parseCidr('198.19.4.0/24')), 'inside');
  assert.ok(overlaps(block, parseCidr('198.0.0.0/8')), 'around');
  assert.ok(overlaps(block, parseCidr('198.18.0.7')), 'an address');
  assert.ok(!overlaps(block, parseCidr('198.20.0.0/16')));
  assert.ok(!overlaps(block, parseCidr('198.17.255.255/32')));
  assert.ok(contains(block, '198.19.255.255'));
  assert.ok(!contains(block, '198.20.0.0'));
  assert.throws(() => parseCidr('::1/128'), /not an IPv4/);
});
