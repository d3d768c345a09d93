// --service-hostnames: endpoints report each service's own name under the
// public host (its certificate names it: drivers/local/node/tls.ts), for
// installations with wildcard DNS; off, they report the public host.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, startBasin } from '../helpers.js';
import { getService, readyService, serviceUrl, waitForStatus } from './service-helpers.js';

test("with --service-hostnames, every endpoint is <id>.<public host>: the service's, its pooler's, its sets'", async (t) => {
  const b = await startBasin(t, {
    env: { BASIN_PUBLIC_HOST: 'db.example.test', BASIN_SERVICE_HOSTNAMES: 'on' },
  });
  const svc = await readyService(b, { name: 'named', addons: [] });
  assert.equal(svc.created.endpoint.host, `${svc.id}.db.example.test`);
  assert.equal(svc.ready.endpoint.host, `${svc.id}.db.example.test`);
  assert.equal((await b.call('POST', `${serviceUrl(b, svc.id)}/enablePooler`)).status, 200);
  await waitForStatus(b, svc.id, 'READY');
  const rs = await b.call('POST', `${serviceUrl(b, svc.id)}/replicaSets`, {
    name: 'readers',
    nodes: 1,
    cpu_millis: 1000,
    memory_gbs: 4,
  });
  assert.equal(rs.status, 202, JSON.stringify(rs.body));
  assert.equal(rs.body.endpoint.host, `${rs.body.id}.db.example.test`);
  const shown = await eventually(async () => {
    const s = await getService(b, svc.id);
    return s.connection_pooler && s.read_replica_sets.length === 1 ? s : undefined;
  }, 'the pooler and the set shown');
  assert.equal(shown.connection_pooler.endpoint.host, `${svc.id}.db.example.test`);
  assert.equal(shown.read_replica_sets[0].endpoint.host, `${rs.body.id}.db.example.test`);
  const asService = await getService(b, rs.body.id);
  assert.equal(asService.endpoint.host, `${rs.body.id}.db.example.test`);
});

test('without it, every endpoint is the public host', async (t) => {
  const b = await startBasin(t, { env: { BASIN_PUBLIC_HOST: 'db.example.test' } });
  const svc = await readyService(b, { name: 'plain', addons: [] });
  assert.equal(svc.ready.endpoint.host, 'db.example.test');
});
