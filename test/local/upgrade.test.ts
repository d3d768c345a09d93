// A service made before services had OS users of their own runs as the
// template user (postgres). The next apply stops it, hands its files to a
// new OS user of its own and starts it again as that user, data intact.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { pgInstall } from '../../src/drivers/local/host-check.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { postmasterStatus, spawnPostmaster } from '../../src/drivers/local/node/postmaster.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  postmasterPid,
  query,
  testUids,
} from './helpers.js';

const uidOf = (pid: number) =>
  Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);

describe('local driver: a service that ran as postgres moves to its own OS user', () => {
  let dataDir: string;
  let driver: LocalDriver;
  let spec: ServiceSpec;
  const password = 'upgrade-password-0123';

  before(async () => {
    assert.equal(process.getuid?.(), 0, 'per-service OS users need root: run the suite as root');
    dataDir = makeDataDir();
    driver = createLocalDriver({ ...testUids(), dataDir, publicHost: 'localhost' });
    await driver.start();
    spec = await makeSpec('POSTGRES', password);
  });

  after(async () => {
    if (spec) await deleteUntilDone(driver, spec.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  test('stopped, handed over, started again as the service user', async () => {
    await applyUntilDone(driver, spec);
    await query(spec, password, 'CREATE TABLE kept AS SELECT 42 AS answer');
    const layout = new Layout(dataDir);
    const ref = { id: spec.serviceId, node: 0 };
    const name = serviceUserName(spec.serviceId);
    const postgres = readPasswd().find((p) => p.name === 'postgres');
    assert.ok(postgres);

    // Yesterday's layout: everything the postgres user's, the server run by
    // it, and no user for the service.
    spec = { ...spec, running: false };
    await applyUntilDone(driver, spec);
    const owned = [
      layout.pgdata(ref),
      layout.socketDir(ref),
      ...Object.values(layout.backupDirs(spec.serviceId)),
    ];
    execFileSync('chown', ['-R', `${postgres.uid}:${postgres.gid}`, ...owned]);
    execFileSync('userdel', ['-f', name]);
    const old = await spawnPostmaster({
      pgBin: pgInstall().bin,
      pgdata: layout.pgdata(ref),
      logFile: layout.startupLog(ref),
      user: postgres,
    });
    for (let i = 0; ; i++) {
      const st = await postmasterStatus(layout.pgdata(ref));
      if (st.up && st.state === 'ready') break;
      assert.ok(i < 400 && !old.exit, 'the old-style server did not start');
      await sleep(25);
    }
    assert.equal(uidOf(old.pid), postgres.uid);

    spec = { ...spec, running: true };
    const reasons = await applyUntilDone(driver, spec);
    assert.ok(
      reasons.some((r) => /own OS user/.test(r)),
      `reasons: ${reasons}`,
    );
    const user = readPasswd().find((p) => p.name === name);
    assert.ok(user, 'the service user was made');
    const pid = postmasterPid(layout.pgdata(ref));
    assert.notEqual(pid, old.pid);
    assert.equal(uidOf(pid), user.uid);
    for (const path of owned) assert.equal(statSync(path).uid, user.uid, path);
    const [row] = await query(spec, password, 'SELECT answer FROM kept');
    assert.equal(row.answer, 42);
  });

  test('a service user made before uid ranges keeps its uid, and its files go with it', async () => {
    const layout = new Layout(dataDir);
    const tag = readFileSync(layout.installationFile, 'utf8').trim();
    const old = await makeSpec('POSTGRES', password);
    const name = serviceUserName(old.serviceId);
    // As an older Basin made them: a system uid, from useradd's own pick.
    execFileSync('useradd', [
        '--system', '--no-create-home', '--home-dir', '/nonexistent',
        '--shell', '/usr/sbin/nologin', '--user-group',
        '--comment', `Basin service ${old.serviceId} installation ${tag}`, name,
      ]); // prettier-ignore
    const user = readPasswd().find((p) => p.name === name);
    assert.ok(user && user.uid < 1000, `a system uid: ${user?.uid}`);
    try {
      await applyUntilDone(driver, old);
      const pgdata = layout.pgdata({ id: old.serviceId, node: 0 });
      assert.equal(statSync(pgdata).uid, user.uid);
      assert.equal(uidOf(postmasterPid(pgdata)), user.uid);
      const left = `/var/tmp/basin-upgrade-${old.serviceId}`;
      writeFileSync(left, 'left behind');
      chownSync(left, user.uid, user.gid);
      await deleteUntilDone(driver, old.serviceId);
      assert.equal(existsSync(left), false, 'its files are removed with it');
      assert.equal(
        readPasswd().some((p) => p.name === name),
        false,
      );
    } finally {
      await deleteUntilDone(driver, old.serviceId).catch(() => {});
    }
  });
});
