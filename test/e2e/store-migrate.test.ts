// Moving an installation from SQLite to PostgreSQL, as an operator would:
// Basin as shipped on SQLite with a running service, a credential and a VPC,
// stopped; `basin store migrate --to postgres://…`; Basin started again with
// --store-url on the new store serves the same service (psql connects with
// the same password) and the same credential.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';
import { startStorePostgres } from '../store-postgres.js';

test(
  'basin store migrate: a stopped SQLite installation moves to an empty PostgreSQL store and is served from it',
  { timeout: 600_000 },
  async (t) => {
    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    const inst = await installation(t);
    let b = await inst.start();

    const created = await b.call('POST', b.servicePath(), { name: 'moving' });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    const port: number = (await b.waitForStatus(id, 'READY')).endpoint.port;
    await psql(conninfo(port), password, 'create table kept (v int); insert into kept values (7)');
    const vpc = await b.call('POST', `/projects/${b.projectId}/vpcs`, {
      name: 'v',
      cidr: '10.1.0.0/16',
      region_code: 'us-east-1',
    });
    assert.equal(vpc.status, 201, vpc.text);
    const issued = await inst.cli('--json', 'credential', 'create', '--project', b.projectId);
    assert.equal(issued.code, 0, issued.stderr);
    const key = (JSON.parse(issued.stdout) as { bearer_key: string }).bearer_key;

    // While Basin runs, the data directory is its own: the move is refused.
    const busy = await inst.cli('store', 'migrate', '--to', url);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, /in use by another Basin/);

    assert.equal((await b.stop()).code, 0);
    const moved = await inst.cli('--json', 'store', 'migrate', '--to', url);
    assert.equal(moved.code, 0, moved.stderr);
    const rows = JSON.parse(moved.stdout) as Record<string, number>;
    assert.equal(rows.services, 1);
    assert.equal(rows.vpcs, 1);
    assert.equal(rows.credentials, 2); // the bootstrap key and the CLI's
    // A store that is not empty is refused, and says so.
    const again = await inst.cli('store', 'migrate', '--to', url);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /is not empty .*copies only into an empty store/);

    b = await inst.start({ args: ['--store-url', url] });
    const svc = await b.waitForStatus(id, 'READY');
    assert.equal(svc.endpoint.port, port);
    assert.equal(await psql(conninfo(port), password, 'select v from kept'), '7');
    const vpcs = await b.call('GET', `/projects/${b.projectId}/vpcs`);
    assert.deepEqual(
      vpcs.body.map((v: { id: string }) => v.id),
      [vpc.body.id],
    );
    const withKey = await b.request('GET', b.servicePath(id), {
      authorization: `Bearer ${key}`,
    });
    assert.equal(withKey.status, 200, withKey.text);
    // A new service gets a new uid and port: counters and ports moved too.
    const next = await b.call('POST', b.servicePath(), { name: 'after' });
    assert.equal(next.status, 202, next.text);
    const nextPort: number = (await b.waitForStatus(next.body.service_id, 'READY')).endpoint.port;
    assert.notEqual(nextPort, port);
    assert.equal((await b.stop()).code, 0);
  },
);
