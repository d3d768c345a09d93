// Issue 18, item 1 (second half): repositories no tenant can write. Tried
// against Basin as shipped (`node dist/main.js`, the local driver, with
// --repository-servers on), by a tenant A with a customer's means only: its
// project credential, and its service's OS user through `COPY … PROGRAM`,
// which reads A's own pgBackRest configuration and its client certificate
// and key (its archiver uses them), and runs the stock `pgbackrest` client.
//
// pgBackRest 2.45's TLS server does not confine a client to its stanza (it
// serves the client's own --repo1-path and --config: docs/security.md,
// Repositories), so A tries exactly that against its own repository's
// server: B's stanza by name, B's repository by path, B's server's
// configuration, a host file, and writes into B's repository; and B's
// server directly. What it reaches is its own repository, never anything
// of B's: the server runs as A's repository user, which owns nothing of
// B's, and B's server's port is B's namespace's alone. Then B's backups
// and a fork of B still work, with B's data.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { parseBackupInfo } from '../../src/drivers/local/config/pgbackrest.js';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import { newTenant, TenantApi, tenantShell } from './tenants.js';

/** What pgBackRest says when the OS refused it. */
const DENIED = /Permission denied|\[13\]/;

test(
  "a tenant's repository server reaches nothing of another tenant's",
  { timeout: 900_000 },
  async (t) => {
    const inst = await installation(t, {
      // A backup of every service every 20 s, none expired.
      args: ['--repository-servers', 'on', '--backup-schedule', '20s', '--pitr-window', '1d'],
      env: { BASIN_RECONCILE_INTERVAL_MS: '500' },
    });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const victim = new TenantApi(b, await newTenant(inst, 'victim'));
    const attacker = new TenantApi(b, await newTenant(inst, 'attacker'));

    // B and A, created together; B: a table of its own, in a backup.
    const [bSvc, aSvc] = await Promise.all([victim.create('victim'), attacker.create('attacker')]);
    const bId = bSvc.service_id;
    await victim.waitForStatus(bId, 'READY');
    const marker = `B-SECRET-${Date.now()}`;
    await pgQuery(
      bSvc.endpoint.port,
      bSvc.initial_password,
      `CREATE TABLE b_secret AS SELECT '${marker}' AS v`,
    );
    const tableMade = Date.now();
    const bInfo = join(layout.repository(bId).repo, 'backup', bId, 'backup.info');
    const backupsOfB = () => {
      try {
        return parseBackupInfo(readFileSync(bInfo, 'utf8'));
      } catch {
        return [];
      }
    };
    await b.waitFor(
      async () => backupsOfB().find((x) => Date.parse(x.startedAt) > tableMade + 1000),
      "B's backup holding its table",
      120_000,
    );
    const bFiles = () => readdirSync(join(layout.repository(bId).repo, 'backup', bId)).sort();

    // A: its tenant inside its own service.
    const aId = aSvc.service_id;
    await attacker.waitForStatus(aId, 'READY');
    const a = await tenantShell(aSvc, aSvc.initial_password);
    t.after(() => a.end());
    const [pgdata = ''] = await a.run('pwd');
    const local = pgdata.replace(/\/instances\/[^/]+\/0\/pgdata$/, '');
    assert.notEqual(local, pgdata);
    const conf = `${local}/backup/${aId}/pgbackrest.conf`;
    const bRepo = `${local}/repos/${bId}/repo`;
    /** A's stock pgBackRest client with A's own configuration (its server, its certificate). */
    const client = (args: string) =>
      `pgbackrest --config=${conf} --stanza=${aId} --log-level-console=error ${args}`;
    /** What a command printed (stderr too) and its exit status, run as A's OS user. */
    const said = async (command: string) =>
      (await a.run(`(${command}) 2>&1; echo "exit=$?"`)).join('\n');

    await t.test('A holds its client identity and reaches its own repository with it', async () => {
      const ls = await said(client('repo-ls'));
      assert.match(ls, /^archive$/m, ls);
      assert.match(ls, /^backup$/m, ls);
      assert.match(ls, /exit=0$/);
      // Its repository, through its server: its stanza alone.
      const stanzas = await said(client('repo-ls backup'));
      assert.match(stanzas, new RegExp(`^${aId}$`, 'm'));
      assert.doesNotMatch(stanzas, new RegExp(bId));
      // And the files themselves are no tenant's: not even A reads them directly.
      await a.refused(`ls ${local}/repos/${aId}/repo`);
    });

    await t.test("B's stanza by name, B's repository by path: nothing", async () => {
      /** Anything of B's backups: its files, labels, or backup.info's contents. */
      // (Errors name paths: only listings and contents count.)
      const ofB = /^backup\.info$|^\d{8}-\d{6}F$|\[backup:current\]|backup-timestamp|db-system-id/m;
      // (Through a server, pgBackRest 2.45 answers a missing file or path
      // with nothing and exit 0: what matters is what comes back.)
      const byName = await said(client(`repo-get backup/${bId}/backup.info`));
      assert.doesNotMatch(byName, ofB, byName);
      const asB = await said(
        `pgbackrest --config=${conf} --stanza=${bId} --log-level-console=error repo-ls backup/${bId}`,
      );
      assert.doesNotMatch(asB, ofB, asB);
      for (const path of [bRepo, `${local}/repos/${bId}`, `${local}/repos/${bId}/repo/..`]) {
        const ls = await said(client(`--repo1-path=${path} repo-ls backup/${bId}`));
        assert.doesNotMatch(ls, ofB, ls);
        const get = await said(client(`--repo1-path=${path} repo-get backup/${bId}/backup.info`));
        assert.doesNotMatch(get, ofB, get);
      }
      const up = await said(client(`repo-get ../../${bId}/repo/backup/${bId}/backup.info`));
      assert.doesNotMatch(up, ofB, up);
      // The same tools do list and read where the server's user may: the refusals above are B's.
      const own = await said(client(`repo-ls backup/${aId}`));
      assert.match(own, ofB, own);
      // B's server's configuration (it would name B's repository): unreadable to A's server.
      const config = await said(
        client(`--repo1-host-config=${local}/repos/${bId}/server.conf repo-ls backup`),
      );
      assert.doesNotMatch(config, ofB, config);
      // A host file only root reads.
      const shadow = await said(client('--repo1-path=/etc repo-get shadow'));
      assert.doesNotMatch(shadow, /^root:/m, shadow);
    });

    await t.test("writes into B's repository are refused; B's files are as they were", async () => {
      const before = bFiles();
      // Its own lock directory: its archiver holds the usual one.
      const create = await said(
        client(`--repo1-path=${bRepo} --lock-path=/tmp --no-online stanza-create`),
      );
      assert.doesNotMatch(create, /exit=0$/, create);
      assert.match(create, DENIED, create);
      const drop = await said(
        client(`--repo1-path=${bRepo} --lock-path=/tmp --stanza=${bId} --force stanza-delete`),
      );
      assert.doesNotMatch(drop, /exit=0$/, drop);
      assert.deepEqual(bFiles(), before);
      assert.ok(backupsOfB().length > 0);
    });

    await t.test("B's server: not reachable from A's namespace at all", async () => {
      // B's gateway: the other address of B's pair (ids and addresses are no secret).
      const bHost = readFileSync(layout.repository(bId).serverConf, 'utf8').match(
        /^tls-server-address=(.+)$/m,
      )?.[1];
      assert.ok(bHost);
      const ping = await said(client(`--repo1-host=${bHost} --io-timeout=1 repo-ls`));
      assert.doesNotMatch(ping, /exit=0$/, ping);
      assert.match(ping, /refused|reset|unable to connect|timeout/i, ping);
      const tcp = await said(`exec 3<>/dev/tcp/${bHost}/8432`);
      assert.doesNotMatch(tcp, /exit=0$/, tcp);
    });

    await t.test("B's backups and forks still work, with B's data", async () => {
      const since = Date.now();
      await b.waitFor(
        async () => backupsOfB().find((x) => Date.parse(x.startedAt) > since),
        'a backup of B after the attacks',
        120_000,
      );
      const res = await victim.call('POST', `${victim.path(bId)}/forkService`, {
        fork_strategy: 'LAST_SNAPSHOT',
      });
      assert.equal(res.status, 202, res.text);
      const fork = await victim.waitForStatus(res.body.service_id, 'READY', 300_000);
      const rows = await pgQuery(
        fork.endpoint.port,
        res.body.initial_password,
        'SELECT v FROM b_secret',
      );
      assert.deepEqual(rows, [{ v: marker }]);
      await victim.deleteAndWait(res.body.service_id);
    });
  },
);
