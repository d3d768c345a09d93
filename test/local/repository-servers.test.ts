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

describe('local driver: a repository server per service', { skip: notRoot }, () => {
  let dataDir: string;
  let layout: Layout;
  let driver: LocalDriver;
  let block: PortBlock;
  let spec: ServiceSpec;
  const password = 'repo-server-password-0123';
  const FORK_PASSWORD = 'repo-server-fork-0123';
  const forks: ServiceSpec[] = [];
  const logged: Record<string, unknown>[] = [];
  const uids = testUids();
  const start = async () => {
    const d = createLocalDriver({
      ...uids,
      dataDir,
      publicHost: 'db.example.test',
      log: { ...silentLogger, info: (obj, msg) => logged.push({ ...obj, msg }) },
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
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = await start();
    layout = new Layout(dataDir);
    spec = await makeSpec('POSTGRES', password);
    await applyUntilDone(driver, spec);
  });

  after(async () => {
    await Promise.all(
      [...forks, spec].map((f) => f && deleteUntilDone(driver, f.serviceId).catch(() => {})),
    );
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

  test("LAST_SNAPSHOT and PITR forks restore through the parent's server, admitted while they are made", async () => {
    await query(spec, password, 'CREATE TABLE f (v text)');
    await query(spec, password, "INSERT INTO f VALUES ('1 in the backup')");
    const b = await backupUntilDone(driver, spec);
    await query(spec, password, "INSERT INTO f VALUES ('2 before the target')");
    await sleep(1_000);
    const target = new Date().toISOString();
    await sleep(1_000);
    await query(spec, password, "INSERT INTO f VALUES ('3 after the target')");
    const rows = async (f: ServiceSpec) =>
      (await query(f, FORK_PASSWORD, 'SELECT v FROM f ORDER BY v')).map((r) => r.v as string);
    const forkOf = async (strategy: 'LAST_SNAPSHOT' | 'PITR') => {
      const f = await makeSpec('POSTGRES', FORK_PASSWORD, {
        source: {
          kind: 'fork',
          parentServiceId: spec.serviceId,
          strategy,
          targetTime: strategy === 'PITR' ? target : null,
          backupLabel: b.label,
        },
      });
      forks.push(f);
      await applyUntilDone(driver, f, 120_000);
      return f;
    };
    // Both made side by side: two guests of the parent's server at once.
    const [snapshot, pitr] = await Promise.all([forkOf('LAST_SNAPSHOT'), forkOf('PITR')]);
    assert.deepEqual(await rows(snapshot), ['1 in the backup']);
    assert.deepEqual(await rows(pitr), ['1 in the backup', '2 before the target']);
    for (const f of [snapshot, pitr]) {
      assert.ok(
        logged.some(
          (l) =>
            l.serviceId === f.serviceId && l.msg === "admitted to its parent's repository server",
        ),
        'restored through the server',
      );
      // Nothing of the parent's repository was copied; its admission is gone once open.
      assert.equal(existsSync(layout.forkSource(f.serviceId).repo), false);
      assert.equal(existsSync(layout.forkSource(f.serviceId).conf), false);
      // A repository of its own, its own user's.
      assert.ok(existsSync(layout.repository(f.serviceId).repo));
    }
    const guests = layout.repository(spec.serviceId).guests;
    assert.deepEqual(JSON.parse(readFileSync(guests, 'utf8')), []);
    assert.doesNotMatch(
      readFileSync(layout.repository(spec.serviceId).serverConf, 'utf8'),
      new RegExp(`basin-service-(?!${spec.serviceId}=)`),
    );
    const record = JSON.parse(
      readFileSync(join(layout.instanceDir(spec.serviceId), 'network.json'), 'utf8'),
    ) as { hostGuests?: string[] };
    assert.equal(record.hostGuests, undefined);
  });

  test('expiry runs as the repository user: the older backup goes', async () => {
    const dir = join(layout.repository(spec.serviceId).repo, 'backup', spec.serviceId);
    const labels = () =>
      readdirSync(dir)
        .filter((n) => /^\d{8}-\d{6}F$/.test(n))
        .sort();
    const before = labels();
    assert.equal(before.length, 2);
    await driver.expireBackups(spec.serviceId, before[1] as string);
    assert.deepEqual(labels(), [before[1]]);
  });

  test('a restarted driver adopts the running server', async () => {
    const pid = serverPid();
    await driver.close();
    driver = await start();
    await applyUntilDone(driver, spec);
    assert.equal(serverPid(), pid);
    assert.equal(await driver.inspectService(spec), 'running');
  });

  test('deleting the service, in the middle of a backup, takes its server, repository and user', async () => {
    const pid = serverPid();
    const r = layout.repository(spec.serviceId);
    const started = await driver.backupService(spec, Date.now());
    assert.equal(started.done, false, 'a backup runs');
    await sleep(Number(process.env.DELAY ?? 500));
    await deleteUntilDone(driver, spec.serviceId);
    assert.equal(existsSync(r.dir), false);
    assert.equal(repoUser(), undefined);
    assert.equal(existsSync(`/proc/${pid}`), false);
  });
});
