// Start-up checks: a host without what the local driver needs is told what
// is missing and how to get it, before anything is created.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HostCheckError } from '../../src/drivers/local/errors.js';
import { checkHost, pgInstall } from '../../src/drivers/local/host-check.js';
import { createLocalDriver } from '../../src/drivers/local/local-driver.js';
import { makeDataDir, removeDir } from './helpers.js';

test('this host has everything (scripts/setup-host.sh ran)', async () => {
  const report = await checkHost(pgInstall());
  assert.match(report.postgresVersion, /\(PostgreSQL\) 15\./);
});

test('missing binaries and extensions are listed, with the command that installs them', async () => {
  const err = await checkHost(
    pgInstall('/nonexistent/bin', '/nonexistent/share', '/nonexistent/pgbackrest'),
  ).then(
    () => assert.fail('expected a HostCheckError'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof HostCheckError);
  for (const what of [
    'PostgreSQL 15 server (/nonexistent/bin/postgres)',
    'initdb',
    'pgBackRest (/nonexistent/pgbackrest: WAL archiving, backups and forks; Debian package pgbackrest)',
    'timescaledb extension (/nonexistent/share/extension/timescaledb.control)',
    'pgvector extension (/nonexistent/share/extension/vector.control)',
    "Basin's read-only library (extensions/basin_readonly) (/nonexistent/lib/basin_readonly.so)",
  ]) {
    assert.ok(err.message.includes(what), `${what} missing from: ${err.message}`);
  }
  assert.match(err.message, /run: sudo scripts\/setup-host\.sh/);
});

test('the driver refuses to start without them, and with an unknown OS user', async () => {
  const dataDir = makeDataDir();
  try {
    const noPg = createLocalDriver({ dataDir, publicHost: 'localhost', pgBin: '/nonexistent' });
    await assert.rejects(noPg.start(), HostCheckError);
    if (process.getuid?.() === 0) {
      const noUser = createLocalDriver({
        dataDir,
        publicHost: 'localhost',
        osUser: 'no-such-user-basin',
      });
      await assert.rejects(noUser.start(), /OS user "no-such-user-basin".*does not exist/);
    }
  } finally {
    removeDir(dataDir);
  }
});
