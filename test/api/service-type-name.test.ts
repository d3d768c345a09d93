// --service-type-name: which name answers give the time-series type. The
// store keeps the spec's name; only answers (and the served document) change.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../harness/root.js';
import { startBasin, type TestBasin } from '../helpers.js';
import { readyService, serviceUrl, servicesUrl, waitForStatus } from './service-helpers.js';

const vendorName = (t: Parameters<typeof startBasin>[0]) =>
  startBasin(t, { env: { BASIN_SERVICE_TYPE_NAME: 'TIMESCALEDB' } });

/** GET over a real socket, where polls are answered by the fast lane (polling-fast-lane.ts). */
async function getOverSocket(b: TestBasin, url: string): Promise<any> {
  const address = await b.basin.app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const res = await fetch(`${address}${url}`, { headers: b.auth });
    assert.equal(res.status, 200);
    return await res.json();
  } finally {
    await b.basin.app.server.close();
  }
}

test('TIMESCALEDB: services, lists, forks and replica sets seen as services carry the vendor name', async (t) => {
  const b = await vendorName(t);
  const created = await b.call('POST', servicesUrl(b), { name: 'ts' });
  assert.equal(created.status, 202);
  assert.equal(created.body.service_type, 'TIMESCALEDB');
  const { id, ready } = await readyService(b, { name: 'ts2' });
  assert.equal(ready.service_type, 'TIMESCALEDB');
  const pg = await readyService(b, { name: 'pg', addons: [] });
  assert.equal(pg.ready.service_type, 'POSTGRES');
  const vec = await readyService(b, { name: 'vec', addons: ['ai'] });
  assert.equal(vec.ready.service_type, 'VECTOR');

  const list = await b.call('GET', servicesUrl(b));
  assert.deepEqual(
    new Set(list.body.map((s: any) => s.service_type)),
    new Set(['TIMESCALEDB', 'POSTGRES', 'VECTOR']),
  );

  const fork = await b.call('POST', `${serviceUrl(b, id)}/forkService`, { fork_strategy: 'NOW' });
  assert.equal(fork.status, 202, JSON.stringify(fork.body));
  assert.equal(fork.body.service_type, 'TIMESCALEDB');
  assert.equal((await waitForStatus(b, fork.body.service_id, 'READY')).service_type, 'TIMESCALEDB');

  const rs = await b.call('POST', `${serviceUrl(b, id)}/replicaSets`, {
    name: 'r',
    nodes: 1,
    cpu_millis: 1000,
    memory_gbs: 4,
  });
  assert.equal(rs.status, 202, JSON.stringify(rs.body));
  const asService = await b.call('GET', serviceUrl(b, rs.body.id));
  assert.equal(asService.status, 200);
  assert.equal(asService.body.service_type, 'TIMESCALEDB');

  // The fast lane answers polls with the same presenter and serializer.
  assert.equal((await getOverSocket(b, serviceUrl(b, id))).service_type, 'TIMESCALEDB');

  // The store keeps the spec's name: the setting changes answers only.
  assert.equal((await b.basin.store.services.get(id))?.type, 'TIMESERIESDB');
});

test('the default answers the spec name, and serves openapi.json byte for byte', async (t) => {
  const b = await startBasin(t);
  const { ready } = await readyService(b);
  assert.equal(ready.service_type, 'TIMESERIESDB');
  const served = await b.basin.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  assert.equal(served.statusCode, 200);
  assert.equal(
    `${JSON.stringify(JSON.parse(served.body), null, 2)}\n`,
    readFileSync(join(ROOT, 'openapi.json'), 'utf8'),
  );
});

test('TIMESCALEDB: the served document names the vendor enum, marked as an extension', async (t) => {
  const b = await vendorName(t);
  const served = await b.basin.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  const type = JSON.parse(served.body).components.schemas.Service.properties.service_type;
  assert.deepEqual(
    type.anyOf.map((a: { enum: string[] }) => a.enum[0]),
    ['TIMESCALEDB', 'POSTGRES', 'VECTOR'],
  );
  assert.equal(type['x-basin-extension'], true);
  assert.match(type.description, /TIMESERIESDB/);
});
