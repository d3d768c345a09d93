// What each service type gets (extensions), certificate verification against
// the installation's CA, VPC CIDRs in pg_hba.conf, and the features the local
// driver refuses for now. Two services share one data directory, created in
// parallel as the engine would.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { checkServerIdentity } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { DriverError } from '../../src/drivers/driver.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  connect,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  query,
  testUids,
} from './helpers.js';

describe('local driver: service types, TLS verification, unsupported features', () => {
  let dataDir: string;
  let driver: LocalDriver;
  let vector: ServiceSpec;
  let plain: ServiceSpec;
  const password = 'types-password-0123';

  before(async () => {
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = createLocalDriver({
      ...testUids(),
      dataDir,
      publicHost: 'db.example.test',
      metricsIntervalMs: 100,
    });
    await driver.start();
    vector = await makeSpec('VECTOR', password);
    // In a VPC, whose block admits this host's loopback too (the tests connect from it).
    plain = await makeSpec('POSTGRES', password, {
      allowedCidrs: ['10.20.0.0/16', '127.0.0.1/32'],
    });
    await Promise.all([applyUntilDone(driver, vector), applyUntilDone(driver, plain)]);
  });

  after(async () => {
    for (const s of [vector, plain]) {
      if (s) await deleteUntilDone(driver, s.serviceId).catch(() => {});
    }
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  test('VECTOR: pgvector is there, timescaledb is not', async () => {
    const [row] = await query(
      vector,
      password,
      "SELECT '[1,2,3]'::vector <-> '[3,2,1]'::vector AS d",
    );
    assert.ok(Math.abs(row.d - Math.sqrt(8)) < 1e-9);
    const exts = await query(vector, password, 'SELECT extname FROM pg_extension ORDER BY 1');
    assert.deepEqual(
      exts.map((e) => e.extname),
      ['plpgsql', 'vector'],
    );
  });

  test('POSTGRES: neither extension', async () => {
    const exts = await query(plain, password, 'SELECT extname FROM pg_extension ORDER BY 1');
    assert.deepEqual(
      exts.map((e) => e.extname),
      ['plpgsql'],
    );
  });

  test('the server certificate verifies against the CA (verify-full)', async () => {
    const ca = readFileSync(driver.caCertPath, 'utf8');
    for (const servername of ['db.example.test', 'localhost']) {
      const c = await connect(plain, password, { ca, servername, rejectUnauthorized: true });
      await c.end();
    }
    // Clients that connect to an IP address check it against the IP SANs.
    const byIp = await connect(plain, password, {
      ca,
      rejectUnauthorized: true,
      checkServerIdentity: (_host, cert) => checkServerIdentity('127.0.0.1', cert),
    });
    await byIp.end();
    await assert.rejects(
      connect(plain, password, { ca, servername: 'elsewhere.test', rejectUnauthorized: true }),
      /altnames|does not match/i,
    );
  });

  test("readLogs pages through the node's JSON logs", async () => {
    const target = { kind: 'service' as const, id: plain.serviceId };
    const page = await driver.readLogs(target, {
      severities: [],
      search: ['ready', 'accept'],
      limit: 5,
    });
    assert.ok(page.entries.length >= 1, 'no "ready to accept connections" entry');
    assert.match(page.entries[0]?.message ?? '', /ready to accept connections/);
    assert.equal(page.entries[0]?.severity, 'LOG');
  });

  test('metrics are sampled from the running cluster', async () => {
    const target = { kind: 'service' as const, id: vector.serviceId };
    const deadline = Date.now() + 10_000;
    let m = driver.metrics(target);
    while (!(m && m.memoryMb > 0 && m.storageMb > 0)) {
      assert.ok(Date.now() < deadline, `no metrics sampled: ${JSON.stringify(m)}`);
      await sleep(50);
      m = driver.metrics(target);
    }
    assert.equal(driver.metrics({ kind: 'service', id: 'unknown000' }), undefined);
  });

  test('JSON logs and VPC CIDRs are configured', () => {
    const pgdata = new Layout(dataDir).pgdata({ id: plain.serviceId, node: 0 });
    const hba = readFileSync(join(pgdata, 'pg_hba.conf'), 'utf8');
    assert.match(hba, /^hostssl\s+all\s+all\s+10\.20\.0\.0\/16\s+scram-sha-256$/m);
    // The VPC's blocks instead of the public ones.
    assert.doesNotMatch(hba, /^hostssl\s+all\s+all\s+0\.0\.0\.0\/0\s+scram-sha-256$/m);
    assert.match(hba, /^hostnossl\s+all\s+all\s+0\.0\.0\.0\/0\s+reject$/m);
    const conf = readFileSync(join(pgdata, 'basin.conf'), 'utf8');
    assert.match(conf, /^log_destination = 'jsonlog'$/m);
  });

  test('a port taken by another process is a retryable error, then the service starts', async () => {
    const spec = await makeSpec('POSTGRES', password);
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(spec.port, '0.0.0.0', resolve));
    try {
      await assert.rejects(
        applyUntilDone(driver, spec),
        (err: unknown) =>
          err instanceof DriverError && err.retryable && /Port \d+ is in use/.test(err.message),
      );
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
    try {
      await applyUntilDone(driver, spec);
      assert.equal(await driver.inspectService(spec), 'running');
    } finally {
      await deleteUntilDone(driver, spec.serviceId);
    }
  });
});
