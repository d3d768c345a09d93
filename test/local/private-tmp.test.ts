// Where the host allows it, each service's server runs in namespaces of its
// own (confine.ts): private, size-limited /tmp, /var/tmp, /dev/shm and
// /run/lock, private System V IPC, and a /proc that shows only its own
// processes. What a tenant leaves there lives and dies with its server, and
// no other tenant sees it. A server an older Basin started without them is
// restarted into them.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgInstall } from '../../src/drivers/local/host-check.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver } from '../../src/drivers/local/local-driver.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { postmasterStatus } from '../../src/drivers/local/node/postmaster.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  fromProgram,
  makeDataDir,
  makeSpec,
  postmasterPid,
  tenantSession,
  testUids,
} from './helpers.js';

const PLACES = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];
const password = 'private-tmp-password-0123';
const SIZE_MB = 64;

const mntNs = (pid: number | 'self') => readlinkSync(`/proc/${pid}/ns/mnt`);
const noNewPrivs = (pid: number) =>
  /^NoNewPrivs:\s+1$/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

test(
  "a service's /tmp & co. are its own, and die with its server",
  { timeout: 300_000 },
  async (t) => {
    const dataDir = makeDataDir();
    const driver = createLocalDriver({
      ...testUids(),
      dataDir,
      publicHost: 'localhost',
      privateTmp: 'on',
      privateTmpMb: SIZE_MB,
    });
    const [a, b] = await Promise.all([
      makeSpec('POSTGRES', password),
      makeSpec('POSTGRES', password),
    ]);
    t.after(async () => {
      for (const s of [a, b]) await deleteUntilDone(driver, s.serviceId).catch(() => {});
      await driver.close();
    });
    t.after(() => cleanUpDataDir(dataDir));
    // A network namespace of someone else's on the host while the servers
    // start: their mount namespaces must not hold it (see the last step).
    const otherNetns = `basin-test-other-${process.pid}`;
    execFileSync('ip', ['netns', 'add', otherNetns]);
    t.after(() => execFileSync('ip', ['netns', 'delete', otherNetns]));
    await driver.start();
    await Promise.all([applyUntilDone(driver, a), applyUntilDone(driver, b)]);
    const layout = new Layout(dataDir);
    const pgdata = (id: string) => layout.pgdata({ id, node: 0 });
    const secret = `secret-${a.serviceId}`;
    const ca = await tenantSession(a, password);
    const cb = await tenantSession(b, password);
    t.after(async () => {
      await ca.end().catch(() => {});
      await cb.end().catch(() => {});
    });

    await t.test(
      "one tenant's files there are invisible to the others and to the host",
      async () => {
        const write = PLACES.map((d) => `echo a > ${d}/${secret} && chmod 644 ${d}/${secret}`);
        assert.deepEqual(await fromProgram(ca, `${write.join(' && ')} && echo ok`), ['ok']);
        const look = PLACES.map((d) => `test -e ${d}/${secret} && echo seen || echo unseen`);
        assert.deepEqual(
          await fromProgram(ca, look.join('; ')),
          PLACES.map(() => 'seen'),
        );
        assert.deepEqual(
          await fromProgram(cb, look.join('; ')),
          PLACES.map(() => 'unseen'),
        );
        for (const d of PLACES) assert.equal(existsSync(join(d, secret)), false, d);
      },
    );

    await t.test("a server's mount namespace holds no network namespace of the host's", () => {
      // A copy of /run/netns's mounts would keep every other service's
      // network namespace alive after its delete, as long as this server runs.
      assert.ok(existsSync(`/run/netns/${otherNetns}`));
      const pid = postmasterPid(pgdata(a.serviceId));
      const mounts = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n');
      assert.deepEqual(
        mounts.filter((m) => / - nsfs /.test(m)),
        [],
      );
    });

    await t.test('each private directory is a tmpfs of the configured size', async () => {
      const sizes = await fromProgram(ca, `df -P -m ${PLACES.join(' ')} | tail -n +2`);
      assert.equal(sizes.length, PLACES.length);
      for (const line of sizes) {
        const [fs, blocks] = line.split(/\s+/);
        assert.equal(fs, 'basin-private', line);
        assert.equal(Number(blocks), SIZE_MB, line);
      }
      const full = await fromProgram(
        ca,
        `head -c ${SIZE_MB + 1}M /dev/zero 2>&1 >/tmp/big; echo "exit=$?"; rm -f /tmp/big`,
      );
      assert.match(full.join('\n'), /No space left on device/);
    });

    await t.test('a tenant sees only its own processes and IPC objects', async () => {
      const [pa, pb] = [postmasterPid(pgdata(a.serviceId)), postmasterPid(pgdata(b.serviceId))];
      const seen = (pid: number) => `test -e /proc/${pid} && echo seen || echo unseen`;
      assert.deepEqual(await fromProgram(ca, `${seen(pa)}; ${seen(pb)}`), ['seen', 'unseen']);
      const [key] = await fromProgram(
        ca,
        'ipcmk -M 4096 >/dev/null && ipcs -m | grep -o "^0x[0-9a-f]*" | tail -1',
      );
      assert.match(key ?? '', /^0x[0-9a-f]+$/);
      assert.deepEqual(await fromProgram(cb, `ipcs -m | grep -c ${key} || true`), ['0']);
      const hostKeys = readFileSync('/proc/sysvipc/shm', 'utf8')
        .split('\n')
        .slice(1)
        .map((l) => Number(l.trim().split(/\s+/)[0]));
      assert.ok(!hostKeys.includes(Number(key)), 'the host does not see it either');
    });

    await t.test("Basin's data directory above the services' tree stays out of view", async () => {
      const out = await fromProgram(ca, `ls ${dataDir} 2>&1; echo "exit=$?"`);
      assert.match(out.join('\n'), /Permission denied/);
      assert.notEqual(out.at(-1), 'exit=0');
    });

    await t.test('stopping the server ends its private files and its processes', async () => {
      await fromProgram(ca, 'setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started');
      await ca.end();
      const user = readPasswd().find((p) => p.name === serviceUserName(a.serviceId));
      assert.ok(user);
      await applyUntilDone(driver, { ...a, running: false });
      assert.deepEqual(await processesOfUser(user.uid), [], 'no process of the tenant is left');
      await applyUntilDone(driver, a);
      const again = await tenantSession(a, password);
      try {
        const look = PLACES.map((d) => `test -e ${d}/${secret} && echo seen || echo unseen`);
        assert.deepEqual(
          await fromProgram(again, look.join('; ')),
          PLACES.map(() => 'unseen'),
        );
      } finally {
        await again.end();
      }
    });

    await t.test('a server an older Basin started unconfined is restarted confined', async () => {
      await cb.end();
      const pd = pgdata(b.serviceId);
      await applyUntilDone(driver, { ...b, running: false });
      const user = readPasswd().find((p) => p.name === serviceUserName(b.serviceId));
      assert.ok(user);
      // How servers were started before: Node switches the user, nothing else.
      const old = spawn(join(pgInstall().bin, 'postgres'), ['-D', pd], {
        uid: user.uid,
        gid: user.gid,
        cwd: pd,
        detached: true,
        stdio: 'ignore',
      });
      old.unref();
      for (let i = 0; ; i++) {
        const st = await postmasterStatus(pd);
        if (st.up && st.state === 'ready') break;
        assert.ok(i < 400, 'the old-style server did not start');
        await sleep(25);
      }
      assert.equal(noNewPrivs(old.pid as number), false);
      assert.equal(await driver.inspectService(b), 'failed');
      const reasons = await applyUntilDone(driver, b);
      assert.ok(
        reasons.some((r) => /confine/.test(r)),
        `reasons: ${reasons}`,
      );
      const pid = postmasterPid(pd);
      assert.notEqual(pid, old.pid);
      assert.ok(noNewPrivs(pid));
      assert.notEqual(mntNs(pid), mntNs('self'));
      assert.equal(await driver.inspectService(b), 'running');
    });
  },
);
