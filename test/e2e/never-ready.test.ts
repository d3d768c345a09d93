// Issue 19, item 5 (bounded waits), tried against Basin as shipped (`node
// dist/main.js`, local driver): a tenant, as its service's tsdbadmin
// (COPY … TO PROGRAM runs as the service's OS user, in the data
// directory), leaves its server a standby.signal and `hot_standby = off` in
// postgresql.auto.conf, and its user then stops and starts the service.
// The postmaster starts, and runs, in recovery that never ends, refusing
// every connection: it never becomes ready. Before, the start waited for it
// forever, polling every few milliseconds. Now the wait is bounded by
// --operation-max-wait-ms (shortened here to 5 s, for the start only: the
// create before it runs under the default, so that a loaded machine's slow
// first start is not taken for the fault): the operation ends
// failed, the service is UNSTABLE, and its logs say why, as a Basin entry
// the user reads with source=basin. What is asserted is what Basin wrote and
// reported, never how long anything took.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import { bootstrapTenant, TenantApi, tenantShell } from './tenants.js';

test(
  'a postmaster that runs but never accepts connections ends the start failed, UNSTABLE, with the reason in its logs',
  { timeout: 600_000 },
  async (t) => {
    const inst = await installation(t);
    const first = await inst.start();
    let api = new TenantApi(first, bootstrapTenant(first));
    const svc = await api.create('never-ready');
    const id = svc.service_id;
    await api.waitForStatus(id, 'READY');

    // The fault, with a customer's means only: files its own server may write.
    const shell = await tenantShell(svc, svc.initial_password);
    await shell.feed(`touch standby.signal && echo "hot_standby = off" >> postgresql.auto.conf`);
    await shell.end();

    let res = await api.call('POST', `${api.path(id)}/stop`);
    assert.equal(res.status, 202, res.text);
    await api.waitForStatus(id, 'PAUSED');
    assert.deepEqual(await first.stop(), { code: 0, signal: null });
    const b = await inst.start({ args: ['--operation-max-wait-ms', '5000'] });
    api = new TenantApi(b, bootstrapTenant(b));
    res = await api.call('POST', `${api.path(id)}/start`);
    assert.equal(res.status, 202, res.text);

    // The start gives up after the bound, and says so in the service's logs.
    const entry = await b.waitFor(
      async () => {
        const logs = await api.call('GET', `${api.path(id)}/logs?source=basin`);
        assert.equal(logs.status, 200, logs.text);
        const entries = logs.body.entries as { message: string; severity: string }[];
        return entries.find((e) => /failed: still waiting/.test(e.message));
      },
      'the start to give up',
      300_000,
    );
    assert.equal(entry.severity, 'ERROR');
    assert.match(
      entry.message,
      /^basin: starting failed: still waiting for PostgreSQL to accept connections after \d+ s \(\d+ checks\); Basin waits at most 5 s$/,
    );
    const got = await api.call('GET', api.path(id));
    assert.equal(got.status, 200, got.text);
    assert.equal(got.body.status, 'UNSTABLE');
    // The server indeed refuses its clients: the fault is real, not Basin's.
    await assert.rejects(pgQuery(svc.endpoint.port, svc.initial_password, 'SELECT 1'));

    await api.deleteAndWait(id, 300_000);
  },
);
