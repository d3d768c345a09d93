// The connection pooler as a user meets it, against real PostgreSQL and
// PgBouncer: Basin as shipped (`node dist/main.js`, local driver) enables a
// service's pooler, and psql / node-postgres connect through it in both
// pooling modes. The test knows Basin by its API and its data directory.

import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { installation } from './basin-process.js';
import { conninfo, pgClient, pgQuery, pgRefused, portOpen, psql, psqlRefused } from './clients.js';
import {
  expectedPoolerProcesses,
  poolerPgbouncers,
  showPoolsSummed,
} from './pgbouncer-processes.js';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { tenantShell, REFUSED_OR_HIDDEN } from './tenants.js';

/** A node-postgres client through the pooler to `database`. */
const pooled = (port: number, password: string, database: string) =>
  pgClient(port, password, undefined, { database });

test(
  'a connection pooler on the local driver: real PgBouncer in both modes',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '300' } });
    let b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const created = await b.call('POST', b.servicePath(), {
      name: 'pooled',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    let password: string = created.body.initial_password;
    const svc = await b.waitForStatus(id, 'READY');
    assert.equal(svc.connection_pooler, undefined);
    const files = layout.pooler(id);
    const processes = await expectedPoolerProcesses();
    const bouncers = () => poolerPgbouncers(files.dir);

    const on = await b.call('POST', `${b.servicePath(id)}/enablePooler`);
    assert.equal(on.status, 200, on.text);
    const ready = await b.waitForStatus(id, 'READY');
    const endpoint = ready.connection_pooler?.endpoint;
    assert.ok(endpoint, 'connection_pooler.endpoint while the pooler runs');
    const port: number = endpoint.port;
    assert.notEqual(port, ready.endpoint.port);
    assert.ok(port >= inst.portRange.min && port <= inst.portRange.max, `port ${port}`);
    // One PgBouncer a core on this host (where Basin's 1.19+ build is), on one port.
    assert.equal(bouncers().length, processes);

    await t.test('psql through the pooler, session and transaction mode', async () => {
      for (const dbname of ['tsdb', 'tsdb_transaction']) {
        const out = await psql(
          conninfo(port, { dbname }),
          password,
          'select current_user, current_database()',
        );
        assert.equal(out, 'tsdbadmin|tsdb', dbname);
      }
    });

    await t.test(
      "verify-full against the installation's CA works on the pooler's port",
      async () => {
        const out = await psql(
          conninfo(port, {
            host: endpoint.host,
            sslmode: 'verify-full',
            sslrootcert: layout.caCert,
          }),
          password,
          'select 1',
        );
        assert.equal(out, '1');
      },
    );

    await t.test('sslmode=disable and a wrong password are refused', async () => {
      assert.match(
        await psqlRefused(conninfo(port, { sslmode: 'disable' }), password),
        /SSL required|no pg_hba|reject/i,
      );
      assert.match(await pgRefused(port, 'not-the-password'), /authentication failed/);
    });

    await t.test('session mode: a SET persists across the client’s transactions', async () => {
      const c = await pooled(port, password, 'tsdb');
      try {
        await c.query(`SET application_name = 'kept-by-the-session'`);
        await c.query('BEGIN; SELECT 1; COMMIT;');
        const pid1 = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p;
        await c.query('BEGIN; SELECT 2; COMMIT;');
        const { rows } = await c.query('SELECT current_setting($1) AS v, pg_backend_pid() AS p', [
          'application_name',
        ]);
        assert.deepEqual(rows, [{ v: 'kept-by-the-session', p: pid1 }]);
      } finally {
        await c.end();
      }
    });

    await t.test(
      'transaction mode: many more clients than server connections (SHOW POOLS, pg_stat_activity)',
      async () => {
        const clients = await Promise.all(
          Array.from({ length: 40 }, () => pooled(port, password, 'tsdb_transaction')),
        );
        try {
          // Every client runs transactions at once; each is served.
          const pids = await Promise.all(
            clients.map(async (c) => {
              const { rows } = await c.query('SELECT pg_backend_pid() AS p FROM pg_sleep(0.05)');
              return rows[0].p as number;
            }),
          );
          const servers = new Set(pids).size;
          assert.ok(servers < clients.length, `${servers} server connections for 40 clients`);
          // Each process's pools, summed: the clients are spread over them,
          // and together they hold no more server connections than one did.
          const pools = await showPoolsSummed(files, port);
          const pool = pools.get('tsdb_transaction');
          assert.ok(pool, JSON.stringify([...pools]));
          const serverConns = (pool.sv_active ?? 0) + (pool.sv_idle ?? 0) + (pool.sv_used ?? 0);
          assert.equal((pool.cl_active ?? 0) + (pool.cl_waiting ?? 0), 40);
          assert.ok(serverConns <= 12, `pool of ${serverConns} server connections`);
          // tsdbadmin's own console (stats_users) still answers on the port.
          const admin = await pooled(port, password, 'pgbouncer');
          try {
            const own = (await admin.query('SHOW POOLS')).rows;
            assert.ok(
              own.some((p) => p.database === 'tsdb_transaction'),
              JSON.stringify(own),
            );
          } finally {
            await admin.end();
          }
          const direct = await pgQuery(
            ready.endpoint.port,
            password,
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE usename = 'tsdbadmin' AND backend_type = 'client backend'`,
          );
          // At most both pools' server connections and this one (the session
          // pool may keep one from the test before).
          assert.ok(direct[0].n <= 12 + 12 + 1, `${direct[0].n} tsdbadmin backends on the server`);
        } finally {
          await Promise.all(clients.map((c) => c.end()));
        }
      },
    );

    await t.test(
      'a query cancelled by its client, whichever PgBouncer process the cancel request reaches',
      async () => {
        // psql sends the cancel request (on SIGINT) over a new connection,
        // which the kernel gives to any of the processes on the port: each
        // forwards a key another one issued to its peer.
        for (const dbname of ['tsdb_transaction', 'tsdb', 'tsdb_transaction', 'tsdb']) {
          for (let i = 0; i < 3; i++) {
            const said = await cancelledByPsql(port, password, dbname, ready.endpoint.port);
            assert.match(said, /canceling statement due to user request/, said);
          }
        }
        // And deterministically: a pooled client's cancel key sent to each
        // process's own socket in turn (as a peer would), so that all but
        // one of them must forward it.
        for (let target = 0; target < processes; target++) {
          for (let i = 0; i < 3; i++) {
            const c = await pooled(port, password, 'tsdb_transaction');
            try {
              // Its outcome, caught at once: the cancel may land before anyone awaits it.
              const sleeping = c.query('SELECT pg_sleep(60)').then(
                () => 'not cancelled',
                (err: Error) => err.message,
              );
              await b.waitFor(
                () => sleepingBackends(ready.endpoint.port, password).then((n) => n === 1),
                'the pg_sleep to run',
              );
              const key = c as unknown as { processID: number; secretKey: number };
              await sendCancel(join(files.dir, `s${target}`, `.s.PGSQL.${port}`), key);
              assert.match(await sleeping, /canceling statement due to user request/);
            } finally {
              await c.end().catch(() => {});
            }
          }
        }
      },
    );

    await t.test(
      "the processes' sockets (their peering) are out of another tenant's reach",
      async () => {
        const other = await b.call('POST', b.servicePath(), {
          name: 'neighbour',
          addons: [],
          cpu_millis: 'shared',
          memory_gbs: 'shared',
        });
        assert.equal(other.status, 202, other.text);
        await b.waitForStatus(other.body.service_id, 'READY');
        const shell = await tenantShell(other.body, other.body.initial_password);
        try {
          for (let i = 0; i < processes; i++) {
            const dir = join(files.dir, `s${i}`);
            await shell.refused(`ls ${dir}`, REFUSED_OR_HIDDEN);
            // A cancel request or a console login there: psql cannot even reach the socket.
            await shell.refused(
              `psql -XAtc 'SHOW POOLS' 'host=${dir} port=${port} user=pgbouncer dbname=pgbouncer'`,
              REFUSED_OR_HIDDEN,
            );
          }
        } finally {
          await shell.end();
          assert.equal((await b.call('DELETE', b.servicePath(other.body.service_id))).status, 202);
          await b.waitGone(other.body.service_id);
        }
      },
    );

    await t.test('updatePassword: the pooler refuses the old password, takes the new', async () => {
      const res = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
        password: 'the-pooler-follows-this',
      });
      assert.equal(res.status, 204, res.text);
      // Applied by the engine after the answer: the server first, then the pooler.
      const old = password;
      await b.waitFor(
        () => pgRefused(port, old).then((m) => /authentication failed/.test(m)),
        'the pooler to refuse the old password',
      );
      password = 'the-pooler-follows-this';
      const c = await pooled(port, password, 'tsdb_transaction');
      assert.equal((await c.query('SELECT 1 AS one')).rows[0].one, 1);
      await c.end();
    });

    await t.test('a restarted Basin adopts the running pooler, not a second one', async () => {
      const pids = bouncers();
      assert.equal(pids.length, processes);
      assert.deepEqual(await b.stop(), { code: 0, signal: null });
      // Basin is gone; its pooler is not.
      const c = await pooled(port, password, 'tsdb');
      await c.end();
      b = await inst.start();
      const res = await b.call('GET', b.servicePath(id));
      assert.equal(res.body.status, 'READY');
      assert.equal(res.body.connection_pooler.endpoint.port, port);
      // An apply of the new Basin keeps it.
      const env = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
        password: 'after-the-restart-too',
      });
      assert.equal(env.status, 204, env.text);
      password = 'after-the-restart-too';
      await b.waitFor(
        () => pooled(port, password, 'tsdb').then((x) => x.end().then(() => true)),
        'the new password to work through the pooler',
      );
      assert.deepEqual(bouncers(), pids);
    });

    await t.test('a killed PgBouncer is started again, beside the others', async () => {
      const pids = bouncers();
      const pid = pids[0] as number;
      process.kill(pid, 'SIGKILL');
      await b.waitFor(async () => {
        const now = bouncers();
        return now.length === processes && !now.includes(pid) && (await portOpen(port));
      }, 'a new PgBouncer');
      // The others served on meanwhile, untouched.
      for (const other of pids.slice(1)) assert.ok(bouncers().includes(other));
      await b.waitForStatus(id, 'READY');
      await pooled(port, password, 'tsdb').then((x) => x.end());
    });

    await t.test('disable stops PgBouncer; its endpoint refuses and is gone', async () => {
      const off = await b.call('POST', `${b.servicePath(id)}/disablePooler`);
      assert.equal(off.status, 200, off.text);
      const after = await b.waitForStatus(id, 'READY');
      assert.equal(after.connection_pooler, undefined);
      assert.deepEqual(bouncers(), []);
      assert.equal(await portOpen(port), false);
      // The service itself is untouched.
      assert.equal((await pgQuery(after.endpoint.port, password, 'SELECT 1 AS one'))[0].one, 1);
    });

    await t.test('delete takes the pooler with the service', async () => {
      const again = await b.call('POST', `${b.servicePath(id)}/enablePooler`);
      assert.equal(again.status, 200, again.text);
      await b.waitForStatus(id, 'READY');
      assert.equal(bouncers().length, processes);
      const uid = statSync(layout.pgdata({ id, node: 0 })).uid;
      assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
      await b.waitGone(id);
      assert.deepEqual(bouncers(), []);
      assert.deepEqual(await processesOfUser(uid), []);
      assert.equal(await portOpen(port), false);
    });
  },
);

/**
 * psql through the pooler runs pg_sleep(60) until the server shows it, then
 * gets SIGINT, as a user's Ctrl-C: what it said (stderr).
 */
async function cancelledByPsql(
  port: number,
  password: string,
  dbname: string,
  directPort: number,
): Promise<string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')));
  const p = spawn('psql', [conninfo(port, { dbname }), '-XAtqc', 'SELECT pg_sleep(60)'], {
    env: { ...env, PGPASSWORD: password },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let said = '';
  p.stderr.on('data', (d: Buffer) => (said += d.toString()));
  const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
  try {
    for (let i = 0; (await sleepingBackends(directPort, password)) !== 1; i++) {
      if (i > 600) throw new Error('the pg_sleep never ran');
      await new Promise((r) => setTimeout(r, 50));
    }
    p.kill('SIGINT');
    await exited;
    return said;
  } finally {
    p.kill('SIGKILL');
  }
}

/** How many backends run pg_sleep(60) now (the server's own view). */
async function sleepingBackends(port: number, password: string): Promise<number> {
  const rows = await pgQuery(
    port,
    password,
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'`,
  );
  return rows[0].n as number;
}

/** A CancelRequest with `key`, on the Unix socket `path`. */
function sendCancel(path: string, key: { processID: number; secretKey: number }): Promise<void> {
  const msg = Buffer.alloc(16);
  msg.writeInt32BE(16, 0);
  msg.writeInt32BE(80877102, 4);
  msg.writeInt32BE(key.processID, 8);
  msg.writeInt32BE(key.secretKey, 12);
  return new Promise((resolve, reject) => {
    const s = connect({ path }, () => s.end(msg));
    s.on('error', reject);
    s.on('close', () => resolve());
  });
}
