// The SQL tool's bounds (src/mcp/sql-bounds.ts): asks clamped to the
// ceilings, read-only unless asked and allowed, rows cut to the cap.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { boundsOf, capRows, ROW_CAP, TIMEOUT_MS } from '../../src/mcp/sql-bounds.js';

test('defaults: 100 rows, 5 s, read-only', () => {
  assert.deepEqual(boundsOf({}, false), {
    maxRows: ROW_CAP.default,
    timeoutMs: TIMEOUT_MS.default,
    readOnly: true,
  });
});

test('asks above the ceilings are clamped to them; below 1 to 1', () => {
  assert.deepEqual(boundsOf({ max_rows: 1e9, timeout_ms: 1e9 }, false), {
    maxRows: 1000,
    timeoutMs: 60_000,
    readOnly: true,
  });
  const low = boundsOf({ max_rows: 0, timeout_ms: -5 }, false);
  assert.equal(low.maxRows, 1);
  assert.equal(low.timeoutMs, 1);
  assert.equal(boundsOf({ max_rows: 2.7 }, false).maxRows, 2);
});

test('writes only when asked, and never on a read-only server', () => {
  assert.equal(boundsOf({ read_only: false }, false).readOnly, false);
  assert.equal(boundsOf({ read_only: true }, false).readOnly, true);
  assert.equal(boundsOf({ read_only: false }, true).readOnly, true);
});

test('rows are cut to the cap, saying so', () => {
  assert.deepEqual(capRows([1, 2, 3], 2), { rows: [1, 2], truncated: true });
  assert.deepEqual(capRows([1, 2], 2), { rows: [1, 2], truncated: false });
  assert.deepEqual(capRows([], 2), { rows: [], truncated: false });
});
