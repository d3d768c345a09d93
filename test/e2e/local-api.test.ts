// The whole path a user takes, against real PostgreSQL: Basin as shipped
// (`node dist/main.js`, local driver) creates services through its HTTP API,
// and psql / a PostgreSQL client connects to them over TLS and sees each
// endpoint's real effect. The test knows Basin only by its API, its exit
// codes and the data directory it chose for it.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { postmasterPid, processesOf } from '../local/helpers.js';
import type { BasinProcess } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { conninfo, pgQuery, pgRefused, psql } from './clients.js';

/** The uid of an OS user, or undefined when there is no such user. */
function uidOf(name: string): number | undefined {
  try {
    return Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: 'pipe' }).trim());
  } catch {
    return undefined;
  }
}

async function create(b: BasinProcess, body: object): Promise<any> {
  const res = await b.call('POST', b.servicePath(), body);
  assert.equal(res.status, 202, res.text);
  assert.equal(res.body.status, 'QUEUED');
  return res.body;
}

test(
  'a service on the local driver is a real PostgreSQL that every endpoint acts on',
  { timeout: 300_000 },
  async (t) => {
    // A short drift check, so that a killed postmaster is noticed quickly.
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '300' } });
    let b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const ts = await create(b, { name: 'metrics', cpu_millis: 'shared', memory_gbs: 'shared' });
    const id: string = ts.service_id;
    let password: string = ts.initial_password;
    const svc = await b.waitForStatus(id, 'READY');
    const port: number = svc.endpoint.port;
    assert.ok(port >= inst.portRange.min && port <= inst.portRange.max, `port ${port}`);
    const pgdata = layout.pgdata({ id, node: 0 });
    const count = async () =>
      (await pgQuery(port, password, 'SELECT count(*)::int AS n FROM readings'))[0].n;

    await t.test('psql connects over TLS as tsdbadmin to tsdb', async () => {
      const out = await psql(
        conninfo(port),
        password,
        'select current_user, current_database(), ssl from pg_stat_ssl where pid = pg_backend_pid()',
      );
      assert.equal(out, 'tsdbadmin|tsdb|t');
    });

    await t.test('plain TCP and a wrong password are refused', async () => {
      assert.match(await pgRefused(port, password, false), /no pg_hba.conf entry|SSL|reject/i);
      assert.match(await pgRefused(port, 'not-the-password'), /password authentication failed/);
    });

    await t.test('TimescaleDB hypertables work', async () => {
      await pgQuery(
        port,
        password,
        `CREATE TABLE readings (time timestamptz NOT NULL, value double precision);
         SELECT create_hypertable('readings', 'time');
         INSERT INTO readings SELECT t, 1 FROM generate_series(now() - interval '3 days', now(), interval '1 hour') t;`,
      );
      assert.equal(await count(), 73);
    });

    await t.test('resize changes the settings and keeps the data', async () => {
      const show = async () =>
        (await pgQuery(port, password, 'SHOW shared_buffers'))[0].shared_buffers;
      const before = await show();
      const res = await b.call('POST', `${b.servicePath(id)}/resize`, {
        cpu_millis: '1000',
        memory_gbs: '4',
      });
      assert.equal(res.status, 202, res.text);
      assert.equal(res.body.status, 'CONFIGURING');
      await b.waitForStatus(id, 'READY');
      assert.notEqual(await show(), before);
      assert.equal(await count(), 73);
    });

    await t.test('stop refuses connections; start brings the data back', async () => {
      const stop = await b.call('POST', `${b.servicePath(id)}/stop`);
      assert.equal(stop.status, 202, stop.text);
      await b.waitForStatus(id, 'PAUSED');
      assert.match(await pgRefused(port, password), /ECONNREFUSED|connect/);
      const start = await b.call('POST', `${b.servicePath(id)}/start`);
      assert.equal(start.status, 202, start.text);
      await b.waitForStatus(id, 'READY');
      assert.equal(await count(), 73);
    });

    await t.test('updatePassword: the old password is refused, the new one works', async () => {
      const res = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
        password: 'a-brand-new-password',
      });
      assert.equal(res.status, 204, res.text);
      // Applied by the engine after the answer: the new password works once it is done.
      await b.waitFor(
        () => pgQuery(port, 'a-brand-new-password', 'SELECT 1 AS one').then((r) => r[0].one === 1),
        'the new password to work',
      );
      assert.match(await pgRefused(port, password), /password authentication failed/);
      password = 'a-brand-new-password';
    });

    await t.test('a client error shows in the logs endpoint with its severity', async () => {
      await assert.rejects(
        pgQuery(port, password, 'SELECT * FROM no_such_table'),
        /does not exist/,
      );
      const entry = await b.waitFor(async () => {
        const res = await b.call(
          'GET',
          `${b.servicePath(id)}/logs?severities=ERROR&search=no_such_table`,
        );
        assert.equal(res.status, 200, res.text);
        return res.body.entries.find(
          (e: { message: string }) => e.message === 'relation "no_such_table" does not exist',
        );
      }, 'the ERROR in the logs');
      assert.equal(entry.severity, 'ERROR');
      assert.ok(Math.abs(Date.parse(entry.timestamp) - Date.now()) < 60_000);
    });

    await t.test('metrics come from the running cluster', async () => {
      const body = await b.waitFor(async () => {
        const res = await b.call('GET', b.servicePath(id));
        return res.body.metrics?.memory_mb > 0 ? res.body : undefined;
      }, 'metrics');
      assert.ok(body.metrics.storage_mb > 10, `storage ${body.metrics.storage_mb} MB`);
      assert.ok(body.metrics.milli_cpu >= 0);
    });

    await t.test(
      'a killed postmaster makes the service UNSTABLE, then READY with its data',
      async () => {
        const pid = postmasterPid(pgdata);
        process.kill(pid, 'SIGKILL');
        await b.waitForStatus(id, 'UNSTABLE');
        await b.waitForStatus(id, 'READY');
        assert.notEqual(postmasterPid(pgdata), pid);
        assert.equal(await count(), 73);
      },
    );

    await t.test('databases outlive Basin, and a restarted Basin adopts them', async () => {
      const pid = postmasterPid(pgdata);
      assert.deepEqual(await b.stop(), { code: 0, signal: null }, 'SIGTERM drains and exits 0');
      // Basin is gone; its database is not.
      assert.equal(await count(), 73);
      b = await inst.start();
      const res = await b.call('GET', b.servicePath(id));
      assert.equal(res.body.status, 'READY');
      // An operation of the new Basin acts on the cluster it found running
      // rather than starting another one.
      const pw = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
        password: 'set-after-the-restart',
      });
      assert.equal(pw.status, 204, pw.text);
      await b.waitFor(
        () => pgQuery(port, 'set-after-the-restart', 'SELECT 1 AS one').then((r) => r[0].one === 1),
        'the new password to work',
      );
      password = 'set-after-the-restart';
      assert.equal(postmasterPid(pgdata), pid);
      assert.equal(await count(), 73);
    });

    await t.test('kill -9 of Basin during a create: the restarted Basin finishes it', async () => {
      const plain = await create(b, {
        name: 'plain',
        addons: [],
        cpu_millis: 'shared',
        memory_gbs: 'shared',
      });
      // Kill it mid-provisioning when the engine is at work (a fast host may be done already).
      await b.waitFor(async () => {
        const res = await b.call('GET', b.servicePath(plain.service_id));
        return res.body.status !== 'QUEUED';
      }, 'the create to start');
      await b.kill();
      b = await inst.start();
      const ready = await b.waitForStatus(plain.service_id, 'READY');
      const exts = await pgQuery(
        ready.endpoint.port,
        plain.initial_password,
        `SELECT extname FROM pg_extension WHERE extname IN ('vector', 'timescaledb')`,
      );
      assert.deepEqual(exts, [], 'a POSTGRES service has no extensions');
      assert.equal((await b.call('DELETE', b.servicePath(plain.service_id))).status, 202);
      await b.waitGone(plain.service_id);
    });

    await t.test('VECTOR services have pgvector', async () => {
      const vec = await create(b, {
        name: 'embeddings',
        addons: ['ai'],
        cpu_millis: 'shared',
        memory_gbs: 'shared',
      });
      const v = await b.waitForStatus(vec.service_id, 'READY');
      const [d] = await pgQuery(
        v.endpoint.port,
        vec.initial_password,
        `SELECT '[1,2,3]'::vector <-> '[3,2,1]'::vector AS d`,
      );
      assert.ok(Math.abs(d.d - Math.sqrt(8)) < 1e-9);
      assert.equal((await b.call('DELETE', b.servicePath(vec.service_id))).status, 202);
      await b.waitGone(vec.service_id);
    });

    await t.test('delete stops every process, removes every file and the OS user', async () => {
      const user = `basin-${id}`;
      const uid = uidOf(user);
      assert.ok(uid !== undefined, `${user} exists while the service does`);
      assert.ok(processesOf(pgdata).length > 0);
      assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
      await b.waitGone(id);
      assert.match(await pgRefused(port, password), /ECONNREFUSED|connect/);
      assert.deepEqual(processesOf(pgdata), []);
      assert.deepEqual(await processesOfUser(uid), []);
      assert.equal(uidOf(user), undefined, `${user} is removed`);
      assert.equal(existsSync(layout.instanceDir(id)), false);
      assert.equal(existsSync(layout.archiveDir(id)), false);
      assert.equal(existsSync(layout.backupDir(id)), false, 'its stanza and repository are gone');
      assert.deepEqual((await b.call('GET', b.servicePath())).body, []);
    });
  },
);
