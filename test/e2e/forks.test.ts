// Forks through Basin as shipped (`node dist/main.js`, the local driver,
// real PostgreSQL and pgBackRest), reached only through the API and real
// clients: a NOW fork holds the rows committed before the request and not
// a transaction committed after; a PITR fork exactly the rows committed
// before its target; a LAST_SNAPSHOT fork the rows of the newest backup
// (of a fork: a fork of a fork); a TIMESERIESDB hypertable survives; a
// target outside the recovery window is a 400 that gives the window; the
// parent's password opens no fork; a PAUSED parent forks from its backups
// and its data; deleting the parent leaves the forks working; and Basin
// killed with -9 in the middle of a fork finishes it once it is back,
// leaving nothing half-made.

import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout } from '../../src/drivers/local/layout.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { BACKUP_POLL_MS, type BasinProcess, pitrWindowStart } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { pgClient, pgQuery, pgRefused } from './clients.js';

interface Svc {
  id: string;
  port: number;
  password: string;
}

/** POST forkService; asserts the 202 and returns the fork once READY. */
async function fork(b: BasinProcess, parent: Svc, body: Record<string, unknown>): Promise<Svc> {
  const res = await b.call('POST', `${b.servicePath(parent.id)}/forkService`, body);
  assert.equal(res.status, 202, res.text);
  assert.deepEqual(res.body.forked_from, {
    is_standby: false,
    project_id: b.projectId,
    service_id: parent.id,
  });
  const ready = await b.waitForStatus(res.body.service_id, 'READY', 180_000);
  return { id: ready.service_id, port: ready.endpoint.port, password: res.body.initial_password };
}

const values = async (s: Svc) =>
  (await pgQuery(s.port, s.password, 'SELECT v FROM m ORDER BY time')).map((r) => r.v as string);

test(
  'forks through dist/main.js: NOW, PITR, LAST_SNAPSHOT, a paused parent, kill -9',
  { timeout: 900_000 },
  async (t) => {
    const inst = await installation(t, {
      // One backup per service (the one at first READY) and nothing expired.
      args: ['--backup-schedule', '1d', '--pitr-window', '1d'],
      env: { BASIN_RECONCILE_INTERVAL_MS: '500' },
    });
    let b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const created = await b.call('POST', b.servicePath(), {
      name: 'metrics',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    assert.equal(created.body.service_type, 'TIMESERIESDB');
    const ready = await b.waitForStatus(created.body.service_id, 'READY', 120_000);
    const parent: Svc = {
      id: ready.service_id,
      port: ready.endpoint.port,
      password: created.body.initial_password,
    };
    await pgQuery(
      parent.port,
      parent.password,
      `CREATE TABLE m (time timestamptz NOT NULL DEFAULT clock_timestamp(), v text);
       SELECT create_hypertable('m', 'time');`,
    );
    const insert = (s: Svc, v: string) =>
      pgQuery(s.port, s.password, `INSERT INTO m (v) VALUES ('${v}')`);
    // The parent's first backup ends: from then on, PITR reaches back to it.
    const oldest = await b.waitFor(
      () => pitrWindowStart(b, parent.id),
      'the first backup',
      120_000,
      BACKUP_POLL_MS,
    );

    await t.test('a target outside the recovery window is a 400 that gives it', async () => {
      for (const target of [new Date(Date.parse(oldest) - 1000), new Date(Date.now() + 60_000)]) {
        const res = await b.call('POST', `${b.servicePath(parent.id)}/forkService`, {
          fork_strategy: 'PITR',
          target_time: target.toISOString(),
        });
        assert.equal(res.status, 400, res.text);
        assert.equal(res.body.code, 'INVALID_REQUEST');
        assert.match(
          res.body.message,
          new RegExp(`^target_time must be between ${oldest.replace(/\./g, '\\.')} and now \\(`),
        );
      }
    });

    let now: Svc;
    await t.test(
      'NOW: the rows committed before the request, not a transaction committed after; it takes writes',
      async () => {
        await insert(parent, 'a: before the NOW fork');
        const open = await pgClient(parent.port, parent.password);
        t.after(() => open.end().catch(() => {}));
        await open.query('BEGIN');
        await open.query("INSERT INTO m (v) VALUES ('b: committed after the NOW fork')");
        now = await fork(b, parent, { fork_strategy: 'NOW' });
        await open.query('COMMIT');
        assert.deepEqual(await values(now), ['a: before the NOW fork']);
        // A hypertable still.
        const [h] = await pgQuery(
          now.port,
          now.password,
          "SELECT count(*)::int AS n FROM timescaledb_information.hypertables WHERE hypertable_name = 'm'",
        );
        assert.equal(h.n, 1);
        // Its first backup, taken once it was READY, before anyone writes to it
        // (what the LAST_SNAPSHOT fork below holds).
        await b.waitFor(
          () => pitrWindowStart(b, now.id),
          "the NOW fork's first backup",
          120_000,
          BACKUP_POLL_MS,
        );
        await insert(now, 'written to the NOW fork');
        assert.ok(!(await values(parent)).includes('written to the NOW fork'));
        assert.equal((await values(now)).length, 2);
        // Its password is its own; the parent's opens nothing.
        assert.match(await pgRefused(now.port, parent.password), /password authentication failed/);
      },
    );

    await t.test('PITR: exactly the rows committed before target_time', async () => {
      await insert(parent, 'c: before the target');
      await sleep(1_000);
      const target = new Date().toISOString();
      await sleep(1_000);
      await insert(parent, 'd: after the target');
      const pitr = await fork(b, parent, { fork_strategy: 'PITR', target_time: target });
      assert.deepEqual(await values(pitr), [
        'a: before the NOW fork',
        'b: committed after the NOW fork',
        'c: before the target',
      ]);
      await assert.rejects(pgClient(pitr.port, parent.password), /password authentication/);
    });

    await t.test(
      'LAST_SNAPSHOT: the rows of the newest backup (of a fork: a fork of a fork)',
      async () => {
        // The NOW fork's first backup, taken when it was READY, before anyone wrote to it.
        await b.waitFor(
          () => pitrWindowStart(b, now.id),
          "the NOW fork's first backup",
          120_000,
          BACKUP_POLL_MS,
        );
        const snap = await fork(b, now, { fork_strategy: 'LAST_SNAPSHOT' });
        assert.deepEqual(await values(snap), ['a: before the NOW fork']);
        const [h] = await pgQuery(
          snap.port,
          snap.password,
          "SELECT count(*)::int AS n FROM timescaledb_information.hypertables WHERE hypertable_name = 'm'",
        );
        assert.equal(h.n, 1, 'the hypertable survives a fork of a fork');
      },
    );

    await t.test('a PAUSED parent forks from its data (NOW) and its backups (PITR)', async () => {
      await insert(parent, 'e: before the stop');
      await sleep(1_000);
      const target = new Date().toISOString();
      await sleep(1_000);
      await insert(parent, 'f: just before the stop');
      assert.equal((await b.call('POST', `${b.servicePath(parent.id)}/stop`)).status, 202);
      await b.waitForStatus(parent.id, 'PAUSED', 60_000);
      // Both asked for at once, made side by side.
      const [copy, pitr] = await Promise.all([
        fork(b, parent, { fork_strategy: 'NOW' }),
        fork(b, parent, { fork_strategy: 'PITR', target_time: target }),
      ]);
      assert.equal((await values(copy)).at(-1), 'f: just before the stop');
      assert.equal((await values(pitr)).at(-1), 'e: before the stop');
      assert.equal((await b.call('GET', b.servicePath(parent.id))).body.status, 'PAUSED');
      assert.equal((await b.call('POST', `${b.servicePath(parent.id)}/start`)).status, 202);
      await b.waitForStatus(parent.id, 'READY', 60_000);
    });

    await t.test(
      'kill -9 of Basin in the middle of a fork: it completes once Basin is back',
      async () => {
        const target = new Date().toISOString();
        await sleep(1_000);
        const res = await b.call('POST', `${b.servicePath(parent.id)}/forkService`, {
          fork_strategy: 'PITR',
          target_time: target,
          name: 'interrupted',
        });
        assert.equal(res.status, 202, res.text);
        const id: string = res.body.service_id;
        // Killed once the engine is at it.
        await b.waitFor(
          async () => (await b.call('GET', b.servicePath(id))).body.status === 'CONFIGURING',
          'the fork CONFIGURING',
        );
        await b.kill();
        // Nothing of the restore outlives Basin: its helpers die with it.
        const user = readPasswd().find((p) => p.name === serviceUserName(id));
        if (user) {
          await b.waitFor(
            async () => {
              const left = await processesOfUser(user.uid);
              // The fork's own server may already run (recovering): it is meant to.
              return left.length === 0 || existsSync(layout.pgdata({ id, node: 0 }));
            },
            "the restore's processes gone",
            10_000,
          );
        }
        b = await inst.start();
        const ready2 = await b.waitForStatus(id, 'READY', 180_000);
        const interrupted = { id, port: ready2.endpoint.port, password: res.body.initial_password };
        assert.equal((await values(interrupted)).at(-1), 'f: just before the stop');
        // Nothing half-made is left behind.
        const instance = readdirSync(layout.instanceDir(id));
        assert.deepEqual(
          instance.filter((n) => n.startsWith('.')),
          [],
          `staging left: ${instance}`,
        );
        assert.equal(existsSync(layout.forkSource(id).repo), false);
        assert.deepEqual(
          readdirSync(layout.backupDir(id)).filter((n) => n.startsWith('.')),
          [],
        );
      },
    );

    await t.test('deleting the parent leaves its forks working', async () => {
      assert.equal((await b.call('DELETE', b.servicePath(parent.id))).status, 202);
      await b.waitGone(parent.id, 60_000);
      assert.equal(existsSync(layout.backupDir(parent.id)), false, "the parent's stanza is gone");
      assert.deepEqual(await values(now), ['a: before the NOW fork', 'written to the NOW fork']);
      const list = (await b.call('GET', b.servicePath())).body as { status: string }[];
      assert.ok(list.length >= 6);
      for (const s of list) assert.equal(s.status, 'READY');
    });
  },
);
