// Issue 18, item 1: an installation upgraded in place keeps no repository a
// tenant can write. Basin as shipped (`node dist/main.js`) runs with
// `--repository-servers off`: a service is made, backed up and written to,
// its repository the service's own user's. Restarted with servers on (the
// default), Basin moves it at its first reconcile into a repository of its
// repository user's (repository/move.ts): the old directory is gone, and
// a PITR fork to a moment before the restart has that moment's rows.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout } from '../../src/drivers/local/layout.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { parseBackupInfo } from '../../src/drivers/local/config/pgbackrest.js';
import { repositoryUserName, serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';

test(
  'a service made with repository servers off moves into its own repository at the restart with them on',
  { timeout: 900_000 },
  async (t) => {
    const inst = await installation(t, {
      args: ['--backup-schedule', '1d', '--pitr-window', '1d'],
      env: { BASIN_RECONCILE_INTERVAL_MS: '500' },
    });
    let b = await inst.start({ args: ['--repository-servers', 'off'] });
    const layout = new Layout(inst.dataDir);
    const created = await b.call('POST', b.servicePath(), {
      name: 'moved',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    const ready = await b.waitForStatus(created.body.service_id, 'READY', 120_000);
    const id = ready.service_id as string;
    const port = ready.endpoint.port as number;
    const password = created.body.initial_password as string;
    const local = layout.backupDirs(id).repo;
    const tenant = readPasswd().find((p) => p.name === serviceUserName(id));
    assert.equal(statSync(local).uid, tenant?.uid, "a local repository, the tenant's");
    await pgQuery(port, password, 'CREATE TABLE f (v text)');
    await pgQuery(port, password, "INSERT INTO f VALUES ('1 in the backup')");
    // Its first backup (the one at its first READY) is in the local repository.
    await b.waitFor(
      async () => {
        try {
          return parseBackupInfo(readFileSync(layout.backupInfo(id), 'utf8')).length > 0;
        } catch {
          return false;
        }
      },
      'the first backup',
      120_000,
    );
    await pgQuery(port, password, "INSERT INTO f VALUES ('2 before the target')");
    await sleep(1_000);
    const target = new Date().toISOString();
    await sleep(1_000);
    await pgQuery(port, password, "INSERT INTO f VALUES ('3 after the target')");
    assert.deepEqual(await b.stop(), { code: 0, signal: null });

    b = await inst.start();
    const r = layout.repository(id);
    await b.waitFor(
      async () => !existsSync(local) && !existsSync(join(layout.backupDir(id), 'repo-moved')),
      'the move',
      120_000,
    );
    await b.waitForStatus(id, 'READY', 120_000);
    const user = readPasswd().find((p) => p.name === repositoryUserName(id));
    assert.ok(user);
    assert.notEqual(user.uid, tenant?.uid);
    assert.equal(statSync(r.repo).uid, user.uid);
    assert.equal(statSync(join(r.repo, 'backup', id, 'backup.info')).uid, user.uid);
    assert.equal(existsSync(join(layout.backupDir(id), 'repo-moving')), false);

    // The first backup may have finished in the repository just before the
    // stop, between two polls of its operation: the restarted engine's next
    // poll finds it there and records it, and until then a PITR fork is
    // refused as its 409 says ("retry … once that backup has completed").
    let res = await b.call('POST', `${b.servicePath(id)}/forkService`, {
      fork_strategy: 'PITR',
      target_time: target,
    });
    await b.waitFor(
      async () => {
        if (res.status !== 409 || !/has no backup yet/.test(res.text)) return true;
        res = await b.call('POST', `${b.servicePath(id)}/forkService`, {
          fork_strategy: 'PITR',
          target_time: target,
        });
        return false;
      },
      'the first backup recorded after the restart',
      120_000,
      1_000,
    );
    assert.equal(res.status, 202, res.text);
    const fork = await b.waitForStatus(res.body.service_id, 'READY', 180_000);
    const rows = await pgQuery(
      fork.endpoint.port,
      res.body.initial_password,
      'SELECT v FROM f ORDER BY v',
    );
    assert.deepEqual(
      rows.map((row) => row.v),
      ['1 in the backup', '2 before the target'],
    );
  },
);
