// Backups with pgBackRest against real PostgreSQL: one stanza per service,
// in a repository only the service's OS user (and root) can read; full
// backups in the background, below the server in priority; expiry of older
// backups and of the WAL only they needed; the stanza gone with the service.

import assert from 'node:assert/strict';
import {
  chownSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { CGROUP_V1_CPU } from '../../src/drivers/local/host/cgroups/backup-cgroup.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  query,
  testUids,
} from './helpers.js';
import { backupUntilDone } from '../contract/driver-contract.js';

const notRoot = process.getuid?.() !== 0 ? 'per-service OS users need root' : false;

describe('local driver: backups with pgBackRest', { skip: notRoot }, () => {
  let dataDir: string;
  let layout: Layout;
  let driver: LocalDriver;
  let spec: ServiceSpec;
  const password = 'backup-password-0123';
  const stanzaDir = () => join(layout.backupDirs(spec.serviceId).repo, 'backup', spec.serviceId);
  const segments = () => {
    const dir = join(
      layout.backupDirs(spec.serviceId).repo,
      'archive',
      spec.serviceId,
      '15-1',
      '0000000100000000',
    );
    return readdirSync(dir)
      .filter((f) => /^[0-9A-F]{24}-/.test(f))
      .map((f) => f.slice(0, 24))
      .sort();
  };

  before(async () => {
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = createLocalDriver({ ...testUids(), dataDir, publicHost: 'db.example.test' });
    await driver.start();
    layout = new Layout(dataDir);
    spec = await makeSpec('POSTGRES', password);
    await applyUntilDone(driver, spec);
  });

  after(async () => {
    if (spec) await deleteUntilDone(driver, spec.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  test("the stanza is made before the first start, in the service user's directories", () => {
    const user = readPasswd().find((p) => p.name === serviceUserName(spec.serviceId));
    assert.ok(user);
    assert.ok(existsSync(layout.backupInfo(spec.serviceId)), 'backup.info exists');
    for (const dir of Object.values(layout.backupDirs(spec.serviceId))) {
      const st = statSync(dir);
      assert.equal(st.uid, user.uid, dir);
      assert.equal(st.mode & 0o777, 0o700, dir);
    }
    const conf = statSync(layout.backupConf(spec.serviceId));
    assert.equal(conf.uid, 0);
    assert.equal(conf.gid, user.gid, "readable by the service's own group alone");
    assert.equal(conf.mode & 0o777, 0o640);
    assert.equal(statSync(layout.backupDir(spec.serviceId)).mode & 0o777, 0o711);
  });

  test('a full backup runs in the background and is reported once complete', async () => {
    await query(spec, password, 'CREATE TABLE t AS SELECT generate_series(1, 1000) AS i');
    const since = Date.now();
    const first = await driver.backupService(spec, since);
    assert.equal(first.done, false, 'the first call only starts it');
    const b = await backupUntilDone(driver, spec, since);
    assert.match(b.label, /^\d{8}-\d{6}F$/);
    assert.ok(Date.parse(b.startedAt) >= Math.floor(since / 1000) * 1000);
    assert.ok(Date.parse(b.stoppedAt) > Date.parse(b.startedAt));
    assert.ok(existsSync(join(stanzaDir(), b.label, 'backup.manifest')));
    // Asked again for the same moment: the same backup, nothing new.
    assert.deepEqual(await driver.backupService(spec, since), { done: true, backup: b });
    // The server's own logs are not part of it: its manifest (the files are
    // bundled) has the directory and nothing in it.
    const manifest = readFileSync(join(stanzaDir(), b.label, 'backup.manifest'), 'utf8');
    assert.match(manifest, /^pg_data\/log=/m);
    assert.match(manifest, /^pg_data\/PG_VERSION=/m);
    assert.doesNotMatch(manifest, /^pg_data\/log\//m);
  });

  test('a backup runs below the server: a session of its own, its group niced to 19', async () => {
    const uid = statSync(layout.pgdata({ id: spec.serviceId, node: 0 })).uid;
    const since = Date.now();
    assert.equal((await driver.backupService(spec, since)).done, false);
    // Found while it runs (the backup of a small service takes a second or two).
    let found: ReturnType<typeof backupProcess>;
    const deadline = Date.now() + 30_000;
    while (found === undefined && Date.now() < deadline) {
      found = backupProcess(uid);
      if (found === undefined) await sleep(5);
    }
    assert.ok(found, 'the backup process was seen');
    assert.match(found.autogroup, /nice 19$/m);
    assert.notEqual(found.session, sessionOf('self'), "not in Basin's session");
    assert.equal(found.session, found.pid, 'the leader of its own session');
    await backupUntilDone(driver, spec, since);
  });

  test(
    'a backup runs in a cgroup of its own, a quarter of a CPU, removed once it is done',
    {
      skip: existsSync(join(CGROUP_V1_CPU, 'cpu.cfs_quota_us'))
        ? false
        : 'no cgroup v1 cpu controller',
    },
    async () => {
      const uid = statSync(layout.pgdata({ id: spec.serviceId, node: 0 })).uid;
      const since = Date.now();
      assert.equal((await driver.backupService(spec, since)).done, false);
      let found: ReturnType<typeof backupProcess>;
      const deadline = Date.now() + 30_000;
      while (found === undefined && Date.now() < deadline) {
        found = backupProcess(uid);
        if (found === undefined) await sleep(5);
      }
      assert.ok(found, 'the backup process was seen');
      const dir = join(CGROUP_V1_CPU, 'basin-backups', spec.serviceId);
      assert.match(
        found.cgroup,
        new RegExp(`^\\d+:[^:]*\\bcpu\\b[^:]*:/basin-backups/${spec.serviceId}$`, 'm'),
      );
      assert.equal(readFileSync(join(dir, 'cpu.cfs_quota_us'), 'utf8').trim(), '25000');
      assert.equal(readFileSync(join(dir, 'cpu.cfs_period_us'), 'utf8').trim(), '100000');
      assert.equal(readFileSync(join(dir, '..', 'cpu.shares'), 'utf8').trim(), '2');
      await backupUntilDone(driver, spec, since);
      assert.equal(existsSync(dir), false, 'its cgroup is gone');
    },
  );

  test('expiry removes older backups and the WAL only they needed', async () => {
    const older = await backupUntilDone(driver, spec);
    await sleep(1_100); // labels are per second
    await query(spec, password, 'INSERT INTO t SELECT generate_series(1, 1000)');
    const newer = await backupUntilDone(driver, spec);
    assert.notEqual(newer.label, older.label);
    const walBefore = segments();
    await driver.expireBackups(spec.serviceId, newer.label);
    const left = readdirSync(stanzaDir()).filter((f) => /F$/.test(f));
    assert.deepEqual(left, [newer.label]);
    const walAfter = segments();
    assert.ok(walAfter.length < walBefore.length, `${walBefore} → ${walAfter}`);
    // Expiring up to a label that is not there changes nothing.
    await driver.expireBackups(spec.serviceId, '20000101-000000F');
    assert.deepEqual(
      readdirSync(stanzaDir()).filter((f) => /F$/.test(f)),
      [newer.label],
    );
  });

  test('a stopped service is not backed up (a retryable error)', async () => {
    const stopped = { ...spec, running: false };
    await applyUntilDone(driver, stopped);
    await assert.rejects(driver.backupService(stopped, Date.now() + 5_000), (err: Error) => {
      assert.match(err.message, /is not running/);
      assert.equal((err as { retryable?: boolean }).retryable, true);
      return true;
    });
    await applyUntilDone(driver, spec);
  });

  test('a stanza an interrupted stanza-create left half-made is made again; one with backups is not touched', async () => {
    const id = spec.serviceId;
    const repo = layout.backupDirs(id).repo;
    const archive = join(repo, 'archive', id);
    const { uid, gid } = statSync(repo);
    const plant = (path: string) => {
      writeFileSync(path, 'torn');
      chownSync(path, uid, gid);
    };
    // Killed between archive.info and backup.info, after a backup set was
    // made: a repository that needs a person (pgBackRest says so), left as it is.
    const [set] = readdirSync(stanzaDir()).filter((f) => /F$/.test(f));
    for (const f of ['backup.info', 'backup.info.copy']) rmSync(join(stanzaDir(), f));
    await assert.rejects(driver.backupService(spec, Date.now()), /backup\.info is missing/);
    assert.ok(existsSync(join(stanzaDir(), set!)), 'its backup set is kept');
    // Killed while it wrote its first file: a lone archive.info.pgbackrest.tmp.
    rmSync(stanzaDir(), { recursive: true });
    for (const f of ['archive.info', 'archive.info.copy']) rmSync(join(archive, f));
    plant(join(archive, 'archive.info.pgbackrest.tmp'));
    const b = await backupUntilDone(driver, spec);
    assert.deepEqual(
      readdirSync(stanzaDir()).filter((f) => /F$/.test(f)),
      [b.label],
      'a new stanza with the new backup alone',
    );
    assert.ok(existsSync(join(archive, 'archive.info')));
    assert.equal(existsSync(join(archive, 'archive.info.pgbackrest.tmp')), false);
    // It archives again: a backup ends only once its last segment is archived.
    await sleep(1_100); // labels are per second
    const next = await backupUntilDone(driver, spec);
    assert.notEqual(next.label, b.label);
  });

  test('deleting the service deletes its stanza and repository', async () => {
    await deleteUntilDone(driver, spec.serviceId);
    assert.equal(existsSync(layout.backupDir(spec.serviceId)), false);
    assert.equal(existsSync(join(CGROUP_V1_CPU, 'basin-backups', spec.serviceId)), false);
  });
});

/** The session id of a process (field 6 of /proc/<pid>/stat). */
function sessionOf(pid: number | 'self'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

/** The main `pgbackrest … backup` process of `uid`, if one runs: its pid, session and autogroup. */
function backupProcess(
  uid: number,
): { pid: number; session: number; autogroup: string; cgroup: string } | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) !== uid) continue;
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
      const main = argv.at(-2) === '--type=full' && argv.at(-1) === 'backup';
      if (!/pgbackrest$/.test(argv[0] ?? '') || !main) continue;
      const pid = Number(name);
      return {
        pid,
        session: sessionOf(pid),
        autogroup: readFileSync(`/proc/${name}/autogroup`, 'utf8'),
        cgroup: readFileSync(`/proc/${name}/cgroup`, 'utf8'),
      };
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}
