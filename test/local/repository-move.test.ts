// A service made with repository servers off (its repository local, its
// own user's) moves into a repository of its repository user's once a
// restarted Basin has them on (repository/move.ts), against real
// PostgreSQL and pgBackRest, as root with service networks: its backups and
// archived WAL move with it (a PITR fork to a moment before the move has
// that moment's rows), the local repository goes, archiving goes on into
// the new one; a move a killed Basin left half done (renamed, half copied)
// is finished by the next converge.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { repositoryUserName, serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { silentLogger } from '../../src/lib/logger.js';
import { serviceNetwork } from '../e2e/basin-process.js';
import { claimPortBlock, type PortBlock } from '../harness/port-block.js';
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

describe('local driver: a local repository moves', { skip: notRoot }, () => {
  let dataDir: string;
  let layout: Layout;
  let driver: LocalDriver;
  let block: PortBlock;
  let spec: ServiceSpec;
  /** A second service, whose move runs from its start. */
  let other: ServiceSpec;
  let otherLabel: string;
  const password = 'repo-move-password-0123';
  const FORK_PASSWORD = 'repo-move-fork-0123';
  const forks: ServiceSpec[] = [];
  const uids = testUids();
  const start = async (repositoryServers: boolean) => {
    const d = createLocalDriver({
      ...uids,
      dataDir,
      publicHost: 'db.example.test',
      log: silentLogger,
      serviceNetwork: serviceNetwork(block.claimed),
      repositoryServers,
    });
    await d.start();
    return d;
  };
  const repoUser = () => readPasswd().find((p) => p.name === repositoryUserName(spec.serviceId));
  const tenant = () => readPasswd().find((p) => p.name === serviceUserName(spec.serviceId));

  before(async () => {
    block = await claimPortBlock();
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = await start(false);
    layout = new Layout(dataDir);
    spec = await makeSpec('POSTGRES', password);
    other = await makeSpec('POSTGRES', password);
    // Made side by side.
    await Promise.all([applyUntilDone(driver, spec), applyUntilDone(driver, other)]);
  });

  after(async () => {
    await Promise.all(
      [...forks, spec, other].map((f) => f && deleteUntilDone(driver, f.serviceId).catch(() => {})),
    );
    await driver.close();
    await cleanUpDataDir(dataDir);
    await block.release();
  });

  test('made with servers off: backups, a target, rows after it; restarted with servers on halfway through a move, it is moved', async () => {
    const id = spec.serviceId;
    const local = layout.backupDirs(id).repo;
    assert.equal(statSync(local).uid, tenant()?.uid, "a local repository, the tenant's");
    assert.equal(existsSync(layout.repository(id).dir), false);
    await query(spec, password, 'CREATE TABLE f (v text)');
    await query(spec, password, "INSERT INTO f VALUES ('1 in the backup')");
    const b = await backupUntilDone(driver, spec);
    await query(spec, password, "INSERT INTO f VALUES ('2 before the target')");
    await sleep(1_000);
    const target = new Date().toISOString();
    await sleep(1_000);
    await query(spec, password, "INSERT INTO f VALUES ('3 after the target')");
    await query(other, password, 'CREATE TABLE g AS SELECT generate_series(1, 100) AS i');
    otherLabel = (await backupUntilDone(driver, other)).label;
    await query(other, password, 'INSERT INTO g SELECT generate_series(101, 200)');

    // Basin killed in the middle of the move's copy: renamed, half copied.
    await driver.close();
    renameSync(local, join(layout.backupDir(id), 'repo-moving'));
    mkdirSync(layout.repository(id).dir, { mode: 0o711, recursive: true });
    mkdirSync(join(layout.repository(id).dir, 'incoming'), { mode: 0o700 });
    writeFileSync(join(layout.repository(id).dir, 'incoming', 'half'), 'half a copy');

    driver = await start(true);
    assert.equal(await driver.inspectService(spec), 'failed', 'a move to finish is converged');
    await applyUntilDone(driver, spec);
    assert.equal(await driver.inspectService(spec), 'running');

    // The repository is its user's, no tenant's; nothing local is left.
    const user = repoUser();
    assert.ok(user);
    assert.notEqual(user.uid, tenant()?.uid);
    const r = layout.repository(id);
    for (const name of ['repo', 'repo-moving', 'repo-moved']) {
      assert.equal(existsSync(join(layout.backupDir(id), name)), false, name);
    }
    assert.equal(existsSync(join(r.dir, 'incoming')), false);
    assert.equal(statSync(r.repo).uid, user.uid);
    assert.equal(statSync(r.repo).mode & 0o777, 0o700);
    const manifest = join(r.repo, 'backup', id, b.label, 'backup.manifest');
    assert.equal(statSync(manifest).uid, user.uid);
    assert.match(readFileSync(layout.backupConf(id), 'utf8'), /repo1-host-type=tls/);

    // Archiving goes on into it: a backup after the move ends (its last
    // segment archived over TLS).
    await query(spec, password, "INSERT INTO f VALUES ('4 after the move')");
    const later = await backupUntilDone(driver, spec);
    assert.ok(existsSync(join(r.repo, 'backup', id, later.label, 'backup.manifest')));

    // The window from before the move is still there.
    const pitr = await makeSpec('POSTGRES', FORK_PASSWORD, {
      source: {
        kind: 'fork',
        parentServiceId: id,
        strategy: 'PITR',
        targetTime: target,
        backupLabel: b.label,
      },
    });
    forks.push(pitr);
    await applyUntilDone(driver, pitr, 120_000);
    const rows = (await query(pitr, FORK_PASSWORD, 'SELECT v FROM f ORDER BY v')).map(
      (row) => row.v as string,
    );
    assert.deepEqual(rows, ['1 in the backup', '2 before the target']);
  });

  test('a service whose move had not started moves on its converge, its backups with it', async () => {
    const id = other.serviceId;
    assert.equal(await driver.inspectService(other), 'failed');
    await applyUntilDone(driver, other);
    assert.equal(await driver.inspectService(other), 'running');
    for (const name of ['repo', 'repo-moving', 'repo-moved']) {
      assert.equal(existsSync(join(layout.backupDir(id), name)), false, name);
    }
    const user = readPasswd().find((p) => p.name === repositoryUserName(id));
    assert.ok(user);
    const r = layout.repository(id);
    assert.equal(statSync(r.repo).uid, user.uid);
    assert.equal(statSync(join(r.repo, 'backup', id, otherLabel, 'backup.manifest')).uid, user.uid);
    // The rows written before the move are in a backup taken after it.
    const later = await backupUntilDone(driver, other);
    assert.notEqual(later.label, otherLabel);
    assert.deepEqual(await query(other, password, 'SELECT count(*)::int AS n FROM g'), [
      { n: 200 },
    ]);
  });

  test('a restarted Basin with servers on leaves the moved service as it is', async () => {
    await driver.close();
    driver = await start(true);
    assert.equal(await driver.inspectService(spec), 'running');
  });
});
