// The whole path a user takes, against real PostgreSQL: the API creates a
// service on the local driver, and psql / a PostgreSQL client connects to it
// over TLS and sees each endpoint's real effect.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { promisify } from 'node:util';
import pg from 'pg';
import { Layout } from '../../src/drivers/local/layout.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';
import { dataDirFor, postmasterPid, processesOf } from '../local/helpers.js';

const run = promisify(execFile);

interface Svc {
  service_id: string;
  endpoint: { host: string; port: number };
  initial_password?: string;
  status: string;
}

async function connect(
  svc: Svc,
  password: string,
  ssl: boolean | object = { rejectUnauthorized: false },
) {
  const client = new pg.Client({
    host: '127.0.0.1',
    port: svc.endpoint.port,
    user: 'tsdbadmin',
    database: 'tsdb',
    password,
    ssl: ssl as pg.ClientConfig['ssl'],
    connectionTimeoutMillis: 5000,
  });
  await client.connect();
  return client;
}

async function query(svc: Svc, password: string, sql: string): Promise<any[]> {
  const client = await connect(svc, password);
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

async function refused(
  svc: Svc,
  password: string,
  ssl: boolean | object = { rejectUnauthorized: false },
): Promise<string> {
  try {
    const c = await connect(svc, password, ssl);
    await c.end();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the connection was accepted');
}

async function status(b: TestBasin, id: string, want: string): Promise<Svc> {
  try {
    return await eventually(
      async () => {
        const res = await b.call('GET', `/v1/projects/${b.projectId}/services/${id}`);
        return res.body?.status === want ? (res.body as Svc) : undefined;
      },
      `${id} ${want}`,
      60_000,
    );
  } catch (err) {
    // Say why: the operations still pending and their last errors.
    const ops = await b.basin.store.operations.listPending();
    throw new Error(`${(err as Error).message}; pending: ${JSON.stringify(ops)}`);
  }
}

async function create(b: TestBasin, body: object): Promise<Svc & { initial_password: string }> {
  const res = await b.call('POST', `/v1/projects/${b.projectId}/services`, body);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body;
}

/** A block of ports of its own, so parallel runs on one machine do not collide. */
function portBlock(): string {
  const start = 20000 + (process.pid % 400) * 100;
  return `${start}-${start + 99}`;
}

test(
  'a service on the local driver is a real PostgreSQL that every endpoint acts on',
  { timeout: 300_000 },
  async (t) => {
    const dataDir = dataDirFor(t);
    const env = {
      BASIN_DRIVER: 'local',
      BASIN_RECONCILE_INTERVAL_MS: '300',
      BASIN_PORT_RANGE: portBlock(),
    };
    const b = await startBasin(t, { dataDir, env });
    const layout = new Layout(b.config.dataDir);

    const ts = await create(b, { name: 'metrics', cpu_millis: 'shared', memory_gbs: 'shared' });
    let password = ts.initial_password;
    const svc = await status(b, ts.service_id, 'READY');

    await t.test('psql connects over TLS as tsdbadmin to tsdb', async () => {
      const { stdout } = await run(
        'psql',
        [
          `host=127.0.0.1 port=${svc.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=require`,
          '-Atc',
          'select current_user, current_database(), ssl from pg_stat_ssl where pid = pg_backend_pid()',
        ],
        { env: { ...process.env, PGPASSWORD: password } },
      );
      assert.equal(stdout.trim(), 'tsdbadmin|tsdb|t');
    });

    await t.test('plain TCP and a wrong password are refused', async () => {
      assert.match(await refused(svc, password, false), /no pg_hba.conf entry|SSL|reject/i);
      assert.match(await refused(svc, 'not-the-password'), /password authentication failed/);
    });

    await t.test('TimescaleDB hypertables work', async () => {
      await query(
        svc,
        password,
        `CREATE TABLE readings (time timestamptz NOT NULL, value double precision);
      SELECT create_hypertable('readings', 'time');
      INSERT INTO readings SELECT t, 1 FROM generate_series(now() - interval '3 days', now(), interval '1 hour') t;`,
      );
      const [row] = await query(svc, password, 'SELECT count(*)::int AS n FROM readings');
      assert.equal(row.n, 73);
    });

    await t.test('resize changes the settings and keeps the data', async () => {
      const before = (await query(svc, password, 'SHOW shared_buffers'))[0].shared_buffers;
      const res = await b.call(
        'POST',
        `/v1/projects/${b.projectId}/services/${svc.service_id}/resize`,
        { cpu_millis: '1000', memory_gbs: '4' },
      );
      assert.equal(res.status, 202);
      await status(b, svc.service_id, 'READY');
      const after = (await query(svc, password, 'SHOW shared_buffers'))[0].shared_buffers;
      assert.notEqual(after, before);
      assert.equal(
        (await query(svc, password, 'SELECT count(*)::int AS n FROM readings'))[0].n,
        73,
      );
    });

    await t.test('stop refuses connections; start brings the data back', async () => {
      assert.equal(
        (await b.call('POST', `/v1/projects/${b.projectId}/services/${svc.service_id}/stop`))
          .status,
        202,
      );
      await status(b, svc.service_id, 'PAUSED');
      assert.match(await refused(svc, password), /ECONNREFUSED|connect/);
      assert.equal(
        (await b.call('POST', `/v1/projects/${b.projectId}/services/${svc.service_id}/start`))
          .status,
        202,
      );
      await status(b, svc.service_id, 'READY');
      assert.equal(
        (await query(svc, password, 'SELECT count(*)::int AS n FROM readings'))[0].n,
        73,
      );
    });

    await t.test('updatePassword: the old password is refused, the new one works', async () => {
      const res = await b.call(
        'POST',
        `/v1/projects/${b.projectId}/services/${svc.service_id}/updatePassword`,
        { password: 'a-brand-new-password' },
      );
      assert.equal(res.status, 204);
      await b.basin.engine.idle();
      assert.match(await refused(svc, password), /password authentication failed/);
      password = 'a-brand-new-password';
      assert.equal((await query(svc, password, 'SELECT 1 AS one'))[0].one, 1);
    });

    await t.test('a client error shows in the logs endpoint with its severity', async () => {
      await assert.rejects(query(svc, password, 'SELECT * FROM no_such_table'), /does not exist/);
      const entry = await eventually(async () => {
        const res = await b.call(
          'GET',
          `/v1/projects/${b.projectId}/services/${svc.service_id}/logs?severities=ERROR&search=no_such_table`,
        );
        assert.equal(res.status, 200);
        return res.body.entries.find(
          (e: { message: string }) => e.message === 'relation "no_such_table" does not exist',
        );
      }, 'the ERROR in the logs');
      assert.equal(entry.severity, 'ERROR');
      assert.ok(Math.abs(Date.parse(entry.timestamp) - Date.now()) < 60_000);
    });

    await t.test('metrics come from the running cluster', async () => {
      const body = await eventually(
        async () => {
          const res = await b.call('GET', `/v1/projects/${b.projectId}/services/${svc.service_id}`);
          return res.body.metrics?.memory_mb > 0 ? res.body : undefined;
        },
        'metrics',
        30_000,
      );
      assert.ok(body.metrics.storage_mb > 10, `storage ${body.metrics.storage_mb} MB`);
      assert.ok(body.metrics.milli_cpu >= 0);
    });

    await t.test(
      'a killed postmaster makes the service UNSTABLE, then READY with its data',
      async () => {
        const pid = postmasterPid(layout.pgdata({ id: svc.service_id, node: 0 }));
        process.kill(pid, 'SIGKILL');
        await status(b, svc.service_id, 'UNSTABLE');
        await status(b, svc.service_id, 'READY');
        assert.notEqual(postmasterPid(layout.pgdata({ id: svc.service_id, node: 0 })), pid);
        assert.equal(
          (await query(svc, password, 'SELECT count(*)::int AS n FROM readings'))[0].n,
          73,
        );
      },
    );

    await t.test(
      'restarting Basin adopts the running cluster instead of starting it twice',
      async () => {
        const pid = postmasterPid(layout.pgdata({ id: svc.service_id, node: 0 }));
        await b.basin.close();
        const again = await startBasin(t, { dataDir, env });
        assert.equal(
          (await again.call('GET', `/v1/projects/${again.projectId}/services/${svc.service_id}`))
            .body.status,
          'READY',
        );
        await again.basin.engine.idle();
        assert.equal(postmasterPid(layout.pgdata({ id: svc.service_id, node: 0 })), pid);
        assert.equal((await query(svc, password, 'SELECT 1 AS one'))[0].one, 1);
        b.basin = again.basin;
        b.call = again.call;
      },
    );

    await t.test(
      'VECTOR services have pgvector; POSTGRES services have no extensions',
      async () => {
        const vec = await create(b, {
          name: 'embeddings',
          addons: ['ai'],
          cpu_millis: 'shared',
          memory_gbs: 'shared',
        });
        const plain = await create(b, {
          name: 'plain',
          addons: [],
          cpu_millis: 'shared',
          memory_gbs: 'shared',
        });
        const v = await status(b, vec.service_id, 'READY');
        const p = await status(b, plain.service_id, 'READY');
        const [d] = await query(
          v,
          vec.initial_password,
          `SELECT '[1,2,3]'::vector <-> '[3,2,1]'::vector AS d`,
        );
        assert.ok(Math.abs(d.d - Math.sqrt(8)) < 1e-9);
        const exts = await query(
          p,
          plain.initial_password,
          `SELECT extname FROM pg_extension WHERE extname IN ('vector', 'timescaledb')`,
        );
        assert.deepEqual(exts, []);
      },
    );

    await t.test('delete stops every process and removes every file', async () => {
      const pgdata = layout.pgdata({ id: svc.service_id, node: 0 });
      assert.ok(processesOf(pgdata).length > 0);
      assert.equal(
        (await b.call('DELETE', `/v1/projects/${b.projectId}/services/${svc.service_id}`)).status,
        202,
      );
      await eventually(
        async () =>
          (await b.call('GET', `/v1/projects/${b.projectId}/services/${svc.service_id}`)).status ===
          404,
        'gone',
        60_000,
      );
      assert.match(await refused(svc, password), /ECONNREFUSED|connect/);
      assert.deepEqual(processesOf(pgdata), []);
      assert.equal(existsSync(layout.instanceDir(svc.service_id)), false);
      assert.equal(existsSync(layout.archiveDir(svc.service_id)), false);
    });
  },
);
