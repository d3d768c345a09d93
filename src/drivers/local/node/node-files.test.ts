import assert from 'node:assert/strict';
import {
  existsSync,
  lutimesSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sweepAside } from './node-files.js';

test("a killed write's file beside its target goes, ten seconds old and more; nothing else does", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-aside-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const old = new Date(Date.now() - 5 * 60_000);
  const make = (name: string, aged = true) => {
    writeFileSync(join(dir, name), 'x');
    if (aged) utimesSync(join(dir, name), old, old);
  };
  make('basin.conf');
  make('basin.conf.basin-0123456789ab'); // a killed write's: goes
  make('basin.conf.basin-abcdefabcdef', false); // a write under way: stays
  make('basin.conf.basin-notours'); // not Basin's name: stays
  make('pg_hba.conf.basin-0123456789ab'); // another file's: left to its own write
  // A link by that name (a tenant's): unlinked, its target untouched.
  writeFileSync(join(dir, 'target'), 'kept');
  symlinkSync(join(dir, 'target'), join(dir, 'basin.conf.basin-aaaaaaaaaaaa'));
  lutimesSync(join(dir, 'basin.conf.basin-aaaaaaaaaaaa'), old, old);
  utimesSync(join(dir, 'basin.conf'), old, old);
  await sweepAside(join(dir, 'basin.conf'));
  assert.deepEqual(readdirSync(dir).sort(), [
    'basin.conf',
    'basin.conf.basin-abcdefabcdef',
    'basin.conf.basin-notours',
    'pg_hba.conf.basin-0123456789ab',
    'target',
  ]);
  assert.ok(existsSync(join(dir, 'target')));
  await sweepAside(join(dir, 'missing', 'basin.conf')); // no directory: nothing to do
});
