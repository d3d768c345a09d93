// Forks across hosts (docs/decisions.md, "Several hosts": forks across
// hosts), on the namespace topology: h1 is the repository host, h2 and h3
// database hosts. A service's forks are placed by placement.ts (the first
// on the host its parent is not on: it has the more room) and restored
// there from the parent's stanza on the repository host: NOW (a fresh
// backup of the parent), PITR (to a time) and LAST_SNAPSHOT (the newest
// backup, here of a fork: a fork of a fork), each holding exactly the rows
// its parent had at that moment, with its own system identifier and its
// own stanza, and none of the parent's credentials left on its host; and
// a certificate for the parent's stanza is refused to the fork's host once
// the fork is READY. A control plane killed with -9 while a fork is made
// makes it once it is back; a parent deleted right after a fork was asked
// for is deleted once the fork is made. A PAUSED parent forks the same
// way, from its backups and the WAL archived up to its stop.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { readIdentity } from '../../src/agent/agent-files.js';
import { repositoryClientSigner } from '../../src/agent/repository-identity.js';
import { makeKeyAndRequest } from '../../src/lib/x509.js';
import { BACKUP_POLL_MS, pitrWindowStart } from '../harness/basin-api.js';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'rxf';
/** The topology's subnet, 10.231.12.0/24: its own, as the tests run in parallel. */
const NET = 12;

interface Svc {
  id: string;
  host: string;
  port: number;
  password: string;
}

test(
  "forks of a service on one host, restored on another from the repository host: NOW, PITR, LAST_SNAPSHOT hold exactly the parent's rows",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 3,
      driver: 'hosts',
      // One backup per service (the one at first READY) and nothing expired.
      args: ['--backup-schedule', '1d', '--pitr-window', '1d'],
    });
    const { cli, address } = c;
    let b = c.b;
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    await c.joinAgent(2);
    await c.joinAgent(3);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 3 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);

    const made: string[] = [];

    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const sql = (s: Svc, q: string, password = s.password) =>
      psql(
        `host=${s.host} port=${s.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`,
        password,
        q,
      );
    const rows = async (s: Svc) => (await sql(s, 'SELECT v FROM t ORDER BY n')).split('\n');
    const hostIndex = (s: Svc) => [1, 2, 3].find((i) => address(i) === s.host) as number;

    const created = await b.call('POST', b.servicePath(), { name: 'parent' });
    assert.equal(created.status, 202, created.text);
    made.push(created.body.service_id);
    const ready = await b.waitForStatus(created.body.service_id, 'READY', 300_000);
    const parent: Svc = {
      id: ready.service_id,
      host: ready.endpoint.host,
      port: ready.endpoint.port,
      password: created.body.initial_password,
    };
    assert.notEqual(parent.host, address(1), 'the repository host runs no service');
    await sql(parent, 'CREATE TABLE t (n serial PRIMARY KEY, v text NOT NULL)');
    const insert = (s: Svc, v: string) => sql(s, `INSERT INTO t (v) VALUES ('${v}')`);
    // The parent's first backup ends: from then on, PITR reaches back to it.
    await b.waitFor(
      () => pitrWindowStart(b, parent.id),
      'the first backup',
      180_000,
      BACKUP_POLL_MS,
    );

    const fork = async (from: Svc, body: Record<string, unknown>): Promise<Svc> => {
      const res = await b.call('POST', `${b.servicePath(from.id)}/forkService`, body);
      assert.equal(res.status, 202, res.text);
      made.push(res.body.service_id);
      const done = await b.waitForStatus(res.body.service_id, 'READY', 300_000);
      return {
        id: done.service_id,
        host: done.endpoint.host,
        port: done.endpoint.port,
        password: res.body.initial_password,
      };
    };

    // NOW: the rows committed before the request (a fresh backup of the
    // parent, on the repository host), on the other database host.
    await insert(parent, 'a: before the NOW fork');
    await insert(parent, 'b: before the NOW fork too');
    const now = await fork(parent, { fork_strategy: 'NOW' });
    assert.notEqual(now.host, parent.host, 'the NOW fork is placed on the other database host');
    assert.notEqual(now.host, address(1));
    assert.deepEqual(await rows(now), ['a: before the NOW fork', 'b: before the NOW fork too']);
    // Its own: its password, its system identifier, its writes.
    await assert.rejects(sql(now, 'SELECT 1', parent.password), /password authentication failed/);
    const sysid = (s: Svc) => sql(s, 'SELECT system_identifier FROM pg_control_system()');
    assert.notEqual(await sysid(now), await sysid(parent));
    // Its first backup (into a stanza of its own), before anyone writes to
    // it: what the LAST_SNAPSHOT fork below holds.
    await b.waitFor(
      () => pitrWindowStart(b, now.id),
      "the NOW fork's first backup",
      180_000,
      BACKUP_POLL_MS,
    );
    await insert(now, 'written to the NOW fork');
    assert.ok(!(await rows(parent)).includes('written to the NOW fork'));

    // PITR: exactly the rows committed before the target, the parent still writing.
    await insert(parent, 'c: before the target');
    await sleep(1_100);
    const target = new Date().toISOString();
    await sleep(1_100);
    await insert(parent, 'd: after the target');
    const pitr = await fork(parent, { fork_strategy: 'PITR', target_time: target });
    assert.deepEqual(await rows(pitr), [
      'a: before the NOW fork',
      'b: before the NOW fork too',
      'c: before the target',
    ]);
    assert.notEqual(await sysid(pitr), await sysid(parent));

    // LAST_SNAPSHOT of the NOW fork: its first backup, taken before it was written to.
    const snap = await fork(now, { fork_strategy: 'LAST_SNAPSHOT' });
    assert.deepEqual(await rows(snap), ['a: before the NOW fork', 'b: before the NOW fork too']);
    assert.notEqual(await sysid(snap), await sysid(now));

    // Each fork archives into a stanza of its own on the repository host,
    // and nothing of its parent's credentials is left on its host.
    const repos = join(c.host(1).dataDir, 'repository', 'repos');
    for (const f of [now, pitr, snap]) {
      assert.ok(existsSync(join(repos, f.id, 'repo')), `no repository of ${f.id}`);
      const backupDir = join(c.host(hostIndex(f)).dataDir, 'local', 'backup', f.id);
      const left = readdirSync(backupDir).filter((n) => n.startsWith('source'));
      assert.deepEqual(left, [], `${f.id} keeps ${left.join(', ')}`);
      const conf = readFileSync(join(backupDir, 'pgbackrest.conf'), 'utf8');
      assert.match(conf, new RegExp(`^\\[${f.id}\\]$`, 'm'));
    }

    // A certificate for the parent's stanza is signed for a fork's host
    // only while the fork is made: not once it is READY, nor for a service
    // that is no fork, nor for a fork placed on another host.
    const askFork = async (hostI: number, forkId: string) => {
      const identity = readIdentity(c.host(hostI).dataDir);
      assert.ok(identity);
      const { csr } = await makeKeyAndRequest('fork');
      return repositoryClientSigner(identity)(forkId, 'fork', csr).then(
        () => 'signed',
        (err: Error) => err.message,
      );
    };
    assert.match(await askFork(hostIndex(now), now.id), /HTTP 403.*not a fork being made/);
    assert.match(await askFork(hostIndex(parent), parent.id), /HTTP 403.*not a fork being made/);
    assert.match(await askFork(hostIndex(parent), now.id), /HTTP 403.*is not placed on host/);

    // The control plane killed with -9 while a NOW fork is made (its
    // parent being backed up for it, or the fork restoring): once it is
    // back, the fork is made, from a backup started after the request.
    await insert(parent, 'd2: before the interrupted fork');
    const asked = await b.call('POST', `${b.servicePath(parent.id)}/forkService`, {
      fork_strategy: 'NOW',
    });
    assert.equal(asked.status, 202, asked.text);
    made.push(asked.body.service_id);
    await b.waitFor(
      async () =>
        (await b.call('GET', b.servicePath(asked.body.service_id))).body.status === 'CONFIGURING',
      'the fork CONFIGURING',
    );
    await b.kill();
    b = await c.inst.start({
      args: [
        '--host-listen',
        new URL(c.controlPlane).host,
        '--backup-schedule',
        '1d',
        '--pitr-window',
        '1d',
      ],
    });
    const back = await b.waitForStatus(asked.body.service_id, 'READY', 300_000);
    const interrupted: Svc = {
      id: back.service_id,
      host: back.endpoint.host,
      port: back.endpoint.port,
      password: asked.body.initial_password,
    };
    assert.equal((await rows(interrupted)).at(-1), 'd2: before the interrupted fork');
    await sql(parent, "DELETE FROM t WHERE v = 'd2: before the interrupted fork'");

    // A PAUSED parent (everything up to its stop archived): NOW is its last
    // state, PITR before the stop exactly the rows before the target, PITR
    // after it its last state.
    await insert(parent, 'e: before the second target');
    await sleep(1_100);
    const second = new Date().toISOString();
    await sleep(1_100);
    await insert(parent, 'f: just before the stop');
    assert.equal((await b.call('POST', `${b.servicePath(parent.id)}/stop`)).status, 202);
    await b.waitForStatus(parent.id, 'PAUSED', 180_000);
    const afterStop = new Date().toISOString();
    const all = await Promise.all([
      fork(parent, { fork_strategy: 'NOW' }),
      fork(parent, { fork_strategy: 'PITR', target_time: second }),
      fork(parent, { fork_strategy: 'PITR', target_time: afterStop }),
    ]);
    const [stoppedNow, stoppedPitr, stoppedEnd] = all.map(async (f) => (await rows(f)).at(-1));
    assert.equal(await stoppedNow, 'f: just before the stop');
    assert.equal(await stoppedPitr, 'e: before the second target');
    assert.equal(await stoppedEnd, 'f: just before the stop');
    assert.equal((await rows(all[1] as Svc)).length, 5);
    // Room on the hosts for the forks below (each holds its size there).
    for (const f of all) {
      assert.equal((await b.call('DELETE', b.servicePath(f.id))).status, 202);
      made.splice(made.indexOf(f.id), 1);
    }
    for (const f of all) await b.waitGone(f.id, 180_000);
    assert.equal((await b.call('POST', `${b.servicePath(parent.id)}/start`)).status, 202);
    await b.waitForStatus(parent.id, 'READY', 180_000);

    // The parent, its forks gone or not, keeps its rows and takes writes.
    await insert(parent, 'g: after the forks');
    assert.equal((await rows(parent)).length, 7);

    // The parent deleted right after a fork of it was asked for: its delete
    // waits until the fork is made from its backups, and the fork lives on.
    const last = await b.call('POST', `${b.servicePath(parent.id)}/forkService`, {
      fork_strategy: 'NOW',
    });
    assert.equal(last.status, 202, last.text);
    made.push(last.body.service_id);
    assert.equal((await b.call('DELETE', b.servicePath(parent.id))).status, 202);
    const orphan = await b.waitForStatus(last.body.service_id, 'READY', 300_000);
    await b.waitGone(parent.id, 180_000);
    assert.deepEqual(
      await rows({
        id: orphan.service_id,
        host: orphan.endpoint.host,
        port: orphan.endpoint.port,
        password: last.body.initial_password,
      }),
      [
        'a: before the NOW fork',
        'b: before the NOW fork too',
        'c: before the target',
        'd: after the target',
        'e: before the second target',
        'f: just before the stop',
        'g: after the forks',
      ],
    );
    assert.ok(!existsSync(join(repos, parent.id)), "the parent's repository went with it");

    for (const id of made.filter((m) => m !== parent.id).reverse()) {
      assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
    }
    for (const id of made) if (id !== parent.id) await b.waitGone(id, 180_000);
    for (const id of made) assert.ok(!existsSync(join(repos, id)));
    assert.equal((await b.stop()).code, 0);
  },
);
