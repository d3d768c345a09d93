import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkHa,
  checkName,
  checkPassword,
  isRfc3339,
  MAX_HA_REPLICAS,
  NAME_MAX,
  PASSWORD_MAX,
  PASSWORD_MIN,
  typeFromAddons,
} from './service-rules.js';
import type { Addon, HaConfig, ServiceType } from './types.js';

test('typeFromAddons follows docs/architecture.md §8', () => {
  const table: [Addon[] | undefined, ServiceType, boolean][] = [
    [undefined, 'TIMESERIESDB', false],
    [[], 'POSTGRES', false],
    [['ai'], 'VECTOR', true],
    [['time-series'], 'TIMESERIESDB', false],
    [['time-series', 'ai'], 'TIMESERIESDB', true],
    [['ai', 'time-series'], 'TIMESERIESDB', true],
  ];
  for (const [addons, type, vector] of table) {
    assert.deepEqual(typeFromAddons(addons), { type, vector }, JSON.stringify(addons));
  }
});

test('checkName accepts 1 to 128 characters and returns the name unchanged', () => {
  assert.equal(NAME_MAX, 128);
  for (const name of [
    'a',
    'my db',
    ' padded ',
    'x'.repeat(128),
    'é'.repeat(128),
    '数据库',
    '🐘'.repeat(128),
  ]) {
    assert.equal(checkName('name', name), name);
  }
});

test('checkName refuses empty, blank, too long and control characters, naming the field', () => {
  const bad: [string, RegExp][] = [
    ['', /^name must not be empty\.$/],
    ['   ', /must not be empty/],
    ['\t', /must not be empty/],
    ['x'.repeat(129), /^name must be at most 128 characters\.$/],
    ['é'.repeat(129), /at most 128 characters/],
    ['a\nb', /must not contain control characters/],
    ['a\u0000b', /control characters/],
    ['a\u007fb', /control characters/],
  ];
  for (const [name, message] of bad) {
    assert.throws(
      () => checkName('name', name),
      { code: 'INVALID_REQUEST', message },
      JSON.stringify(name),
    );
  }
  assert.throws(() => checkName('peer_vpc_id', ''), { message: /^peer_vpc_id must not be empty/ });
});

test('checkHa: omitted fields keep the current configuration', () => {
  const none: HaConfig = { replicaCount: 0, syncReplicaCount: 0 };
  const cases: [Partial<HaConfig>, HaConfig, HaConfig][] = [
    [{}, none, none],
    [{}, { replicaCount: 3, syncReplicaCount: 1 }, { replicaCount: 3, syncReplicaCount: 1 }],
    [{ replicaCount: 2 }, none, { replicaCount: 2, syncReplicaCount: 0 }],
    [{ replicaCount: 2, syncReplicaCount: 1 }, none, { replicaCount: 2, syncReplicaCount: 1 }],
    [{ replicaCount: 2, syncReplicaCount: 2 }, none, { replicaCount: 2, syncReplicaCount: 2 }],
    [
      { syncReplicaCount: 2 },
      { replicaCount: 3, syncReplicaCount: 0 },
      { replicaCount: 3, syncReplicaCount: 2 },
    ],
    // Fewer replicas than synchronous ones: the synchronous count follows down.
    [
      { replicaCount: 1 },
      { replicaCount: 3, syncReplicaCount: 2 },
      { replicaCount: 1, syncReplicaCount: 1 },
    ],
    [{ replicaCount: 0 }, { replicaCount: 3, syncReplicaCount: 3 }, none],
    [
      { replicaCount: MAX_HA_REPLICAS, syncReplicaCount: MAX_HA_REPLICAS },
      none,
      { replicaCount: 5, syncReplicaCount: 5 },
    ],
  ];
  for (const [ha, current, expected] of cases) {
    assert.deepEqual(checkHa(ha, current), expected, JSON.stringify([ha, current]));
  }
  // undefined fields count as omitted (the API passes them through as undefined).
  assert.deepEqual(
    checkHa(
      { replicaCount: undefined, syncReplicaCount: undefined },
      { replicaCount: 2, syncReplicaCount: 1 },
    ),
    { replicaCount: 2, syncReplicaCount: 1 },
  );
});

test('checkHa refuses out-of-range counts and more synchronous replicas than replicas', () => {
  const none: HaConfig = { replicaCount: 0, syncReplicaCount: 0 };
  const bad: [Partial<HaConfig>, HaConfig, RegExp][] = [
    [{ replicaCount: -1 }, none, /^replica_count must be a whole number from 0 to 5; got -1\.$/],
    [{ replicaCount: 6 }, none, /replica_count must be a whole number from 0 to 5; got 6/],
    [{ replicaCount: 1.5 }, none, /replica_count .* got 1\.5/],
    [{ replicaCount: Number.NaN }, none, /replica_count/],
    [{ syncReplicaCount: -1 }, none, /sync_replica_count must be a whole number/],
    [{ replicaCount: 5, syncReplicaCount: 6 }, none, /sync_replica_count must be a whole number/],
    [
      { syncReplicaCount: 1 },
      none,
      /^sync_replica_count \(1\) cannot exceed replica_count \(0\)\.$/,
    ],
    [
      { replicaCount: 1, syncReplicaCount: 2 },
      none,
      /sync_replica_count \(2\) cannot exceed replica_count \(1\)/,
    ],
    [
      { syncReplicaCount: 3 },
      { replicaCount: 2, syncReplicaCount: 0 },
      /cannot exceed replica_count \(2\)/,
    ],
  ];
  for (const [ha, current, message] of bad) {
    assert.throws(
      () => checkHa(ha, current),
      { code: 'INVALID_REQUEST', message },
      JSON.stringify(ha),
    );
  }
});

test('checkPassword: 8 to 256 characters without control characters', () => {
  assert.equal(PASSWORD_MIN, 8);
  assert.equal(PASSWORD_MAX, 256);
  for (const ok of ['12345678', 'x'.repeat(256), 'pass word with spaces', 'pässwörd-ü']) {
    assert.doesNotThrow(() => checkPassword(ok));
  }
  for (const bad of ['', '1234567', 'x'.repeat(257)]) {
    assert.throws(() => checkPassword(bad), {
      code: 'INVALID_REQUEST',
      message: /^password must be 8 to 256 characters long\.$/,
    });
  }
  for (const bad of ['12345678\n', 'abc\u0000defgh', '\u007fabcdefgh']) {
    assert.throws(() => checkPassword(bad), {
      code: 'INVALID_REQUEST',
      message: /must not contain control characters/,
    });
  }
});

test('isRfc3339 accepts RFC 3339 date-times', () => {
  for (const s of [
    '2025-06-01T12:00:00Z',
    '2025-06-01T12:00:00.123Z',
    '2025-06-01T12:00:00.123456789Z',
    '2025-06-01T12:00:00+02:00',
    '2025-06-01T12:00:00-05:30',
    '2025-06-01t12:00:00z',
    '2025-06-01 12:00:00Z',
    '2024-02-29T00:00:00Z',
    '2025-12-31T23:59:59Z',
  ]) {
    assert.equal(isRfc3339(s), true, s);
  }
});

test('isRfc3339 refuses other formats and impossible dates', () => {
  for (const s of [
    '',
    'yesterday',
    'now',
    '2025-06-01',
    '2025-06-01T12:00:00',
    '2025-06-01T12:00Z',
    '2025-06-01T12:00:00+0200',
    '2025-06-01T12:00:00 Z',
    '1748779200',
    '2025-06-01T12:00:00ZZ',
    ' 2025-06-01T12:00:00Z',
    '2025-13-01T00:00:00Z',
    '2025-00-10T00:00:00Z',
    '2025-06-00T00:00:00Z',
    '2025-02-30T00:00:00Z',
    '2023-02-29T00:00:00Z',
    '2025-04-31T00:00:00Z',
    '2025-06-01T24:00:00Z',
    '2025-06-01T12:60:00Z',
    '2025-06-01T12:00:61Z',
    '2025-06-01T12:00:00+24:00',
    '2025-06-01T12:00:00+02:60',
  ]) {
    assert.equal(isRfc3339(s), false, s);
  }
});
