// The README's walkthrough, as written, against Basin as `npm start` runs it:
// `node dist/main.js` with the default (local) driver and nothing configured
// but its data directory, ports and bootstrap key. Every connection is the
// real `psql` with the command line the README shows (sslmode=verify-full
// against the installation's CA, channel_binding=require).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { processesOf } from '../local/helpers.js';
import { installation } from './basin-process.js';
import { conninfo, portOpen, psql, psqlRefused } from './clients.js';

test(
  'the README walkthrough: create, psql with verify-full, stop, start, resize, delete',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start();

    const projects = await b.call('GET', '/projects');
    assert.equal(projects.status, 200, projects.text);
    assert.deepEqual(projects.body, [{ id: b.projectId, name: 'default' }]);

    // The README's size. PostgreSQL maps shared_buffers (1 GB here, 2 GB after
    // the resize) but touches only what it uses, and Basin sizes a service as
    // if the host's memory were its own when it has less, so this starts on a
    // small CI machine too.
    const created = await b.call('POST', b.servicePath(), {
      name: 'metrics',
      cpu_millis: '1000',
      memory_gbs: '4',
    });
    assert.equal(created.status, 202, created.text);
    assert.equal(created.body.status, 'QUEUED');
    assert.equal(created.body.service_type, 'TIMESERIESDB');
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    assert.ok(password.length >= 16, 'the initial password is shown once, at creation');

    // QUEUED → CONFIGURING → READY, in that order (polling may miss a state, never reorder them).
    const order = ['QUEUED', 'CONFIGURING', 'READY'];
    const seen: string[] = [];
    const ready = await b.waitFor(async () => {
      const res = await b.call('GET', b.servicePath(id));
      assert.equal(res.status, 200, res.text);
      if (seen.at(-1) !== res.body.status) seen.push(res.body.status);
      return res.body.status === 'READY' ? res.body : undefined;
    }, 'READY');
    const ranks = seen.map((s) => order.indexOf(s));
    assert.ok(
      ranks.every((r, i) => r >= 0 && (i === 0 || r > (ranks[i - 1] as number))),
      `statuses seen: ${seen.join(' → ')}`,
    );
    assert.equal(ready.endpoint.host, 'localhost');
    assert.equal(ready.initial_password, undefined, 'the password is not shown again');

    // psql "host=localhost port=… user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=.basin/local/ca/ca.crt channel_binding=require"
    const conn = conninfo(ready.endpoint.port, {
      host: 'localhost',
      sslmode: 'verify-full',
      sslrootcert: join(inst.dataDir, 'local/ca/ca.crt'),
      channel_binding: 'require',
    });
    await psql(
      conn,
      password,
      `CREATE TABLE conditions (time timestamptz NOT NULL, device text, temperature double precision);
     INSERT INTO conditions VALUES (now(), 'a', 21.5), (now(), 'b', 19.0), (now(), 'c', 23.25);`,
    );
    const rows = `SELECT device || '=' || temperature FROM conditions ORDER BY device`;
    const written = 'a=21.5\nb=19\nc=23.25';
    assert.equal(await psql(conn, password, rows), written);
    assert.equal(
      await psql(conn, password, 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()'),
      't',
    );

    // Stop: READY → PAUSING → PAUSED, and psql is refused.
    const stop = await b.call('POST', `${b.servicePath(id)}/stop`);
    assert.equal(stop.status, 202, stop.text);
    assert.equal(stop.body.status, 'PAUSING');
    await b.waitForStatus(id, 'PAUSED');
    assert.match(await psqlRefused(conn, password), /Connection refused|could not connect/);

    // Start: PAUSED → RESUMING → READY, and the rows are back.
    const start = await b.call('POST', `${b.servicePath(id)}/start`);
    assert.equal(start.status, 202, start.text);
    assert.equal(start.body.status, 'RESUMING');
    await b.waitForStatus(id, 'READY');
    assert.equal(await psql(conn, password, rows), written);

    // Resize to the README's next size: new settings, same rows.
    const sharedBuffersMb = async () =>
      Number(
        await psql(
          conn,
          password,
          `SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'`,
        ),
      );
    const before = await sharedBuffersMb();
    const resize = await b.call('POST', `${b.servicePath(id)}/resize`, {
      cpu_millis: '2000',
      memory_gbs: '8',
    });
    assert.equal(resize.status, 202, resize.text);
    assert.equal(resize.body.status, 'CONFIGURING');
    const resized = await b.waitForStatus(id, 'READY');
    assert.deepEqual(
      resized.resources.map((r: any) => [r.spec.cpu_millis, r.spec.memory_gbs]),
      [[2000, 8]],
    );
    // Twice the memory, more buffers: a host with less than 4 GB of memory
    // would size both alike (CI and development machines have far more).
    assert.ok((await sharedBuffersMb()) > before, `shared_buffers grew from ${before} MB`);
    assert.equal(await psql(conn, password, rows), written);

    // Delete: 202, then 404; the port is closed and nothing of it runs.
    const pgdata = new Layout(inst.dataDir).pgdata({ id, node: 0 });
    assert.ok(processesOf(pgdata).length > 0);
    const del = await b.call('DELETE', b.servicePath(id));
    assert.equal(del.status, 202, del.text);
    await b.waitGone(id);
    const gone = await b.call('GET', b.servicePath(id));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.code, 'NOT_FOUND');
    assert.equal(await portOpen(ready.endpoint.port), false);
    assert.match(await psqlRefused(conn, password), /Connection refused|could not connect/);
    assert.deepEqual(processesOf(pgdata), []);
  },
);
