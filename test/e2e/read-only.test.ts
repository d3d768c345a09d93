// Read-only sessions that hold, through Basin as shipped (`node dist/main.js`,
// the local driver, real PostgreSQL with basin_readonly preloaded): the
// vendor CLI's two ways of asking for read-only, the connection option
// `-c tsdb_admin.read_only_connection=true` and a role marked with
// `ALTER ROLE … SET tsdb_admin.read_only_role = true`, refuse every write a
// hostile session tries (turning read-only off in every way SQL has, COPY
// … PROGRAM after granting itself pg_execute_server_program, large objects
// through the fast-path protocol, timescaledb's functions), while an
// ordinary connection writes; the pooler, which cannot pass the option on,
// refuses it rather than drop it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';

const READ_ONLY = /read-only/;

test(
  'a read-only connection or role cannot write, and cannot make itself writable',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start();
    const created = await b.call('POST', b.servicePath(), {
      // Time-series: timescaledb's hooks run under basin_readonly's.
      name: 'guarded',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    const ready = await b.waitForStatus(id, 'READY', 180_000);
    const port: number = ready.endpoint.port;
    const admin = (q: string) => psql(conninfo(port), password, q);

    // What a hostile tenant prepares from a writable session: a table, the
    // right to run programs, a role marked read-only the vendor's way
    // (`tiger db create role --read-only --from tsdbadmin`).
    await admin('CREATE TABLE t (i int); INSERT INTO t VALUES (1)');
    await admin('CREATE TABLE m (ts timestamptz NOT NULL, v int)');
    await admin('GRANT pg_execute_server_program TO tsdbadmin');
    await admin("CREATE ROLE analyst WITH LOGIN PASSWORD 'analyst-pw' IN ROLE tsdbadmin");
    await admin('ALTER ROLE analyst SET tsdb_admin.read_only_role = true');

    const session = async (user: string, pass: string, options: string) => {
      const client = new pg.Client({
        host: '127.0.0.1',
        port,
        user,
        password: pass,
        database: 'tsdb',
        ssl: { rejectUnauthorized: false },
        options,
        connectionTimeoutMillis: 10_000,
      });
      client.on('error', () => {});
      await client.connect();
      t.after(() => client.end().catch(() => {}));
      return client;
    };
    const refused = async (client: pg.Client, sql: string, message: RegExp) => {
      await assert.rejects(client.query(sql), message, sql);
      await client.query('ROLLBACK').catch(() => {});
    };

    const sessions = {
      // The vendor CLI's read-only connection, its exact startup option.
      'the connection option': await session(
        'tsdbadmin',
        password,
        '-c tsdb_admin.read_only_connection=true',
      ),
      // The marked role, with a client that tries to override the marker
      // and the default at connect.
      'the marked role': await session(
        'analyst',
        'analyst-pw',
        '-c tsdb_admin.read_only_role=false -c default_transaction_read_only=off',
      ),
    };
    for (const [name, ro] of Object.entries(sessions)) {
      await t.test(`${name}: reads, and every write fails`, async () => {
        assert.equal((await ro.query('SELECT count(*)::int AS n FROM t')).rows[0].n, 1);
        assert.equal(
          (await ro.query('SHOW transaction_read_only')).rows[0].transaction_read_only,
          'on',
        );
        await refused(
          ro,
          'INSERT INTO t VALUES (2)',
          /cannot execute INSERT in a read-only transaction/,
        );
        await refused(
          ro,
          'CREATE TABLE u (i int)',
          /cannot execute CREATE TABLE in a read-only transaction/,
        );
        await refused(
          ro,
          "COPY t FROM PROGRAM 'echo 3'",
          /COPY FROM PROGRAM is not allowed in a read-only session/,
        );
        await refused(
          ro,
          "COPY (SELECT 1) TO PROGRAM 'cat'",
          /COPY TO PROGRAM is not allowed in a read-only session/,
        );
        await refused(
          ro,
          "COPY t TO '/tmp/basin-read-only-test'",
          /COPY TO a server file is not allowed/,
        );
        await refused(
          ro,
          "SELECT create_hypertable('m', 'ts')",
          /cannot execute create_hypertable\(\) in a read-only transaction/,
        );
        await refused(
          ro,
          'SELECT lo_from_bytea(0, $$x$$)',
          /lo_from_bytea\(\) is not allowed in a read-only session/,
        );
      });
      await t.test(`${name}: cannot be made writable`, async () => {
        const cannot =
          /this session is read-only \(tsdb_admin\.read_only_(connection|role)\) and cannot be made writable/;
        await refused(ro, 'SET default_transaction_read_only = off', cannot);
        await refused(ro, 'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE', cannot);
        await refused(ro, 'BEGIN READ WRITE', cannot);
        await ro.query('BEGIN');
        await refused(ro, 'SET TRANSACTION READ WRITE', cannot);
        await refused(
          ro,
          "SELECT set_config('default_transaction_read_only', 'off', false)",
          cannot,
        );
        await refused(
          ro,
          'SET tsdb_admin.read_only_connection = false',
          /cannot be set after connection start/,
        );
        await refused(ro, 'ALTER ROLE analyst RESET tsdb_admin.read_only_role', READ_ONLY);
        // RESET ALL and DISCARD ALL assign the defaults without asking.
        await ro.query('RESET ALL');
        await refused(
          ro,
          'INSERT INTO t VALUES (4)',
          /cannot execute INSERT in a read-only transaction/,
        );
        await ro.query('DISCARD ALL');
        await refused(
          ro,
          'INSERT INTO t VALUES (5)',
          /cannot execute INSERT in a read-only transaction/,
        );
        await refused(
          ro,
          'DO $$ BEGIN INSERT INTO t VALUES (6); END $$',
          /cannot execute INSERT in a read-only transaction/,
        );
        // Still one row: nothing of the above wrote.
        assert.equal((await ro.query('SELECT count(*)::int AS n FROM t')).rows[0].n, 1);
      });
    }

    await t.test('psql with the vendor CLI’s connection string: INSERT fails', async () => {
      const uri = `postgresql://tsdbadmin@127.0.0.1:${port}/tsdb?sslmode=require&options=-c%20tsdb_admin.read_only_connection%3Dtrue`;
      await assert.rejects(
        psql(uri, password, 'INSERT INTO t VALUES (7)'),
        /cannot execute INSERT in a read-only transaction/,
      );
      // psql's \lo_import writes through the fast-path protocol (lo_creat, lowrite).
      await assert.rejects(
        psql(uri, password, '\\lo_import /etc/hostname'),
        /lo_creat\(\) is not allowed in a read-only session/,
      );
    });

    await t.test('through the pooler, which cannot pass the option on, it is refused', async () => {
      const on = await b.call('POST', `${b.servicePath(id)}/enablePooler`);
      assert.equal(on.status, 200, on.text);
      const pooled = (await b.waitForStatus(id, 'READY')).connection_pooler?.endpoint;
      assert.ok(pooled, 'the pooler endpoint');
      for (const dbname of ['tsdb', 'tsdb_transaction']) {
        const through = conninfo(pooled.port, { dbname });
        await assert.rejects(
          psql(
            `${through} options='-c tsdb_admin.read_only_connection=true'`,
            password,
            'SELECT 1',
          ),
          // 1.18 refuses `options` whole; 1.24 refuses what it cannot pass on in it.
          /unsupported startup parameter: options|unsupported startup parameter in options: tsdb_admin\.read_only_connection/,
          dbname,
        );
        // Without the option, the pooler serves as ever.
        assert.equal(await psql(through, password, 'SELECT count(*) FROM t'), '1', dbname);
      }
    });

    await t.test('a role cannot mark itself read-only (it could never undo it)', async () => {
      await assert.rejects(
        admin('ALTER ROLE tsdbadmin SET tsdb_admin.read_only_role = true'),
        /a role cannot mark itself read-only/,
      );
    });

    await t.test(
      'an ordinary connection writes; the marker, once reset, no longer holds',
      async () => {
        await admin('INSERT INTO t VALUES (8)');
        assert.equal(await admin('SELECT count(*) FROM t'), '2');
        assert.equal(await admin('SELECT count(*) FROM pg_largeobject_metadata'), '0');
        await admin('ALTER ROLE analyst RESET tsdb_admin.read_only_role');
        const analyst = await session('analyst', 'analyst-pw', '');
        await analyst.query('INSERT INTO t VALUES (9)');
        assert.equal(await admin('SELECT count(*) FROM t'), '3');
      },
    );
  },
);
