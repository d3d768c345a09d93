import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_SIZES, describe, pickSize, SHARED, type SizeRequest } from './sizes.js';
import type { Size } from './types.js';

const dedicated = (cpuMillis: number, memoryGbs: number): Size => ({
  shared: false,
  cpuMillis,
  memoryGbs,
});
const SHARED_SIZE: Size = { shared: true, cpuMillis: 0, memoryGbs: 0 };

test('the default catalogue is the one docs/architecture.md §8 fixes', () => {
  assert.deepEqual(DEFAULT_SIZES, [
    SHARED_SIZE,
    dedicated(500, 2),
    dedicated(1000, 4),
    dedicated(2000, 8),
    dedicated(4000, 16),
    dedicated(8000, 32),
    dedicated(16000, 64),
    dedicated(32000, 128),
  ]);
  assert.equal(SHARED, 'shared');
});

test('nothing asked means no size (the caller applies its default)', () => {
  assert.equal(pickSize(DEFAULT_SIZES, {}, true), undefined);
  assert.equal(pickSize(DEFAULT_SIZES, { cpu: undefined, memory: undefined }, false), undefined);
});

test('picking sizes: pairs, one value alone, strings and numbers', () => {
  const cases: [SizeRequest, Size][] = [
    [{ cpu: '1000', memory: '4' }, dedicated(1000, 4)],
    [{ cpu: '500', memory: '2' }, dedicated(500, 2)],
    [{ cpu: '32000', memory: '128' }, dedicated(32000, 128)],
    // Only one of the two picks the matching pair.
    [{ cpu: '2000' }, dedicated(2000, 8)],
    [{ memory: '16' }, dedicated(4000, 16)],
    [{ cpu: '8000', memory: undefined }, dedicated(8000, 32)],
    // Numbers (replica set creation sends numbers).
    [{ cpu: 1000, memory: 4 }, dedicated(1000, 4)],
    [{ memory: 64 }, dedicated(16000, 64)],
    // Tolerated spellings of a number.
    [{ cpu: ' 1000 ', memory: '4.0' }, dedicated(1000, 4)],
  ];
  for (const [req, size] of cases) {
    assert.deepEqual(pickSize(DEFAULT_SIZES, req, false), size, JSON.stringify(req));
  }
});

test('shared: accepted only when allowed, and then on both or either side', () => {
  assert.deepEqual(pickSize(DEFAULT_SIZES, { cpu: 'shared', memory: 'shared' }, true), SHARED_SIZE);
  assert.deepEqual(pickSize(DEFAULT_SIZES, { cpu: 'shared' }, true), SHARED_SIZE);
  assert.deepEqual(pickSize(DEFAULT_SIZES, { memory: 'shared' }, true), SHARED_SIZE);
  for (const req of [
    { cpu: 'shared', memory: 'shared' },
    { cpu: 'shared' },
    { memory: 'shared' },
  ]) {
    assert.throws(() => pickSize(DEFAULT_SIZES, req, false), {
      code: 'INVALID_REQUEST',
      message: /shared size is only for creating or forking.*500m\/2GB, 1000m\/4GB/,
    });
  }
});

test('shared mixed with a number is refused', () => {
  for (const req of [
    { cpu: 'shared', memory: '4' },
    { cpu: '1000', memory: 'shared' },
    { cpu: 'shared', memory: 4 },
  ]) {
    assert.throws(() => pickSize(DEFAULT_SIZES, req, true), {
      code: 'INVALID_REQUEST',
      message: /must both be "shared"/,
    });
  }
});

test('a catalogue without a shared size refuses shared', () => {
  const noShared = DEFAULT_SIZES.filter((s) => !s.shared);
  assert.throws(() => pickSize(noShared, { cpu: 'shared', memory: 'shared' }, true), {
    code: 'INVALID_REQUEST',
    message: /offers no shared size/,
  });
});

test('unknown sizes and mismatched pairs are refused with the catalogue in the message', () => {
  const cases: [SizeRequest, RegExp][] = [
    [{ cpu: '3000' }, /No size offers 3000m CPU;/],
    [{ memory: '3' }, /No size offers 3 GB memory;/],
    [{ cpu: '1000', memory: '8' }, /No size offers 1000m CPU with 8 GB memory;/],
    [{ cpu: 1000, memory: 2 }, /No size offers 1000m CPU with 2 GB memory;/],
  ];
  for (const [req, message] of cases) {
    assert.throws(
      () => pickSize(DEFAULT_SIZES, req, true),
      (err: any) => {
        assert.equal(err.code, 'INVALID_REQUEST');
        assert.match(err.message, message);
        assert.match(err.message, /choose one of 500m\/2GB, 1000m\/4GB, 2000m\/8GB/);
        return true;
      },
    );
  }
});

test('values that are not positive numbers are refused, naming the field', () => {
  const bad: [SizeRequest, RegExp][] = [
    [{ cpu: 'abc' }, /cpu_millis must be a positive number of milli-cores/],
    [{ cpu: '' }, /cpu_millis/],
    [{ cpu: '-1000' }, /cpu_millis/],
    [{ cpu: '0' }, /cpu_millis/],
    [{ cpu: '1e3' }, /cpu_millis/],
    [{ cpu: '1000m' }, /cpu_millis/],
    [{ cpu: 0 }, /cpu_millis/],
    [{ cpu: -1000 }, /cpu_millis/],
    [{ cpu: Number.NaN }, /cpu_millis/],
    [{ cpu: Number.POSITIVE_INFINITY }, /cpu_millis/],
    [{ memory: '4GB' }, /memory_gbs must be a positive number of gigabytes/],
    [{ cpu: '1000', memory: 'four' }, /memory_gbs/],
  ];
  for (const [req, message] of bad) {
    assert.throws(() => pickSize(DEFAULT_SIZES, req, true), { code: 'INVALID_REQUEST', message });
  }
});

test('describe lists the dedicated sizes', () => {
  assert.equal(
    describe(DEFAULT_SIZES),
    '500m/2GB, 1000m/4GB, 2000m/8GB, 4000m/16GB, 8000m/32GB, 16000m/64GB, 32000m/128GB',
  );
  assert.equal(describe([SHARED_SIZE, dedicated(250, 0.5)]), '250m/0.5GB');
});

test('a custom catalogue is honoured', () => {
  const custom = [dedicated(250, 0.5), dedicated(250, 1), dedicated(750, 3)];
  assert.deepEqual(pickSize(custom, { cpu: '750' }, false), dedicated(750, 3));
  assert.deepEqual(pickSize(custom, { memory: '0.5' }, false), dedicated(250, 0.5));
  // Only one value, several matches: the first in catalogue order.
  assert.deepEqual(pickSize(custom, { cpu: '250' }, false), dedicated(250, 0.5));
  assert.deepEqual(pickSize(custom, { cpu: '250', memory: '1' }, false), dedicated(250, 1));
  assert.throws(() => pickSize(custom, { cpu: '1000' }, false), { code: 'INVALID_REQUEST' });
});
