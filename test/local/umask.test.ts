// `npm start` runs Basin with umask 077 (main.ts: nothing Basin writes is for
// other users). Every directory the local driver makes for PostgreSQL, which
// runs as another OS user, must still get its documented mode: a mode left
// to mkdir is filtered by the umask, and once made every 0711 directory 0700,
// so PostgreSQL could not enter its own data directory (the bug of issue 6).
// This file runs in a process of its own (node --test), under that umask.

import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver } from '../../src/drivers/local/local-driver.js';
import {
  applyUntilDone,
  dataDirFor,
  deleteUntilDone,
  makeSpec,
  query,
  testUids,
} from './helpers.js';

test('under umask 077 the driver creates a service that accepts TLS logins', async (t) => {
  process.umask(0o077);
  const dataDir = dataDirFor(t);
  const driver = createLocalDriver({ ...testUids(), dataDir, publicHost: 'localhost' });
  t.after(() => driver.close());
  await driver.start();
  const password = 'umask-password-0123';
  const spec = await makeSpec('POSTGRES', password);
  await applyUntilDone(driver, spec);

  const [row] = await query(spec, password, 'SELECT current_user AS u, 1 + 1 AS two');
  assert.deepEqual(row, { u: 'tsdbadmin', two: 2 });

  const layout = new Layout(dataDir);
  const mode = (path: string) => statSync(path).mode & 0o7777;
  for (const dir of [
    layout.root,
    layout.instancesDir,
    layout.socketsDir,
    layout.archivesDir,
    layout.templateDir,
    layout.instanceDir(spec.serviceId),
    layout.nodeDir({ id: spec.serviceId, node: 0 }),
  ]) {
    assert.equal(mode(dir), 0o711, `${dir} is 0${mode(dir).toString(8)}`);
  }
  assert.equal(mode(layout.pgdata({ id: spec.serviceId, node: 0 })), 0o700);
  assert.equal(mode(layout.caDir), 0o700);
  assert.equal(mode(layout.caCert), 0o644);
  await deleteUntilDone(driver, spec.serviceId);
});
