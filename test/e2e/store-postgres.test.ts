// Basin as shipped (`node dist/main.js`, local driver) with its store in
// PostgreSQL (--store-url, on a PostgreSQL this test starts): a service's
// whole life through the API, psql over TLS, and a restart of Basin on the
// same store that adopts the running service rather than making it anew.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';
import { startStorePostgres } from '../store-postgres.js';

test(
  'Basin on a PostgreSQL store: create, psql over TLS, stop, start, a restart that adopts, delete',
  { timeout: 600_000 },
  async (t) => {
    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    const inst = await installation(t, { args: ['--store-url', url] });
    let b = await inst.start();

    const created = await b.call('POST', b.servicePath(), { name: 'on-pg' });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    const svc = await b.waitForStatus(id, 'READY');
    const port: number = svc.endpoint.port;
    const ssl = 'select ssl from pg_stat_ssl where pid = pg_backend_pid()';
    assert.equal(await psql(conninfo(port), password, ssl), 't');
    // The service is in PostgreSQL, not in a SQLite file.
    const stored = await pgc.sql('SELECT id FROM services', [], 'basin');
    assert.deepEqual(stored.rows, [{ id }]);

    assert.equal((await b.call('POST', `${b.servicePath(id)}/stop`)).status, 202);
    await b.waitForStatus(id, 'PAUSED');
    assert.equal((await b.call('POST', `${b.servicePath(id)}/start`)).status, 202);
    await b.waitForStatus(id, 'READY');
    await psql(conninfo(port), password, 'create table kept (v int); insert into kept values (7)');
    const postmaster = await psql(conninfo(port), password, 'select pg_postmaster_start_time()');

    // A new Basin on the same store adopts the running service.
    assert.equal((await b.stop()).code, 0);
    b = await inst.start();
    const again = await b.waitForStatus(id, 'READY');
    assert.equal(again.endpoint.port, port);
    assert.equal(await psql(conninfo(port), password, 'select v from kept'), '7');
    assert.equal(
      await psql(conninfo(port), password, 'select pg_postmaster_start_time()'),
      postmaster,
    );

    assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
    await b.waitGone(id);
    const left = await pgc.sql('SELECT count(*)::int AS n FROM services', [], 'basin');
    assert.deepEqual(left.rows, [{ n: 0 }]);
    assert.equal((await b.stop()).code, 0);
  },
);
