// Issue 7, hole 1 (takeover through a reused uid), tried against Basin as
// shipped (`node dist/main.js`, local driver), by tenants acting only through
// SQL and the API. As service A's OS user (COPY … TO PROGRAM), a tenant copies
// a shell into /tmp/.x-…/sh, makes it setuid and hides it in a directory of
// mode 0311 (the same in /var/tmp, /dev/shm and /run/lock), then deletes A
// through the API. Before the fix, the files survived, the next service C got
// A's uid back, and any tenant running the file became C (its server key, its
// superuser through its socket). Now:
// - with --service-private-tmp off, the files reach the host, a tenant that
//   runs A's setuid shell gets nothing from it (no_new_privs), and the delete
//   removes them (the root sweep);
// - with private /tmp (on, as the default is where the host allows it), they
//   never reach the host, and go with A's server;
// - C never gets A's uid, and a setuid-root shell gives no tenant root.
// test/local/takeover.test.ts proves each defence at the driver.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { filesOwnedBy } from '../local/helpers.js';
import { installation } from './basin-process.js';
import { bootstrapTenant, newTenant, TenantApi, tenantShell } from './tenants.js';

/** The host's world-writable directories, where a tenant may leave files. */
const PLACES = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];

for (const privateTmp of ['off', 'on'] as const) {
  test(
    `setuid leftovers of a deleted service give no one its uid (--service-private-tmp ${privateTmp})`,
    { timeout: 400_000 },
    async (t) => {
      const inst = await installation(t, { args: ['--service-private-tmp', privateTmp] });
      const b = await inst.start();
      const layout = new Layout(inst.dataDir);
      const uidOf = (id: string) => statSync(layout.pgdata({ id, node: 0 })).uid;

      // The attacker has a project of its own (made with the CLI); the other
      // tenant, who later runs what the attacker left, has the bootstrap one.
      const attacker = new TenantApi(b, await newTenant(inst, 'attacker'));
      const other = new TenantApi(b, bootstrapTenant(b));
      const [aSvc, bSvc] = await Promise.all([attacker.create('a'), other.create('b')]);
      await Promise.all([
        attacker.waitForStatus(aSvc.service_id, 'READY'),
        other.waitForStatus(bSvc.service_id, 'READY'),
      ]);
      const aUid = uidOf(aSvc.service_id);
      const bUid = uidOf(bSvc.service_id);
      const hide = `.x-${aSvc.service_id}`;
      const aSql = await tenantShell(aSvc, aSvc.initial_password);
      const bSql = await tenantShell(bSvc, bSvc.initial_password);
      t.after(() => aSql.end());
      t.after(() => bSql.end());

      await t.test('as A: setuid copies of a shell, in 0311 directories', async () => {
        await aSql.feed(
          PLACES.map(
            (d) =>
              `mkdir ${d}/${hide} && cp /bin/bash ${d}/${hide}/sh && chmod 4755 ${d}/${hide}/sh && chmod 0311 ${d}/${hide}`,
          ).join(' && '),
        );
        assert.deepEqual(
          await aSql.run(PLACES.map((d) => `test -u ${d}/${hide}/sh && echo setuid`).join('; ')),
          PLACES.map(() => 'setuid'),
        );
        // Not even A can list them again: a sweep run as A would miss them.
        await aSql.refused(`ls ${PLACES[0]}/${hide}`);
        for (const d of PLACES) {
          // Shared directories: the host sees them. Private ones: it does not.
          assert.equal(existsSync(join(d, hide, 'sh')), privateTmp === 'off', d);
        }
      });

      await t.test("another tenant that runs A's setuid shell stays itself", async () => {
        const run = `${PLACES[0]}/${hide}/sh -p -c 'id -u'`;
        if (privateTmp === 'off') {
          // It is there, and setuid A: a process without no_new_privs would become A.
          assert.deepEqual(await bSql.run(`test -u ${PLACES[0]}/${hide}/sh && echo setuid`), [
            'setuid',
          ]);
          assert.equal(
            spawnSync('/bin/sh', ['-c', run], { uid: bUid, gid: bUid, encoding: 'utf8' }).stdout,
            `${aUid}\n`,
            'run by a process that may gain privileges, it makes B into A',
          );
          assert.deepEqual(await bSql.run(run), [String(bUid)]);
        } else {
          // Its /tmp is not A's: nothing there to run.
          assert.deepEqual(
            await bSql.run(`test -e ${PLACES[0]}/${hide} && echo there || echo absent`),
            ['absent'],
          );
        }
      });

      await t.test('deleting A through the API removes every file its uid owned', async () => {
        await aSql.end();
        await attacker.deleteAndWait(aSvc.service_id);
        assert.equal(
          readPasswd().some((p) => p.name === serviceUserName(aSvc.service_id)),
          false,
          "A's OS user is gone",
        );
        for (const d of PLACES) assert.equal(existsSync(join(d, hide)), false, d);
        assert.deepEqual(
          filesOwnedBy(aUid, [...PLACES, inst.dataDir]),
          [],
          `files of uid ${aUid} are left`,
        );
      });

      // The next service: in the old days it got A's uid, and A's files with it.
      const cSvc = await other.create('c');
      await other.waitForStatus(cSvc.service_id, 'READY');
      const cUid = uidOf(cSvc.service_id);

      await t.test("the next service C never gets A's uid", () => {
        assert.notEqual(cUid, aUid);
        assert.ok(cUid > aUid && cUid > bUid, `C's uid ${cUid} after A's ${aUid} and B's ${bUid}`);
      });

      await t.test('a setuid-root shell gives no tenant root (no_new_privs)', async (tt) => {
        // Planted by root where every tenant can run it: the worst leftover there is.
        const bin = mkdtempSync('/var/lib/basin-suid-');
        tt.after(() => rmSync(bin, { recursive: true, force: true }));
        chmodSync(bin, 0o755);
        const rootShell = join(bin, 'sh');
        copyFileSync('/bin/bash', rootShell);
        chmodSync(rootShell, 0o4755);
        // It works: run as C's uid by a process that may gain privileges, it is root.
        const bare = spawnSync(rootShell, ['-p', '-c', 'id -u'], {
          uid: cUid,
          gid: cUid,
          encoding: 'utf8',
        });
        assert.equal(bare.stdout.trim(), '0');
        // From C's server and B's, through COPY … FROM PROGRAM, it runs as the tenant.
        const c = await tenantShell(cSvc, cSvc.initial_password);
        try {
          assert.deepEqual(await c.run(`${rootShell} -p -c 'id -u'`), [String(cUid)]);
          assert.deepEqual(await c.run('grep NoNewPrivs /proc/self/status'), ['NoNewPrivs:\t1']);
        } finally {
          await c.end();
        }
        assert.deepEqual(await bSql.run(`${rootShell} -p -c 'id -u'`), [String(bUid)]);
      });
    },
  );
}
