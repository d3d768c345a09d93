import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backupCheckpoint } from './pgbackrest.js';

const SHARED = { shared: true, cpuMillis: 0, memoryGbs: 0 };
const DEDICATED = { shared: false, cpuMillis: 2000, memoryGbs: 8 };

test('backupCheckpoint: immediate for a first backup and for shared services', () => {
  assert.equal(backupCheckpoint(SHARED, true), '--start-fast');
  assert.equal(backupCheckpoint(DEDICATED, true), '--start-fast');
  assert.equal(backupCheckpoint(SHARED, false), '--start-fast');
});

test('backupCheckpoint: spread for the later backups of a dedicated size', () => {
  assert.equal(backupCheckpoint(DEDICATED, false), '--no-start-fast');
});
