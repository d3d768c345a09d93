import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Cidr, format, MAX_PREFIX, MIN_PREFIX, overlaps, parseVpcCidr } from './cidr.js';

const ip = (a: number, b: number, c: number, d: number) =>
  ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;

test('private blocks from /16 to /28 parse and print back in canonical form', () => {
  const good: [string, Cidr][] = [
    ['10.0.0.0/16', { network: ip(10, 0, 0, 0), prefix: 16 }],
    ['10.255.0.0/16', { network: ip(10, 255, 0, 0), prefix: 16 }],
    ['10.1.2.0/24', { network: ip(10, 1, 2, 0), prefix: 24 }],
    ['10.1.2.16/28', { network: ip(10, 1, 2, 16), prefix: 28 }],
    ['172.16.0.0/16', { network: ip(172, 16, 0, 0), prefix: 16 }],
    ['172.31.255.240/28', { network: ip(172, 31, 255, 240), prefix: 28 }],
    ['192.168.0.0/16', { network: ip(192, 168, 0, 0), prefix: 16 }],
    ['192.168.100.0/22', { network: ip(192, 168, 100, 0), prefix: 22 }],
  ];
  for (const [text, cidr] of good) {
    const parsed = parseVpcCidr(text);
    assert.deepEqual(parsed, cidr, text);
    assert.equal(format(parsed), text, 'canonical form round-trips');
    assert.ok(parsed.network >= 0, 'unsigned');
  }
  assert.equal(MIN_PREFIX, 16);
  assert.equal(MAX_PREFIX, 28);
});

test('format prints any block in dotted-quad form', () => {
  assert.equal(format({ network: ip(255, 255, 255, 0), prefix: 24 }), '255.255.255.0/24');
  assert.equal(format({ network: 0, prefix: 0 }), '0.0.0.0/0');
  assert.equal(format({ network: ip(10, 0, 0, 0), prefix: 8 }), '10.0.0.0/8');
});

test('malformed blocks are INVALID_REQUEST with an example in the message', () => {
  for (const text of [
    '',
    '10.0.0.0',
    '10.0.0/16',
    '10.0.0.0.0/16',
    '10.0.0.0/',
    '/16',
    '256.0.0.0/16',
    '10.0.300.0/24',
    '010.0.0.0/16',
    '10.00.0.0/16',
    ' 10.0.0.0/16',
    '10.0.0.0/16 ',
    '10.0.0.0/016',
    'a.b.c.d/16',
    '10.0.0.0/1a',
    '::1/128',
    'fd00::/16',
    '10.0.0.0\n/16',
  ]) {
    assert.throws(
      () => parseVpcCidr(text),
      {
        code: 'INVALID_REQUEST',
        message: /cidr must be an IPv4 block like 10\.0\.0\.0\/16/,
      },
      JSON.stringify(text),
    );
  }
});

test('prefixes outside /16 to /28 are refused', () => {
  for (const text of [
    '10.0.0.0/8',
    '10.0.0.0/15',
    '10.0.0.0/0',
    '10.0.0.0/29',
    '10.0.0.0/32',
    '10.0.0.0/99',
  ]) {
    assert.throws(
      () => parseVpcCidr(text),
      {
        code: 'INVALID_REQUEST',
        message: /cidr prefix must be between \/16 and \/28/,
      },
      text,
    );
  }
});

test('host bits set: refused with the aligned block suggested', () => {
  assert.throws(() => parseVpcCidr('10.0.0.1/16'), {
    code: 'INVALID_REQUEST',
    message: /has host bits set; did you mean 10\.0\.0\.0\/16\?/,
  });
  assert.throws(() => parseVpcCidr('192.168.1.17/28'), {
    message: /did you mean 192\.168\.1\.16\/28\?/,
  });
  assert.throws(() => parseVpcCidr('172.16.5.0/16'), {
    message: /did you mean 172\.16\.0\.0\/16\?/,
  });
});

test('public ranges and the edges of the private ones are refused', () => {
  for (const text of [
    '8.8.0.0/16',
    '11.0.0.0/16',
    '9.255.0.0/16',
    '172.15.0.0/16',
    '172.32.0.0/16',
    '192.167.0.0/16',
    '192.169.0.0/16',
    '127.0.0.0/16',
    '100.64.0.0/16',
    '169.254.0.0/16',
    '0.0.0.0/16',
    '255.255.0.0/16',
  ]) {
    assert.throws(
      () => parseVpcCidr(text),
      {
        code: 'INVALID_REQUEST',
        message: /is not a private range/,
      },
      text,
    );
  }
});

test('overlaps: nested and equal blocks overlap, disjoint ones do not', () => {
  const c = parseVpcCidr;
  assert.equal(overlaps(c('10.0.0.0/16'), c('10.0.0.0/16')), true);
  assert.equal(overlaps(c('10.0.0.0/16'), c('10.0.1.0/24')), true);
  assert.equal(overlaps(c('10.0.1.0/24'), c('10.0.0.0/16')), true);
  assert.equal(overlaps(c('10.0.0.0/16'), c('10.0.255.240/28')), true);
  assert.equal(overlaps(c('10.0.0.0/16'), c('10.1.0.0/16')), false);
  assert.equal(overlaps(c('10.0.0.0/24'), c('10.0.1.0/24')), false);
  assert.equal(overlaps(c('10.0.0.0/16'), c('192.168.0.0/16')), false);
  assert.equal(overlaps(c('192.168.0.0/28'), c('192.168.0.16/28')), false);
});
