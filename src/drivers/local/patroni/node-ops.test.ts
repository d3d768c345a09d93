import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runsAsWanted, type RunningSetting } from './node-ops.js';

const row = (name: string, setting: string, unit: string | null, vartype = 'integer') =>
  ({ name, setting, unit, vartype }) satisfies RunningSetting;

test('a running setting is compared with the wanted one by amount, so that a restart is asked only for a real change', () => {
  // shared_buffers runs in 8kB pages: 65536 of them are 512MB.
  assert.equal(runsAsWanted(row('shared_buffers', '65536', '8kB'), '512MB'), true);
  assert.equal(runsAsWanted(row('shared_buffers', '65536', '8kB'), '1GB'), false);
  assert.equal(runsAsWanted(row('shared_buffers', '131072', '8kB'), '1024MB'), true);
  assert.equal(runsAsWanted(row('shared_buffers', '4096', '8kB'), '32MB'), true);
  // A value without a unit is in the setting's own.
  assert.equal(runsAsWanted(row('shared_buffers', '4096', '8kB'), '4096'), true);
  // Words: case, quotes and spaces aside.
  assert.equal(
    runsAsWanted(row('shared_preload_libraries', 'auth_delay,basin_readonly', null, 'string'), "'auth_delay, basin_readonly'"), // prettier-ignore
    true,
  );
  assert.equal(
    runsAsWanted(row('shared_preload_libraries', 'auth_delay', null, 'string'), 'auth_delay,basin_readonly'), // prettier-ignore
    false,
  );
  assert.equal(runsAsWanted(row('hot_standby', 'on', null, 'bool'), 'true'), true);
  assert.equal(runsAsWanted(row('archive_mode', 'on', null, 'enum'), 'off'), false);
});

test('settings every member must share are stale only below what is wanted: a standby runs its primary’s higher value', () => {
  assert.equal(runsAsWanted(row('max_connections', '200', null), '100'), true);
  assert.equal(runsAsWanted(row('max_connections', '100', null), '200'), false);
  assert.equal(runsAsWanted(row('max_worker_processes', '9', null), '9'), true);
});
