// The local driver's connection pooler against real PostgreSQL and PgBouncer:
// both pooling modes, TLS and SCRAM through the pooler, a password change,
// adoption by a second driver, a killed pooler, disable and delete. One
// service for the whole file, in order.

import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { isConfined } from '../../src/drivers/local/host/confine.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { POOLER_NICE, ServicePooler } from '../../src/drivers/local/endpoints/pooler.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { pgbouncerInstall } from '../../src/drivers/local/endpoints/pgbouncer-install.js';
import { poolerProcessCount } from '../../src/drivers/local/config/pooler-conf.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  freePort,
  makeDataDir,
  makeSpec,
  testUids,
} from './helpers.js';

/** A client of tsdbadmin through the pooler's port to `database`. */
async function viaPooler(
  port: number,
  password: string,
  database = 'tsdb',
  ssl: pg.ClientConfig['ssl'] = { rejectUnauthorized: false },
): Promise<pg.Client> {
  const c = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'tsdbadmin',
    password,
    database,
    ssl,
    connectionTimeoutMillis: 5000,
  });
  c.on('error', () => {});
  await c.connect();
  return c;
}

async function refused(port: number, password: string, ssl?: pg.ClientConfig['ssl']) {
  try {
    const c = await viaPooler(port, password, 'tsdb', ssl ?? { rejectUnauthorized: false });
    await c.query('SELECT 1');
    await c.end();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the pooler accepted a connection it should have refused');
}

describe('local driver: the connection pooler (PgBouncer)', () => {
  let dataDir: string;
  let driver: LocalDriver;
  let spec: ServiceSpec;
  let password = 'pooler-password-0123';
  let poolerPort: number;
  /** What the driver runs here: a process a core where Basin's PgBouncer can peer. */
  let expectedProcesses = 1;
  const poolerPids = async () =>
    (await new ServicePooler(driverContext(driver), spec).pids()).filter(
      (p): p is number => p !== undefined,
    );

  before(async () => {
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = createLocalDriver({ ...testUids(), dataDir, publicHost: 'db.example.test' });
    await driver.start();
    poolerPort = await freePort();
    spec = await makeSpec('POSTGRES', password, {
      pooler: { enabled: true, port: poolerPort },
    });
    const install = await pgbouncerInstall(() => {});
    expectedProcesses = poolerProcessCount(spec.size, os.availableParallelism(), install.peering);
  });

  after(async () => {
    if (spec) await deleteUntilDone(driver, spec.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  test('a query through the pooler, in session mode and in transaction mode', async () => {
    await applyUntilDone(driver, spec);
    assert.equal(await driver.inspectService(spec), 'running');
    for (const db of ['tsdb', 'tsdb_transaction']) {
      const c = await viaPooler(poolerPort, password, db);
      const { rows } = await c.query('SELECT current_user AS u, current_database() AS d');
      assert.deepEqual(rows, [{ u: 'tsdbadmin', d: 'tsdb' }]);
      await c.end();
    }
  });

  test("every PgBouncer runs as the service's OS user, confined like its server", async () => {
    const pids = await poolerPids();
    assert.equal(pids.length, expectedProcesses);
    const pgdata = new Layout(dataDir).pgdata({ id: spec.serviceId, node: 0 });
    for (const pid of pids) {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const uids = /^Uid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/).map(Number);
      assert.deepEqual(uids, Array(4).fill(statSync(pgdata).uid));
      assert.match(status, /^NoNewPrivs:\s+1$/m);
      assert.match(status, /^CapBnd:\s+0+$/m);
      assert.equal(await isConfined(pid, true), true, 'in a mount namespace of its own');
    }
  });

  test('PgBouncer runs above the default priority, in its session and as a process', async () => {
    for (const pid of await poolerPids()) {
      assert.equal(os.getPriority(pid), POOLER_NICE);
      assert.ok(POOLER_NICE < 0);
      // Where the kernel groups by session (it does here), the group's nice.
      if (existsSync(`/proc/${pid}/autogroup`)) {
        assert.match(
          readFileSync(`/proc/${pid}/autogroup`, 'utf8'),
          new RegExp(`nice ${POOLER_NICE}$`, 'm'),
        );
        assert.notEqual(
          readFileSync(`/proc/${pid}/autogroup`, 'utf8'),
          readFileSync('/proc/self/autogroup', 'utf8'),
          "a session of its own, not Basin's",
        );
      }
    }
  });

  test('TLS is required, and the password is checked', async () => {
    assert.match(await refused(poolerPort, password, false), /SSL|TLS|pg_hba|reject/i);
    assert.match(
      await refused(poolerPort, 'not-the-password'),
      /SASL authentication failed|password authentication failed/,
    );
  });

  test('pooler.log stays bounded whatever clients make PgBouncer log', async () => {
    // PgBouncer logs every failed login; a client can repeat those at will.
    const log = new Layout(dataDir).pooler(spec.serviceId).log;
    assert.match(readFileSync(log, 'utf8'), /password authentication failed/);
    assert.doesNotMatch(readFileSync(log, 'utf8'), /not-the-password/);
    appendFileSync(log, 'x'.repeat(2 * 1024 * 1024));
    assert.equal(await driver.inspectService(spec), 'running');
    assert.ok(statSync(log).size < 1024 * 1024, 'cut when the service is inspected');
    await refused(poolerPort, 'wrong-again-0123');
    // PgBouncer goes on writing at the file's new end.
    const after = readFileSync(log, 'utf8');
    assert.ok(after.length < 4096, `${after.length} bytes`);
    assert.match(after, /password authentication failed/);
  });

  test('a new password: the pooler accepts only it', async () => {
    const next = 'pooler-password-4567';
    spec = { ...spec, passwordVerifier: scramVerifier(next) };
    await applyUntilDone(driver, spec);
    assert.match(
      await refused(poolerPort, password),
      /SASL authentication failed|password authentication failed/,
    );
    password = next;
    const c = await viaPooler(poolerPort, password, 'tsdb_transaction');
    assert.equal((await c.query('SELECT 1 AS one')).rows[0].one, 1);
    await c.end();
  });

  test('a second driver adopts the running pooler', async () => {
    const pids = await poolerPids();
    assert.equal(pids.length, expectedProcesses);
    const second = createLocalDriver({ ...testUids(), dataDir, publicHost: 'db.example.test' });
    await second.start();
    try {
      assert.equal(await second.inspectService(spec), 'running');
      await applyUntilDone(second, spec);
      assert.deepEqual(await new ServicePooler(driverContext(second), spec).pids(), pids);
    } finally {
      await second.close();
    }
  });

  test('a killed PgBouncer makes the service failed, and an apply starts it again', async () => {
    const pids = await poolerPids();
    const pid = pids.at(-1) as number;
    process.kill(pid, 'SIGKILL');
    await waitUntil(async () => (await driver.inspectService(spec)) === 'failed');
    await applyUntilDone(driver, spec);
    const again = await poolerPids();
    assert.equal(again.length, pids.length);
    assert.ok(!again.includes(pid));
    // The others were left serving.
    assert.deepEqual(again.slice(0, -1), pids.slice(0, -1));
    const c = await viaPooler(poolerPort, password);
    await c.end();
  });

  test('disabled: PgBouncer stops, its port refuses, its files are gone', async () => {
    const files = new Layout(dataDir).pooler(spec.serviceId);
    spec = { ...spec, pooler: { enabled: false, port: poolerPort } };
    await applyUntilDone(driver, spec);
    assert.deepEqual(await poolerPids(), []);
    assert.match(await refused(poolerPort, password), /ECONNREFUSED/);
    assert.equal(existsSync(files.dir), false);
    assert.equal(await driver.inspectService(spec), 'running');
  });

  test('delete stops the pooler with the server', async () => {
    spec = { ...spec, pooler: { enabled: true, port: poolerPort } };
    await applyUntilDone(driver, spec);
    assert.equal((await poolerPids()).length, expectedProcesses);
    const uid = statSync(new Layout(dataDir).pgdata({ id: spec.serviceId, node: 0 })).uid;
    await deleteUntilDone(driver, spec.serviceId);
    assert.deepEqual(await processesOfUser(uid), []);
    assert.match(await refused(poolerPort, password), /ECONNREFUSED/);
  });
});

/** The driver's context, for looking at its pooler as it does. */
function driverContext(d: LocalDriver) {
  return (d as unknown as { context(): never }).context();
}

async function waitUntil(fn: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 50));
  }
}
