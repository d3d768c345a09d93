import assert from 'node:assert/strict';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { makeDataDir, secureDataDir } from './data-dir.js';
import type { Logger } from './logger.js';

function scratch(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'basin-data-dir-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const mode = (path: string) => statSync(path).mode & 0o7777;

function recorder(): { log: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const log: Logger = {
    info() {},
    debug() {},
    error() {},
    warn: (_o, msg) => void warnings.push(msg ?? ''),
  };
  return { log, warnings };
}

test('a new data directory is 0700, its missing parents 0711, whatever the umask', (t) => {
  const root = scratch(t);
  const old = process.umask(0o077);
  try {
    makeDataDir(join(root, 'a', 'b', 'data'));
  } finally {
    process.umask(old);
  }
  assert.equal(mode(join(root, 'a')), 0o711);
  assert.equal(mode(join(root, 'a', 'b')), 0o711);
  assert.equal(mode(join(root, 'a', 'b', 'data')), 0o700);
});

test('an existing data directory is tightened: nothing in it stays open to others', (t) => {
  const dir = join(scratch(t), 'data');
  mkdirSync(dir);
  chmodSync(dir, 0o755);
  for (const f of ['basin.db', 'basin.db-wal', 'server.log']) {
    writeFileSync(join(dir, f), 'x');
    chmodSync(join(dir, f), 0o644);
  }
  mkdirSync(join(dir, 'tls'));
  chmodSync(join(dir, 'tls'), 0o755);
  mkdirSync(join(dir, 'local'));
  chmodSync(join(dir, 'local'), 0o711);
  // A link is left alone: chmod would change what it points to.
  const outside = join(dir, '..', 'outside');
  writeFileSync(outside, 'x');
  chmodSync(outside, 0o644);
  symlinkSync(outside, join(dir, 'link'));

  const { log, warnings } = recorder();
  secureDataDir(dir, { ownModes: ['local'], log });
  assert.equal(mode(dir), 0o701, 'crossable, not listable');
  for (const f of ['basin.db', 'basin.db-wal', 'server.log'])
    assert.equal(mode(join(dir, f)), 0o600);
  assert.equal(mode(join(dir, 'tls')), 0o700);
  assert.equal(mode(join(dir, 'local')), 0o711, 'the driver sets its own');
  assert.equal(mode(outside), 0o644);
  assert.ok(lstatSync(join(dir, 'link')).isSymbolicLink());
  assert.deepEqual(warnings, []);

  chmodSync(dir, 0o750);
  secureDataDir(dir, { ownModes: ['local'], log });
  assert.equal(mode(dir), 0o700);
});

test('a warning when the data directory lies under a world-writable directory without the sticky bit', (t) => {
  const open = join(scratch(t), 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  const { log, warnings } = recorder();
  secureDataDir(join(open, 'data'), { ownModes: [], log });
  assert.equal(warnings.length, 1);
  assert.match(warnings[0] as string, new RegExp(`under ${open}, which every user may write to`));

  chmodSync(open, 0o1777); // like /tmp: nobody may rename what is not theirs
  const quiet = recorder();
  secureDataDir(join(open, 'data'), { ownModes: [], log: quiet.log });
  assert.deepEqual(quiet.warnings, []);
});
