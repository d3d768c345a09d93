// Issue 7, "tests that attack": what a hostile tenant cannot reach, tried
// the way it would try, against Basin as shipped (`node dist/main.js`, the
// local driver, default settings). Two tenants, each with a project and a
// credential of its own (the second made with the shipped CLI): from inside
// its service (COPY … FROM PROGRAM as its OS user), tenant A reaches none of
// tenant B's files, processes, sockets or WAL archive, nor Basin's database
// or CA key; through the API, A's credential finds none of B's services,
// whatever it asks, and B's service is untouched afterwards.
// test/local/isolation.test.ts proves the same at the driver, exhaustively
// (every path under the data directory); this proves it holds for the
// program a user runs.

import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout, socketName } from '../../src/drivers/local/layout.js';
import { postmasterPid } from '../local/helpers.js';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import {
  bootstrapTenant,
  newTenant,
  REFUSED_OR_HIDDEN,
  TenantApi,
  tenantShell,
} from './tenants.js';

/** The uid that owns `path`. */
const statUid = (path: string) => statSync(path).uid;

test(
  "a tenant reaches none of another tenant's files, processes, sockets, archive or services",
  { timeout: 400_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start();
    // The default installation on a host that allows them uses the
    // namespaces of confine.ts (what /proc shows below depends on them), as
    // test/local/private-tmp.test.ts requires of the host too.
    // Log lines are buffered (written within a second): wait for the driver's.
    await b.waitFor(
      async () => /"privateTmp":\["\/tmp"/.test(b.output()),
      'the local driver says services get a private /tmp & co.',
    );
    const layout = new Layout(inst.dataDir);

    // B: the victim, in the bootstrap project. A: the attacker, a project and
    // credential of its own, made with the CLI.
    const victim = new TenantApi(b, bootstrapTenant(b));
    const attacker = new TenantApi(b, await newTenant(inst, 'attacker'));
    const [bSvc, aSvc] = await Promise.all([victim.create('victim'), attacker.create('attacker')]);
    await Promise.all([
      victim.waitForStatus(bSvc.service_id, 'READY'),
      attacker.waitForStatus(aSvc.service_id, 'READY'),
    ]);
    const bNode = { id: bSvc.service_id, node: 0 };
    const aNode = { id: aSvc.service_id, node: 0 };
    const bPgdata = layout.pgdata(bNode);
    const aUid = statUid(layout.pgdata(aNode));
    const bUid = statUid(bPgdata);
    const a = await tenantShell(aSvc, aSvc.initial_password);
    t.after(() => a.end());

    await t.test("A's programs run as A's own OS user, neither B's nor root", async () => {
      assert.notEqual(aUid, bUid);
      assert.notEqual(aUid, 0);
      assert.deepEqual(await a.run('id -u'), [String(aUid)]);
      assert.deepEqual(await a.run('cat PG_VERSION'), ['15'], 'its own data directory');
    });

    await t.test("B's data directory, socket directory, backups and records", async () => {
      const bSockets = layout.socketDir(bNode);
      // Its repository user's, where servers are on (the default as root), else its own.
      const local = layout.backupDirs(bSvc.service_id).repo;
      const bRepo = existsSync(local) ? local : layout.repository(bSvc.service_id).repo;
      for (const command of [
        `ls ${bPgdata}`,
        `cat ${bPgdata}/PG_VERSION`,
        `cat ${bPgdata}/server.key`,
        `cat ${bPgdata}/pg_hba.conf`,
        `touch ${bPgdata}/planted`,
        `ls ${bPgdata}/log`,
        `ls ${bSockets}`,
        `touch ${bSockets}/planted`,
        // B's pgBackRest repository (its backups and archived WAL, what
        // its forks are made from), its configuration and queue.
        `ls ${bRepo}`,
        `cat ${bRepo}/backup/${bSvc.service_id}/backup.info`,
        `ls ${bRepo}/archive/${bSvc.service_id}`,
        `touch ${bRepo}/planted`,
        `cat ${layout.backupConf(bSvc.service_id)}`,
        `ls ${layout.backupDirs(bSvc.service_id).spool}`,
        `ls ${layout.backupsDir}`,
        `cat ${layout.stateFile(bNode)}`,
        `cat ${layout.startupLog(bNode)}`,
        `ls ${layout.instancesDir}`,
        `ls ${layout.templatePgdata}`,
      ]) {
        await a.refused(command);
      }
      // With pg_read_server_files / pg_write_server_files, the server itself
      // opens the file, as A's OS user: the same answer.
      await a.client.query('GRANT pg_read_server_files, pg_write_server_files TO tsdbadmin');
      await assert.rejects(
        a.client.query(
          `COPY program_out FROM ${a.client.escapeLiteral(join(bPgdata, 'PG_VERSION'))}`,
        ),
        /Permission denied/,
      );
      await assert.rejects(
        a.client.query(`COPY (SELECT 1) TO ${a.client.escapeLiteral(join(bPgdata, 'planted'))}`),
        /Permission denied/,
      );
    });

    await t.test("Basin's database, its CA key and its data directory", async () => {
      await a.refused(`cat ${layout.caKey}`);
      await a.refused(`ls ${layout.caDir}`);
      await a.refused(`ls ${layout.root}`);
      // Above local/, a data directory under /tmp is not even there for A (its
      // /tmp is its own); elsewhere, its modes refuse.
      for (const file of ['basin.db', 'basin.db-wal']) {
        await a.refused(`cat ${join(inst.dataDir, file)}`, REFUSED_OR_HIDDEN);
      }
      await a.refused(`ls ${inst.dataDir}`, REFUSED_OR_HIDDEN);
    });

    await t.test("B's processes: invisible in /proc, and no signal reaches them", async () => {
      const bPm = postmasterPid(bPgdata);
      const aPm = postmasterPid(layout.pgdata(aNode));
      const seen = (await a.run('ls /proc')).filter((n) => /^\d+$/.test(n)).map(Number);
      assert.ok(seen.includes(aPm), 'A sees its own server');
      assert.ok(!seen.includes(bPm), "A does not see B's server");
      assert.ok(!seen.includes(b.pid), 'nor Basin');
      assert.ok(!seen.includes(process.pid), 'nor anything else of root');
      for (const pid of [bPm, b.pid]) {
        // Command lines name services, roles, databases and client addresses.
        await a.refused(`cat /proc/${pid}/cmdline`, REFUSED_OR_HIDDEN);
        await a.refused(`cat /proc/${pid}/environ`, REFUSED_OR_HIDDEN);
        await a.refused(`kill -0 ${pid}`);
        await a.refused(`kill -KILL ${pid}`);
      }
      assert.equal(postmasterPid(bPgdata), bPm, "B's server still runs");
      assert.equal((await b.request('GET', '/projects')).status, 200, 'Basin still answers');
    });

    await t.test(
      "B's Unix socket, where its superuser logs in by peer authentication",
      async () => {
        const socket = join(layout.socketDir(bNode), socketName(bSvc.endpoint.port));
        await a.refused(
          `psql -X -h ${layout.socketDir(bNode)} -p ${bSvc.endpoint.port} -U postgres -c 'select 1'`,
        );
        // Connecting to the socket itself, with no client library in between.
        const connect = `require('node:net').connect(${JSON.stringify(socket)})
        .on('connect', () => { console.log('connected'); process.exit(0); })
        .on('error', (e) => { console.log(e.message); process.exit(1); })`;
        const said = await a.refused(`${process.execPath} -e ${shellQuote(connect)}`, /EACCES/);
        assert.doesNotMatch(said, /connected/);
      },
    );

    await t.test("through the API, A's credential finds none of B's services", async () => {
      const projects = await attacker.call('GET', '/projects');
      assert.equal(projects.status, 200, projects.text);
      assert.deepEqual(
        projects.body.map((p: { id: string }) => p.id),
        [attacker.tenant.projectId],
      );
      const bId = bSvc.service_id;
      const theirs = `/projects/${victim.tenant.projectId}/services`;
      const mine = attacker.path();
      const asked: [string, string, unknown?][] = [
        ['GET', theirs],
        ['POST', theirs, { name: 'planted', addons: [] }],
        ['GET', `${theirs}/${bId}/replicaSets`],
      ];
      // Every verb on B's service, by B's project and by A's own.
      for (const base of [`${theirs}/${bId}`, `${mine}/${bId}`]) {
        asked.push(
          ['GET', base],
          ['GET', `${base}/logs`],
          ['DELETE', base],
          ['POST', `${base}/stop`],
          ['POST', `${base}/start`],
          ['POST', `${base}/updatePassword`, { password: 'chosen-by-the-attacker' }],
          ['POST', `${base}/resize`, { cpu_millis: '1000', memory_gbs: '4' }],
          ['POST', `${base}/setEnvironment`, { environment: 'PROD' }],
          ['POST', `${base}/forkService`, { fork_strategy: 'NOW' }],
        );
      }
      for (const [method, path, body] of asked) {
        const res = await attacker.call(method, path, body);
        assert.equal(res.status, 404, `${method} ${path}: ${res.status} ${res.text}`);
        assert.equal(res.body.code, 'NOT_FOUND', `${method} ${path}`);
      }
      // Nothing happened to B: its list, its status, its name, its password.
      const list = await victim.call('GET', victim.path());
      assert.deepEqual(
        list.body.map((s: { service_id: string; name: string }) => [s.service_id, s.name]),
        [[bId, 'victim']],
      );
      const got = await victim.call('GET', victim.path(bId));
      assert.equal(got.body.status, 'READY');
      assert.equal(got.body.environment_tag ?? 'DEV', 'DEV');
      const [row] = await pgQuery(bSvc.endpoint.port, bSvc.initial_password, 'SELECT 1 AS one');
      assert.deepEqual(row, { one: 1 });
      // And the other way round: B's credential does not see A's.
      const back = await victim.call('GET', victim.path(aSvc.service_id));
      assert.equal(back.status, 404, back.text);
    });
  },
);

/** `s` as one single-quoted shell word. */
function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}
