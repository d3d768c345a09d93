// A repository per service with a pgBackRest server of its own
// (repository/), against real PostgreSQL and pgBackRest, as root with
// service networks: the repository is its own OS user's, which no tenant
// is; its server runs as that user, on the service's gateway, confined and
// in its cgroups; WAL is archived to it over TLS, backups and expiry run
// as that user through a server on the service's side; a restarted driver
// adopts the server; a fork restores from it; the delete takes server,
// files and user.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { readPasswd } from '../../src/drivers/local/os-user.js';
import { repositoryUserName, serviceUserName } from '../../src/drivers/local/service-users.js';
import { serviceNetwork } from '../e2e/basin-process.js';
import { claimPortBlock, type PortBlock } from '../e2e/port-block.js';
import { backupUntilDone } from '../contract/driver-contract.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  query,
  testUids,
} from './helpers.js';

const notRoot = process.getuid?.() !== 0 ? 'repository users need root' : false;

describe('local driver: a repository server per service', { skip: notRoot }, () => {
  let dataDir: string;
  let layout: Layout;
  let driver: LocalDriver;
  let block: PortBlock;
  let spec: ServiceSpec;
  const password = 'repo-server-password-0123';
  const uids = testUids();
  const start = async () => {
    const d = createLocalDriver({
      ...uids,
      dataDir,
      publicHost: 'db.example.test',
      serviceNetwork: serviceNetwork(block.claimed),
      repositoryServers: true,
    });
    await d.start();
    return d;
  };
  const repoUser = () => readPasswd().find((p) => p.name === repositoryUserName(spec.serviceId));
  const serverPid = () =>
    (JSON.parse(readFileSync(layout.repository(spec.serviceId).state, 'utf8')) as { pid: number })
      .pid;

  before(async () => {
    block = await claimPortBlock();
    dataDir = makeDataDir();
    driver = await start();
    layout = new Layout(dataDir);
    spec = await makeSpec('POSTGRES', password);
    await applyUntilDone(driver, spec);
  });

  after(async () => {
    if (spec) await deleteUntilDone(driver, spec.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
    await block.release();
  });

  test("the repository is its own user's, no tenant's; its server runs as that user", async () => {
    const user = repoUser();
    const tenant = readPasswd().find((p) => p.name === serviceUserName(spec.serviceId));
    assert.ok(user && tenant);
    assert.notEqual(user.uid, tenant.uid);
    const r = layout.repository(spec.serviceId);
    assert.equal(statSync(r.dir).mode & 0o777, 0o711);
    assert.equal(statSync(r.dir).uid, 0);
    for (const dir of [r.repo, r.lock, r.log]) {
      assert.equal(statSync(dir).uid, user.uid, dir);
      assert.equal(statSync(dir).mode & 0o777, 0o700, dir);
    }
    // The stanza is there, made before the first start; no local repository.
    assert.ok(existsSync(join(r.repo, 'backup', spec.serviceId, 'backup.info')));
    assert.equal(existsSync(layout.backupDirs(spec.serviceId).repo), false);
    const pid = serverPid();
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    assert.match(status, new RegExp(`^Uid:\\s+${user.uid}\\s`, 'm'));
    assert.match(status, /^NoNewPrivs:\s+1$/m);
    assert.match(
      readFileSync(`/proc/${pid}/cgroup`, 'utf8'),
      new RegExp(`-${spec.serviceId}-repo`),
    );
  });

  test('WAL is archived into it over TLS, and a backup runs as its user', async () => {
    await query(spec, password, 'CREATE TABLE t AS SELECT generate_series(1, 1000) AS i');
    const user = repoUser();
    assert.ok(user);
    const since = Date.now();
    const b = await backupUntilDone(driver, spec, since);
    const manifest = join(
      layout.repository(spec.serviceId).repo,
      'backup',
      spec.serviceId,
      b.label,
      'backup.manifest',
    );
    assert.equal(statSync(manifest).uid, user.uid);
    assert.match(readFileSync(manifest, 'utf8'), /^pg_data\/PG_VERSION=/m);
    // The backup's WAL came through the archiver, over TLS, into the repository.
    const archive = join(layout.repository(spec.serviceId).repo, 'archive', spec.serviceId);
    const wal = join(archive, '15-1', '0000000100000000');
    assert.ok(readdirSync(wal).some((f) => /^[0-9A-F]{24}-/.test(f)));
    for (const f of readdirSync(wal)) assert.equal(statSync(join(wal, f)).uid, user.uid);
  });

  test('a restarted driver adopts the running server', async () => {
    const pid = serverPid();
    await driver.close();
    driver = await start();
    await applyUntilDone(driver, spec);
    assert.equal(serverPid(), pid);
    assert.equal(await driver.inspectService(spec), 'running');
  });

  test('deleting the service takes its server, repository and user', async () => {
    const pid = serverPid();
    const r = layout.repository(spec.serviceId);
    await deleteUntilDone(driver, spec.serviceId);
    assert.equal(existsSync(r.dir), false);
    assert.equal(repoUser(), undefined);
    assert.equal(existsSync(`/proc/${pid}`), false);
  });
});
