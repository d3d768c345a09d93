// A database host cut off from the control plane stops its services
// without HA replicas (src/agent/self-fence.ts): real OS users and
// processes, a clock of the test's. A Patroni node is left to Patroni.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SelfFence } from '../../src/agent/self-fence.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { silentLogger } from '../../src/lib/logger.js';
import { installation } from '../e2e/basin-process.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("a host that hears nothing from the control plane for the time it said stops its services, not Patroni's nodes, and acts again once it hears", async (t) => {
  const inst = await installation(t);
  const uids = inst.serviceUids;
  const layout = new Layout(inst.dataDir);
  const plain = 'fence00001';
  const node = 'fence00002n1';
  mkdirSync(layout.instanceDir(plain), { recursive: true });
  mkdirSync(join(layout.instanceDir(node), 'patroni'), { recursive: true });
  const pids: number[] = [];
  t.after(() => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const processOf = (id: string, uid: number) => {
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin',
      '--uid', String(uid), '--user-group', serviceUserName(id)]); // prettier-ignore
    t.after(() => {
      try {
        execFileSync('userdel', ['-f', serviceUserName(id)], { stdio: 'ignore' });
      } catch {
        // removed with the installation's users already
      }
    });
    const child = spawn('sleep', ['600'], { uid, gid: uid, stdio: 'ignore' });
    pids.push(child.pid as number);
    return child.pid as number;
  };
  const plainPid = processOf(plain, uids.min);
  const nodePid = processOf(node, uids.min + 1);

  let now = 1_000;
  const fence = () =>
    new SelfFence({ dataDir: inst.dataDir, uidRange: uids, log: silentLogger, now: () => now });
  const f = fence();
  // Never told a time (no repository host: nothing is restored elsewhere): never.
  now += 3_600_000;
  assert.deepEqual(await f.check(), []);
  assert.equal(f.mayAct(), true);

  f.answered(1_000);
  now += 999;
  assert.deepEqual(await f.check(), []);
  now += 2;
  assert.deepEqual(await f.check(), [plain]);
  assert.equal(f.mayAct(), false);
  for (let i = 0; i < 50 && alive(plainPid); i++) await sleep(20);
  assert.equal(alive(plainPid), false, "the service's process is killed");
  assert.equal(alive(nodePid), true, "the Patroni node's is not");
  assert.deepEqual(await f.check(), [], 'fenced once');
  f.answered(1_000);
  assert.equal(f.mayAct(), true);

  // Restarted while cut off: it counts from its start, with the time it was told.
  const again = fence();
  now += 1_001;
  const restarted = processOf('fence00003', uids.min + 2);
  mkdirSync(layout.instanceDir('fence00003'), { recursive: true });
  assert.deepEqual(await again.check(), ['fence00003']);
  for (let i = 0; i < 50 && alive(restarted); i++) await sleep(20);
  assert.equal(alive(restarted), false);

  // Told no time any more (the repository host left): never again.
  again.answered(undefined);
  const told = fence();
  now += 3_600_000;
  assert.deepEqual(await told.check(), []);
  assert.equal(told.mayAct(), true);
});
