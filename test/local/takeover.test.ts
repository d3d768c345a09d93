// Issue 7, hole 1: takeover through a reused uid. As service A's OS user (any
// tenant's tsdbadmin can run programs as it, docs/security.md), copy a shell
// into /tmp/.x/sh, make it setuid, and hide it in a 0311 directory its owner
// cannot even list; the same in /var/tmp, /dev/shm and /run/lock. Delete A.
// Before this was fixed, the files survived (the sweep ran as the user, which
// could not read its own 0311 directory, and skipped /run/lock), the next
// service got A's uid back from useradd, and any tenant running the file
// became that service. Each defence is checked on its own, with and without
// the private directories of confine.ts:
// - the files are gone after the delete (or never left the namespace);
// - the uid is never given again, by this driver or by one restarted on the
//   same store;
// - a setuid or file-capability program gives a tenant's processes nothing
//   (no_new_privs), while it would give root to a process without it.

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DriverError, type ServiceSpec } from '../../src/drivers/driver.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { readPasswd, type PasswdEntry } from '../../src/drivers/local/host/os-user.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  filesOwnedBy,
  fromProgram,
  makeDataDir,
  makeSpec,
  postmasterPid,
  tenantSession,
  testUids,
} from './helpers.js';

const PLACES = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];
/** Uids of this process's own (the upper half of its test range): parallel tests never take them. */
const BASE = testUids().serviceUidRange.min + 100;
const password = 'takeover-password-0123';

function osUser(id: string): PasswdEntry | undefined {
  return readPasswd().find((p) => p.name === serviceUserName(id));
}

/** A status line of /proc/<pid>/status, e.g. field(pid, 'NoNewPrivs') → "1". */
function field(pid: number, name: string): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return new RegExp(`^${name}:\\s+(.*)$`, 'm').exec(status)?.[1]?.trim() ?? '';
}

/** The uids' high-water mark kept in a real store, as basin.ts does. */
function storeAllocator(store: Store, min: number) {
  return () => store.transaction((tx) => tx.counters.next('service-uid', min));
}

for (const privateTmp of ['off', 'on'] as const) {
  test(
    `setuid leftovers of a deleted service give no one its uid (private /tmp ${privateTmp})`,
    { timeout: 300_000 },
    async (t) => {
      const RANGE =
        privateTmp === 'on' ? { min: BASE + 50, max: BASE + 99 } : { min: BASE, max: BASE + 49 };
      const dataDir = makeDataDir({ sharedTemplate: true });
      const storeFile = join(dataDir, 'basin.db');
      let store = openSqliteStore(storeFile);
      const start = (s: Store) =>
        createLocalDriver({
          dataDir,
          publicHost: 'localhost',
          privateTmp,
          serviceUidRange: RANGE,
          allocateUid: storeAllocator(s, RANGE.min),
        });
      let driver: LocalDriver = start(store);
      const specs: ServiceSpec[] = [];
      t.after(async () => {
        for (const s of specs) await deleteUntilDone(driver, s.serviceId).catch(() => {});
        await driver.close();
        store.close();
      });
      t.after(() => cleanUpDataDir(dataDir));
      // A setuid-root shell and a perl that may setuid, where every tenant can run them.
      const bin = mkdtempSync('/var/lib/basin-suid-');
      t.after(() => rmSync(bin, { recursive: true, force: true }));
      chmodSync(bin, 0o755);
      const rootShell = join(bin, 'sh');
      copyFileSync('/bin/bash', rootShell);
      chmodSync(rootShell, 0o4755);
      const capPerl = join(bin, 'perl');
      copyFileSync('/usr/bin/perl', capPerl);
      chmodSync(capPerl, 0o755);
      execFileSync('setcap', ['cap_setuid+ep', capPerl]);
      // A file of the range's first uid, which no user has: left by a user
      // deleted outside Basin. Whoever got that uid would own it.
      const stray = join('/var/tmp', `basin-stray-${process.pid}-${RANGE.min}`);
      writeFileSync(stray, 'stray');
      chownSync(stray, RANGE.min, RANGE.min);
      t.after(() => rmSync(stray, { force: true }));
      await driver.start();

      const a = await makeSpec('POSTGRES', password);
      specs.push(a);
      await applyUntilDone(driver, a);
      const aUser = osUser(a.serviceId);
      assert.ok(aUser, 'A has an OS user');
      // The uid that owns a file is skipped (and any other the host holds:
      // a test process of an earlier run with this pid may have left one).
      assert.notEqual(aUser.uid, RANGE.min, 'the uid that owns a file is skipped');
      assert.ok(aUser.uid > RANGE.min && aUser.uid <= RANGE.max, `uid ${aUser.uid} in its range`);
      assert.equal(aUser.gid, aUser.uid, 'its own group has the same id');
      const hide = `.x-${a.serviceId}`;

      await t.test('as A: setuid copies of a shell, in 0311 directories', async () => {
        const c = await tenantSession(a, password);
        try {
          const plant = PLACES.map(
            (d) =>
              `mkdir ${d}/${hide} && cp /bin/bash ${d}/${hide}/sh && chmod 4755 ${d}/${hide}/sh && chmod 0311 ${d}/${hide}`,
          ).join(' && ');
          assert.deepEqual(await fromProgram(c, `${plant} && echo planted`), ['planted']);
          const check = PLACES.map((d) => `test -u ${d}/${hide}/sh && echo setuid`).join('; ');
          assert.deepEqual(
            await fromProgram(c, check),
            PLACES.map(() => 'setuid'),
          );
          assert.deepEqual(await fromProgram(c, `ls ${PLACES[0]}/${hide} 2>&1 || true`), [
            `ls: cannot open directory '${PLACES[0]}/${hide}': Permission denied`,
          ]);
        } finally {
          await c.end();
        }
        for (const d of PLACES) {
          // Shared directories: the host sees them. Private ones: it does not.
          assert.equal(existsSync(join(d, hide, 'sh')), privateTmp === 'off', d);
        }
      });

      await t.test('deleting A removes every file its uid owned, wherever it was', async () => {
        await deleteUntilDone(driver, a.serviceId);
        specs.shift();
        assert.equal(osUser(a.serviceId), undefined, 'the user is gone');
        for (const d of PLACES) assert.equal(existsSync(join(d, hide)), false, d);
        assert.deepEqual(filesOwnedBy(aUser.uid, [...PLACES, dataDir]), []);
      });

      const c = await makeSpec('POSTGRES', password);
      specs.push(c);
      await applyUntilDone(driver, c);
      const cUser = osUser(c.serviceId);
      assert.ok(cUser);

      await t.test('the next service never gets the deleted uid', () => {
        assert.notEqual(cUser.uid, aUser.uid);
        assert.ok(cUser.uid > aUser.uid, `${cUser.uid} after ${aUser.uid}`);
      });

      await t.test("setuid and file capabilities give a tenant's processes nothing", async () => {
        const uid = String(cUser.uid);
        const asRoot = `($<, $>) = (0, 0); print "$>\\n"`;
        // Without no_new_privs, both would make C root: the programs work.
        const bare = { uid: cUser.uid, gid: cUser.gid, encoding: 'utf8' as const };
        assert.equal(spawnSync(rootShell, ['-p', '-c', 'id -u'], bare).stdout.trim(), '0');
        assert.equal(spawnSync(capPerl, ['-e', asRoot], bare).stdout.trim(), '0');
        // From C's server, they run as C.
        const session = await tenantSession(c, password);
        try {
          assert.deepEqual(await fromProgram(session, `${rootShell} -p -c 'id -u'`), [uid]);
          // A binary with file capabilities it could not get (the bounding
          // set is empty) is not even run: EPERM, which is no privilege either.
          const perl = await fromProgram(session, `${capPerl} -e '${asRoot}' 2>&1; echo "exit=$?"`);
          assert.ok(
            (perl[0] === uid && perl[1] === 'exit=0') ||
              /Operation not permitted/.test(perl.join('\n')),
            perl.join(' | '),
          );
          assert.deepEqual(await fromProgram(session, 'grep NoNewPrivs /proc/self/status'), [
            'NoNewPrivs:\t1',
          ]);
        } finally {
          await session.end();
        }
      });

      const pgdata = new Layout(dataDir).pgdata({ id: c.serviceId, node: 0 });
      const pid = postmasterPid(pgdata);

      await t.test('the postmaster is the process Basin spawned, confined', () => {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        assert.match(argv[0] ?? '', /\/postgres$/);
        assert.deepEqual(argv.slice(1, 3), ['-D', pgdata]);
        assert.equal(field(pid, 'NoNewPrivs'), '1');
        assert.equal(field(pid, 'CapBnd'), '0000000000000000');
        assert.equal(field(pid, 'Uid'), uid4(cUser.uid));
        const ns = (p: number | 'self') => execFileSync('readlink', [`/proc/${p}/ns/mnt`]);
        assert.equal(ns(pid).equals(ns('self')), privateTmp === 'off', 'its own mount namespace');
      });

      await t.test(
        'a restarted Basin adopts the server, never reuses a uid, and says when the range runs out',
        async () => {
          await driver.close();
          store.close();
          store = openSqliteStore(storeFile);
          driver = start(store);
          await driver.start();
          assert.equal(await driver.inspectService(c), 'running');
          await applyUntilDone(driver, c);
          assert.equal(postmasterPid(pgdata), pid, 'not restarted');
          const d = await makeSpec('POSTGRES', password);
          specs.push(d);
          await applyUntilDone(driver, d);
          const dUser = osUser(d.serviceId);
          assert.ok(dUser && dUser.uid > cUser.uid, `${dUser?.uid} after ${cUser.uid}`);

          // A range whose every uid was given: no user, a permanent error that says what to do.
          const full = createLocalDriver({
            dataDir,
            publicHost: 'localhost',
            privateTmp,
            serviceUidRange: { min: RANGE.min, max: dUser.uid },
            allocateUid: storeAllocator(store, RANGE.min),
          });
          await full.start();
          const e = await makeSpec('POSTGRES', password);
          await assert.rejects(
            applyUntilDone(full, e),
            (err: unknown) =>
              err instanceof DriverError &&
              !err.retryable &&
              /widen --service-uid-range \(BASIN_SERVICE_UID_RANGE\)/.test(err.message),
          );
          await full.close();
          assert.equal(osUser(e.serviceId), undefined);
        },
      );
    },
  );
}

/** The Uid: line of a process whose real, effective, saved and filesystem uids are `uid`. */
function uid4(uid: number): string {
  return [uid, uid, uid, uid].join('\t');
}
