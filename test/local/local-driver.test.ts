// The local driver's lifecycle against real PostgreSQL: create, TLS and
// authentication, WAL archiving, stop/start, resize, password change,
// adoption by a second driver, crash repair and delete. One data directory
// and one TIMESERIESDB service for the whole file, in order, to stay fast.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { ENDING } from '../../src/drivers/local/converge/service-node.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import {
  SMALL,
  applyUntilDone,
  cleanUpDataDir,
  connect,
  controlDataId,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  postmasterPid,
  processesOf,
  query,
  stanzaSystemId,
  testUids,
} from './helpers.js';

describe('local driver: a TIMESERIESDB service through its lifecycle', () => {
  let dataDir: string;
  let layout: Layout;
  let driver: LocalDriver;
  let spec: ServiceSpec;
  let password = 'first-password-0123';
  const pgdata = () => layout.pgdata({ id: spec.serviceId, node: 0 });

  before(async () => {
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = createLocalDriver({ ...testUids(), dataDir, publicHost: 'db.example.test' });
    await driver.start();
    layout = new Layout(dataDir);
    spec = await makeSpec('TIMESERIESDB', password);
  });

  after(async () => {
    // Whatever a failed test left: no PostgreSQL may outlive the suite.
    if (spec) await deleteUntilDone(driver, spec.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  test('create: tsdbadmin logs in over TLS to tsdb, with timescaledb', async () => {
    assert.equal(await driver.inspectService(spec), 'missing');
    await applyUntilDone(driver, spec);
    assert.equal(await driver.inspectService(spec), 'running');
    const [row] = await query(
      spec,
      password,
      `SELECT current_user AS "user", current_database() AS db, current_setting('ssl') AS ssl,
              r.rolsuper, r.rolcreatedb, r.rolcreaterole
         FROM pg_roles r WHERE r.rolname = current_user`,
    );
    assert.deepEqual(row, {
      user: 'tsdbadmin',
      db: 'tsdb',
      ssl: 'on',
      rolsuper: false,
      rolcreatedb: true,
      rolcreaterole: true,
    });
    const exts = await query(spec, password, 'SELECT extname FROM pg_extension ORDER BY 1');
    assert.deepEqual(
      exts.map((e) => e.extname),
      ['plpgsql', 'timescaledb'],
    );
    await query(spec, password, 'CREATE TABLE m (time timestamptz NOT NULL, v float8)');
    await query(spec, password, "SELECT create_hypertable('m', 'time')");
    await query(
      spec,
      password,
      "INSERT INTO m SELECT now() - i * interval '1 h', i FROM generate_series(1, 100) i",
    );
  });

  test('TLS is required, passwords are checked, the superuser cannot log in over TCP', async () => {
    await assert.rejects(connect(spec, password, false), /no encryption/);
    await assert.rejects(connect(spec, 'wrong-password'), /password authentication failed/);
    const su = new pg.Client({
      host: '127.0.0.1',
      port: spec.port,
      user: 'postgres',
      database: 'postgres',
      ssl: { rejectUnauthorized: false },
    });
    await assert.rejects(su.connect(), /rejects connection/);
  });

  test("WAL is archived into the service's own pgBackRest repository", async () => {
    // pg_switch_wal needs the superuser: Basin's administrative path (root
    // over the Unix socket, peer-mapped to postgres) is what runs it.
    const admin = new pg.Client({
      host: layout.socketDir({ id: spec.serviceId, node: 0 }),
      port: spec.port,
      user: 'postgres',
      database: 'tsdb',
    });
    await admin.connect();
    try {
      await admin.query('CREATE TABLE wal_probe AS SELECT generate_series(1, 1000) AS i');
      await admin.query('SELECT pg_switch_wal()');
    } finally {
      await admin.end();
    }
    // pgBackRest keeps segments compressed and checksummed:
    // archive/<stanza>/15-1/<timeline+log>/<segment>-<sha1>.lz4
    const archive = join(
      layout.backupDirs(spec.serviceId).repo,
      'archive',
      spec.serviceId,
      '15-1',
      '0000000100000000',
    );
    const deadline = Date.now() + 20_000;
    const segments = () => {
      try {
        return readdirSync(archive).filter((f) => /^[0-9A-F]{24}-[0-9a-f]{40}\.lz4$/.test(f));
      } catch {
        return [];
      }
    };
    while (segments().length === 0) {
      assert.ok(Date.now() < deadline, 'no WAL segment archived within 20 s');
      await sleep(100);
    }
  });

  test('its own system identifier, recorded by root; its stanza and archived WAL carry it', async () => {
    const id = controlDataId(pgdata());
    assert.notEqual(id, controlDataId(layout.templatePgdata), "not the template's");
    const record = layout.systemIdFile(spec.serviceId);
    assert.equal(readFileSync(record, 'utf8').trim(), id);
    const st = statSync(record);
    assert.deepEqual([st.uid, st.mode & 0o777], [0, 0o600]);
    const [{ sysid }] = await query(
      spec,
      password,
      'SELECT system_identifier::text AS sysid FROM pg_control_system()',
    );
    assert.equal(sysid, id, 'the server runs with it');
    const repo = layout.backupDirs(spec.serviceId).repo;
    assert.equal(stanzaSystemId(layout.backupInfo(spec.serviceId)), id);
    assert.equal(stanzaSystemId(join(repo, 'archive', spec.serviceId, 'archive.info')), id);
    // Another service gets another.
    const other = await makeSpec('POSTGRES', password);
    try {
      await applyUntilDone(driver, other);
      const theirs = controlDataId(layout.pgdata({ id: other.serviceId, node: 0 }));
      assert.notEqual(theirs, id);
      assert.equal(readFileSync(layout.systemIdFile(other.serviceId), 'utf8').trim(), theirs);
    } finally {
      await deleteUntilDone(driver, other.serviceId);
    }
  });

  test('stop refuses connections; start brings the data back', async () => {
    spec = { ...spec, running: false };
    await applyUntilDone(driver, spec);
    assert.equal(await driver.inspectService(spec), 'stopped');
    await assert.rejects(connect(spec, password), /ECONNREFUSED/);
    assert.deepEqual(processesOf(pgdata()), []);

    spec = { ...spec, running: true };
    await applyUntilDone(driver, spec);
    assert.equal(await driver.inspectService(spec), 'running');
    const [row] = await query(spec, password, 'SELECT count(*)::int AS n FROM m');
    assert.equal(row.n, 100);
  });

  test('resize rewrites the size-derived settings and restarts, data intact', async () => {
    const before = await query(spec, password, 'SHOW shared_buffers');
    assert.equal(before[0].shared_buffers, '32MB');
    const pid = postmasterPid(pgdata());
    spec = { ...spec, size: SMALL };
    const reasons = await applyUntilDone(driver, spec);
    assert.ok(
      reasons.some((r) => /restart/.test(r)),
      `reasons: ${reasons}`,
    );
    assert.notEqual(postmasterPid(pgdata()), pid);
    const [row] = await query(
      spec,
      password,
      `SELECT current_setting('shared_buffers') AS sb, current_setting('max_connections') AS mc,
              (SELECT count(*)::int FROM m) AS n`,
    );
    assert.deepEqual(row, { sb: '512MB', mc: '100', n: 100 });
  });

  test('a new password replaces the old one, without a restart', async () => {
    const pid = postmasterPid(pgdata());
    const next = 'second-password-4567';
    spec = { ...spec, passwordVerifier: scramVerifier(next) };
    await applyUntilDone(driver, spec);
    await assert.rejects(connect(spec, password), /password authentication failed/);
    password = next;
    const [row] = await query(spec, password, 'SELECT 1 AS one');
    assert.equal(row.one, 1);
    assert.equal(postmasterPid(pgdata()), pid);
  });

  test('a second driver on the same data directory adopts the running cluster', async () => {
    const pid = postmasterPid(pgdata());
    const second = createLocalDriver({ ...testUids(), dataDir, publicHost: 'db.example.test' });
    await second.start();
    try {
      assert.equal(await second.inspectService(spec), 'running');
      const reasons = await applyUntilDone(second, spec);
      assert.deepEqual(reasons, []);
      assert.equal(postmasterPid(pgdata()), pid);
      const postmasters = processesOf(pgdata()).filter((p) =>
        readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(`-D\0${pgdata()}\0`),
      );
      assert.deepEqual(postmasters, [pid]);
    } finally {
      await second.close();
    }
  });

  test('an access-rule change is applied by a reload, without a restart', async () => {
    const pid = postmasterPid(pgdata());
    // The same data directory, but an installation whose public endpoint
    // admits one private network only: loopback clients lose access.
    const strict = createLocalDriver({
      ...testUids(),
      dataDir,
      publicHost: 'db.example.test',
      publicCidrs: ['10.99.0.0/16'],
    });
    await strict.start();
    try {
      assert.deepEqual(await applyUntilDone(strict, spec), []);
      await assert.rejects(connect(spec, password), /no pg_hba.conf entry/);
    } finally {
      await strict.close();
    }
    assert.deepEqual(await applyUntilDone(driver, spec), []);
    const [row] = await query(spec, password, 'SELECT 1 AS one');
    assert.equal(row.one, 1);
    assert.equal(postmasterPid(pgdata()), pid);
  });

  test('a killed postmaster is reported failed and started again with its data', async () => {
    const pid = postmasterPid(pgdata());
    process.kill(pid, 'SIGKILL');
    const deadline = Date.now() + 10_000;
    while ((await driver.inspectService(spec)) !== 'failed') {
      assert.ok(Date.now() < deadline, 'not reported failed');
      await sleep(20);
    }
    // It died on its own: the first restart is at once (restarts.ts).
    // (After its end, which may take the kernel a moment: ENDING.)
    const reasons = (await applyUntilDone(driver, spec)).filter((r) => r !== ENDING);
    assert.equal(reasons[0], 'restarting node0', reasons.join(', '));
    assert.equal(await driver.inspectService(spec), 'running');
    assert.notEqual(postmasterPid(pgdata()), pid);
    const [row] = await query(spec, password, 'SELECT count(*)::int AS n FROM m');
    assert.equal(row.n, 100);
  });

  test('delete stops every process and removes every file', async () => {
    const dir = pgdata();
    assert.ok(processesOf(dir).length > 1);
    await deleteUntilDone(driver, spec.serviceId);
    assert.deepEqual(processesOf(dir), []);
    assert.equal(existsSync(layout.instanceDir(spec.serviceId)), false);
    assert.equal(existsSync(layout.archiveDir(spec.serviceId)), false);
    assert.equal(existsSync(layout.backupDir(spec.serviceId)), false, 'its stanza is gone');
    assert.equal(existsSync(layout.socketDir({ id: spec.serviceId, node: 0 })), false);
    assert.equal(await driver.inspectService(spec), 'missing');
    assert.deepEqual(await driver.deleteService(spec.serviceId), { done: true });
  });
});
