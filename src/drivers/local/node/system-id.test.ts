// The byte logic of system identifiers (system-id.ts): CRC-32C as
// PostgreSQL computes it, finding the control file's CRC, and a new
// identifier written with a CRC that matches. Against a real control file,
// with pg_controldata and a server, in test/local/forks.test.ts and
// test/local/local-driver.test.ts.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import {
  controlCrcOffset,
  crc32c,
  idBytes,
  newSystemId,
  readId,
  withSystemId,
  writeId,
} from './system-id.js';

/** A control file as PostgreSQL writes one: a struct, its CRC at `crcAt`, zeros to 8 KiB. */
function controlFile(crcAt: number): Buffer {
  const buf = Buffer.alloc(8192);
  randomBytes(crcAt).copy(buf);
  buf.writeUInt32LE(crc32c(buf, crcAt), crcAt);
  return buf;
}

test('crc32c is CRC-32C (Castagnoli), as pg_crc32c', () => {
  // The check value of CRC-32C, and of the empty string.
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  assert.equal(crc32c(Buffer.alloc(0)), 0);
  assert.equal(crc32c(Buffer.from('123456789xyz'), 9), 0xe3069283, 'only the bytes before `end`');
});

test('the CRC is found where it is, whatever the layout; a torn file has none', () => {
  for (const at of [288, 296, 12, 1000]) assert.equal(controlCrcOffset(controlFile(at)), at);
  const torn = controlFile(288);
  torn[100] = (torn[100]! + 1) % 256;
  assert.equal(controlCrcOffset(torn), undefined);
  assert.equal(controlCrcOffset(Buffer.alloc(8192, 0xff)), undefined);
});

test('withSystemId writes the identifier and a CRC that matches, and nothing else', () => {
  const before = controlFile(288);
  const id = '7713046431057096666';
  const after = withSystemId(before, id);
  assert.equal(readId(after), id);
  assert.equal(controlCrcOffset(after), 288);
  assert.deepEqual(after.subarray(8, 288), before.subarray(8, 288));
  assert.deepEqual(after.subarray(292), before.subarray(292));
  assert.notEqual(readId(before), id, 'the input is left alone');
  assert.throws(() => withSystemId(Buffer.alloc(8192), id), /no valid CRC/);
});

test('identifiers round-trip through their bytes, in the largest range', () => {
  for (const id of ['1', '7713046431057096666', '18446744073709551615']) {
    const buf = Buffer.alloc(16);
    writeId(buf, id, 4);
    assert.equal(readId(buf, 4), id);
    assert.deepEqual(idBytes(id), buf.subarray(4, 12));
  }
});

test("new identifiers carry the time in their high half, as initdb's, and differ", () => {
  const now = Date.UTC(2025, 0, 2, 3, 4, 5);
  const ids = new Set(Array.from({ length: 1000 }, () => newSystemId(now)));
  assert.equal(ids.size, 1000);
  for (const id of ids) assert.equal(BigInt(id) >> 32n, BigInt(now / 1000));
});
