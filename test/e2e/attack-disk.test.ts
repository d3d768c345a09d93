// Issue 18, item 4 (the host's disk), tried against Basin as shipped (`node
// dist/main.js`, local driver) by a tenant with a customer's means only: its
// project credential, and its service's tsdbadmin, which runs programs as the
// service's OS user through COPY … PROGRAM. With a small allowance (200 MB
// for a shared service, an installation setting), the tenant fills its
// service:
// - with SQL past its allowance: the service becomes read-only (PostgreSQL's
//   read-only error, said in the API and the logs); a session may SET it
//   off to free space, and after a DROP it takes writes again;
// - with SQL past its ceiling (SET off, as a session may): PostgreSQL is
//   restarted in recovery, where no session writes, whatever it sets;
// - with files written into its data directory past its limit: every process
//   of the service is stopped (none left of its OS user, its PgBouncer
//   included), neither a start nor a kill -9 and restart of Basin brings it
//   back, and a resize that raises its allowance does, its pooler too, with
//   no Basin entry taking any of those stops for a death of its own;
// and another tenant's service takes writes all along.
// docs/decisions.md (Storage allowances) says why; the watch's own rules are
// unit-tested in src/drivers/local/storage/storage-watch.test.ts.

import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { test } from 'node:test';
import type pg from 'pg';
import { Layout } from '../../src/drivers/local/layout.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { pgClient, pgRefused } from './clients.js';
import { installation } from './basin-process.js';
import { bootstrapTenant, newTenant, TenantApi, type CreatedService } from './tenants.js';

/** PostgreSQL's read_only_sql_transaction: "cannot execute INSERT in a read-only transaction". */
const READ_ONLY = '25006';

/** About 11 MB of rows that do not compress (TOAST would shrink repeated text). */
const CHUNK =
  "INSERT INTO big SELECT string_agg(md5(g::text || random()::text), '') " +
  'FROM generate_series(1, 10000) g, generate_series(1, 32) r GROUP BY g';

/** The error code of `sql`'s failure, or 'ok'. */
async function outcome(client: pg.Client, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? (err as Error).message;
  }
}

test(
  'a service filled past its allowance is made read-only, then stopped; others keep writing',
  { timeout: 900_000 },
  async (t) => {
    const inst = await installation(t, {
      args: [
        '--storage-allowance',
        '1x',
        '--storage-allowance-shared',
        '200MB',
        '--sizes',
        'shared,500m/1GB',
      ],
    });
    // The running Basin: replaced after a kill -9 below, and the tenants' APIs with it.
    let b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const attackerTenant = await newTenant(inst, 'attacker');
    const otherTenant = bootstrapTenant(b);
    let attacker = new TenantApi(b, attackerTenant);
    let other = new TenantApi(b, otherTenant);
    const [a, o] = await Promise.all([attacker.create('a'), other.create('o')]);
    await Promise.all([
      attacker.waitForStatus(a.service_id, 'READY'),
      other.waitForStatus(o.service_id, 'READY'),
    ]);
    const uid = statSync(layout.pgdata({ id: a.service_id, node: 0 })).uid;

    /** The service's storage field once it says `state` (and its status then). */
    const storageOf = (api: TenantApi, id: string, state: string) =>
      api.b.waitFor(
        async () => {
          const res = await api.call('GET', api.path(id));
          return res.body?.storage?.state === state ? res.body : undefined;
        },
        `service ${id}'s storage to be ${state}`,
        180_000,
      );
    /** Basin's entries in the service's logs, newest first, as its tenant reads them. */
    const basinLogs = async (api: TenantApi, id: string): Promise<string[]> => {
      const res = await api.call('GET', `${api.path(id)}/logs?search=basin`);
      assert.equal(res.status, 200, res.text);
      return res.body.logs as string[];
    };
    const logged = (api: TenantApi, id: string, what: RegExp) =>
      api.b.waitFor(
        async () => (await basinLogs(api, id)).find((l) => what.test(l)),
        `an entry ${what} in the logs of ${id}`,
        60_000,
      );
    /** A client of `svc`'s tsdbadmin, ended after the test. */
    const connect = async (svc: CreatedService) => {
      const client = await pgClient(svc.endpoint.port, svc.initial_password);
      t.after(() => client.end().catch(() => {}));
      return client;
    };
    /** The other tenant's service takes a write now. */
    const otherWrites = async () => {
      const client = await connect(o);
      await client.query('CREATE TABLE IF NOT EXISTS notes (at timestamptz)');
      assert.equal(await outcome(client, 'INSERT INTO notes VALUES (now())'), 'ok');
      await client.end();
      assert.equal((await storageOf(other, o.service_id, 'ok')).status, 'READY');
    };

    const first = await storageOf(attacker, a.service_id, 'ok');
    assert.equal(first.storage.allowance_mb, 200);
    // Its PgBouncer is a process of its OS user too, in a cgroup of its own.
    const pooling = await attacker.call('POST', `${attacker.path(a.service_id)}/enablePooler`);
    assert.equal(pooling.status, 200, pooling.text);
    const poolerPort: number = (await attacker.waitForStatus(a.service_id, 'READY'))
      .connection_pooler.endpoint.port;
    const setup = await connect(a);
    await setup.query('GRANT pg_execute_server_program TO tsdbadmin');
    await setup.query('CREATE TABLE big (x text)');

    await t.test(
      'past its allowance with SQL: read-only, which a session may lift to free space',
      async () => {
        let last = 'ok';
        for (let i = 0; i < 40 && last === 'ok'; i++) last = await outcome(setup, CHUNK);
        assert.equal(last, READ_ONLY, 'an insert fails with the read-only error');
        const body = await storageOf(attacker, a.service_id, 'read_only');
        assert.equal(body.status, 'READY');
        // Its metrics say as much once sampled again (they are sampled apart
        // from the watch): at least where read-only ends, the allowance less
        // its slack (200 - 32 MB: domain/storage.ts), since a checkpoint after
        // the last write may recycle WAL and take the data just under 200.
        await b.waitFor(async () => {
          const res = await attacker.call('GET', attacker.path(a.service_id));
          return res.body?.metrics?.storage_mb >= 168;
        }, 'the storage metric to reach the read-only level');
        await logged(
          attacker,
          a.service_id,
          /over its allowance of 200 MB: the service is read-only/,
        );
        await otherWrites();
        // As the entry says: in a session, SET it off, and drop what is not needed.
        await setup.query('SET default_transaction_read_only = off');
        await setup.query('TRUNCATE big');
        await setup.query('RESET default_transaction_read_only');
        await storageOf(attacker, a.service_id, 'ok');
        await logged(
          attacker,
          a.service_id,
          /under its allowance of 200 MB: the service takes writes again/,
        );
        // New sessions write again once the converge that lowered the level reloaded it.
        await b.waitFor(async () => {
          const fresh = await pgClient(a.endpoint.port, a.initial_password);
          try {
            return (await outcome(fresh, CHUNK)) === 'ok';
          } finally {
            await fresh.end();
          }
        }, 'a new session to write again');
      },
    );

    await t.test(
      'past its ceiling with SQL (SET off): restarted in recovery, where no session writes',
      async () => {
        const inRecovery = await b.waitFor(
          async () => {
            // Fresh sessions: the restart ends the old ones.
            const client = await pgClient(a.endpoint.port, a.initial_password).catch(
              () => undefined,
            );
            if (!client) return undefined;
            try {
              await client.query('SET default_transaction_read_only = off');
              const res = await outcome(client, CHUNK);
              if (res !== READ_ONLY) return undefined;
              const { rows } = await client.query('SELECT pg_is_in_recovery() AS r');
              return rows[0].r === true ? res : undefined;
            } catch {
              return undefined; // the server went down to restart
            } finally {
              await client.end().catch(() => {});
            }
          },
          'an insert to fail in recovery, whatever the session sets',
          300_000,
        );
        assert.equal(inRecovery, READ_ONLY);
        const body = await storageOf(attacker, a.service_id, 'recovery');
        assert.equal(body.status, 'READY');
        await logged(attacker, a.service_id, /PostgreSQL is restarted read-only, in recovery/);
        // It still answers reads.
        const reader = await connect(a);
        const { rows } = await reader.query('SELECT count(*)::int AS n FROM big');
        assert.ok(rows[0].n > 0);
        await reader.end();
        await otherWrites();
      },
    );

    let stoppedAtMb = 0;
    await t.test(
      'past its limit with files: every process stopped, and a start does not undo it',
      async () => {
        const comms = async () =>
          (await processesOfUser(uid)).map((pid) => {
            try {
              return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
            } catch {
              return ''; // ended meanwhile
            }
          });
        // Its pooler runs before (once the restart into recovery has settled).
        await b.waitFor(async () => (await comms()).includes('pgbouncer'), 'its pooler to run');
        // COPY … TO PROGRAM runs in recovery too (it writes no table): 300 MB of
        // zeros into its data directory, at the disk's speed.
        const shell = await connect(a);
        await shell
          .query(`COPY (SELECT 1) TO PROGRAM 'dd if=/dev/zero of=junk bs=1M count=300 2>/dev/null'`)
          .catch(() => {}); // killed mid-way, with the server
        const body = await storageOf(attacker, a.service_id, 'stopped');
        stoppedAtMb = body.metrics.storage_mb;
        await attacker.waitForStatus(a.service_id, 'UNSTABLE');
        await logged(
          attacker,
          a.service_id,
          /past its limit of 328 MB .*every process of the service was stopped/,
        );
        await b.waitFor(
          async () => (await processesOfUser(uid)).length === 0,
          `no process of uid ${uid} left`,
          60_000,
        );
        assert.match(
          await pgRefused(a.endpoint.port, a.initial_password),
          /ECONNREFUSED|terminat|shut/,
        );
        await otherWrites();
        // The tenant asks for a start: refused by the converge, with why.
        const start = await attacker.call('POST', `${attacker.path(a.service_id)}/start`);
        assert.equal(start.status, 202, start.text);
        await logged(
          attacker,
          a.service_id,
          /failed: storage is at \d+ MB, past its limit of 328 MB: the service does not start/,
        );
        await attacker.waitForStatus(a.service_id, 'UNSTABLE');
        assert.deepEqual(await processesOfUser(uid), []);
        t.diagnostic(`stopped at ${stoppedAtMb} MB, ${stoppedAtMb - 328} MB past its limit`);
      },
    );

    await t.test(
      'a kill -9 of Basin changes nothing: the restarted one keeps it stopped',
      async () => {
        await b.kill();
        b = await inst.start();
        attacker = new TenantApi(b, attackerTenant);
        other = new TenantApi(b, otherTenant);
        // Its level comes from Basin's record before anything is measured again.
        const body = await storageOf(attacker, a.service_id, 'stopped');
        assert.equal(body.status, 'UNSTABLE');
        await otherWrites();
        assert.deepEqual(await processesOfUser(uid), []);
      },
    );

    await t.test('a resize that raises its allowance brings it back, data and all', async () => {
      const res = await attacker.call('POST', `${attacker.path(a.service_id)}/resize`, {
        cpu_millis: '500',
        memory_gbs: '1',
      });
      assert.equal(res.status, 202, res.text);
      await attacker.waitForStatus(a.service_id, 'READY');
      const body = await storageOf(attacker, a.service_id, 'ok');
      assert.equal(body.storage.allowance_mb, 1024);
      const client = await connect(a);
      assert.equal(await outcome(client, CHUNK), 'ok');
      const { rows } = await client.query('SELECT count(*)::int AS n FROM big');
      assert.ok(rows[0].n > 10_000);
      await client.end();
      // Its pooler is back too.
      const pooled = await pgClient(poolerPort, a.initial_password);
      assert.equal((await pooled.query('SELECT 1 AS one')).rows[0].one, 1);
      await pooled.end();
      // None of Basin's stops and restarts (recovery, the stop) was a death of its own.
      const deaths = (await basinLogs(attacker, a.service_id)).filter((l) =>
        /stopped on its own/.test(l),
      );
      assert.deepEqual(deaths, []);
      await otherWrites();
    });
  },
);
