import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import { eventually, startBasin } from '../helpers.js';
import {
  assertError,
  createService,
  getService,
  RFC3339,
  readyService,
  serviceUrl,
  servicesUrl,
  waitForStatus,
  waitGone,
} from './service-helpers.js';

const READY_KEYS = [
  'created',
  'endpoint',
  'ha_replicas',
  'metadata',
  'metrics',
  'name',
  'project_id',
  'read_replica_sets',
  'region_code',
  'resources',
  'service_id',
  'service_type',
  'status',
];

test('create answers 202 QUEUED with initial_password and defaults, then READY with the spec fields', async (t) => {
  const b = await startBasin(t);
  const before = Date.now();
  const res = await b.call('POST', servicesUrl(b), { name: 'orders' });
  assert.equal(res.status, 202);
  const c = res.body;
  assert.equal(c.status, 'QUEUED');
  assert.match(c.service_id, /^[a-z0-9]{10}$/);
  assert.equal(c.project_id, b.projectId);
  assert.equal(c.name, 'orders');
  assert.equal(c.region_code, 'us-east-1');
  assert.equal(c.service_type, 'TIMESERIESDB');
  assert.match(c.created, RFC3339);
  const created = Date.parse(c.created);
  assert.ok(created >= before - 1000 && created <= Date.now() + 1000, c.created);
  assert.equal(c.endpoint.host, 'localhost');
  assert.ok(Number.isInteger(c.endpoint.port) && c.endpoint.port > 0);
  assert.deepEqual(c.ha_replicas, { replica_count: 0, sync_replica_count: 0 });
  assert.deepEqual(c.metadata, { environment: 'DEV' });
  assert.equal(typeof c.initial_password, 'string');
  assert.ok(c.initial_password.length >= 16, 'a strong generated password');
  // The default size: the smallest dedicated size of the catalogue.
  assert.deepEqual(c.resources, [
    { id: c.service_id, spec: { cpu_millis: 500, memory_gbs: 2, volume_type: 'sim' } },
  ]);
  assert.deepEqual(c.read_replica_sets, []);
  for (const absent of ['connection_pooler', 'vpcEndpoint', 'forked_from']) {
    assert.equal(c[absent], undefined, absent);
  }

  const ready = await waitForStatus(b, c.service_id, 'READY');
  assert.deepEqual(Object.keys(ready).sort(), READY_KEYS);
  for (const key of READY_KEYS.filter((k) => k !== 'status' && k !== 'metrics')) {
    assert.deepEqual(ready[key], c[key], key);
  }
  assert.deepEqual(Object.keys(ready.metrics).sort(), ['memory_mb', 'milli_cpu', 'storage_mb']);
  for (const v of Object.values(ready.metrics)) assert.equal(typeof v, 'number');

  // initial_password is shown once: never in a GET or a list.
  const list = await b.call('GET', servicesUrl(b));
  assert.equal(list.status, 200);
  assert.equal(list.body.length, 1);
  assert.equal(list.body[0].service_id, c.service_id);
  assert.equal(list.body[0].initial_password, undefined);
  assert.equal(list.body[0].status, 'READY');
  assert.ok(!JSON.stringify(list.body).includes(c.initial_password));
  assert.ok(!JSON.stringify(ready).includes(c.initial_password));
});

test('two services get their own ids, ports and passwords, and both are listed', async (t) => {
  const b = await startBasin(t);
  const one = await createService(b, { name: 'one' });
  const two = await createService(b, { name: 'two' });
  assert.notEqual(one.service_id, two.service_id);
  assert.notEqual(one.endpoint.port, two.endpoint.port);
  assert.notEqual(one.initial_password, two.initial_password);
  await waitForStatus(b, one.service_id, 'READY');
  await waitForStatus(b, two.service_id, 'READY');
  const list = await b.call('GET', servicesUrl(b));
  assert.equal(list.status, 200);
  assert.deepEqual(
    list.body.map((s: any) => s.service_id).sort(),
    [one.service_id, two.service_id].sort(),
  );
  for (const s of list.body) {
    assert.equal(s.initial_password, undefined);
    assert.equal(s.status, 'READY');
  }
});

test('addons choose the service type', async (t) => {
  const b = await startBasin(t);
  const table: [unknown, string][] = [
    [undefined, 'TIMESERIESDB'],
    [[], 'POSTGRES'],
    [['ai'], 'VECTOR'],
    [['time-series'], 'TIMESERIESDB'],
    [['time-series', 'ai'], 'TIMESERIESDB'],
  ];
  for (const [addons, type] of table) {
    const c = await createService(
      b,
      addons === undefined ? { name: 'db' } : { name: 'db', addons },
    );
    assert.equal(c.service_type, type, JSON.stringify(addons));
    assert.equal((await waitForStatus(b, c.service_id, 'READY')).service_type, type);
  }
});

test('explicit sizes, environment, region and HA replicas are honoured', async (t) => {
  const b = await startBasin(t);
  const spec = (s: any) => ({
    cpu: s.resources[0].spec.cpu_millis,
    mem: s.resources[0].spec.memory_gbs,
  });
  // A shared service has no dedicated allocation: both are absent.
  const cases: [Record<string, unknown>, { cpu?: number; mem?: number }][] = [
    [
      { cpu_millis: '1000', memory_gbs: '4' },
      { cpu: 1000, mem: 4 },
    ],
    // Only one of the two picks the matching pair.
    [{ cpu_millis: '2000' }, { cpu: 2000, mem: 8 }],
    [{ memory_gbs: '16' }, { cpu: 4000, mem: 16 }],
    [
      { cpu_millis: 'shared', memory_gbs: 'shared' },
      { cpu: undefined, mem: undefined },
    ],
    [{ cpu_millis: 'shared' }, { cpu: undefined, mem: undefined }],
  ];
  for (const [size, expected] of cases) {
    const c = await createService(b, { name: 'sized', ...size });
    assert.deepEqual(spec(c), expected, JSON.stringify(size));
    assert.deepEqual(spec(await waitForStatus(b, c.service_id, 'READY')), expected);
  }

  const c = await createService(b, {
    name: 'prod db',
    environment_tag: 'PROD',
    region_code: 'eu-west-1',
    replica_count: 2,
  });
  assert.deepEqual(c.metadata, { environment: 'PROD' });
  assert.equal(c.region_code, 'eu-west-1');
  assert.deepEqual(c.ha_replicas, { replica_count: 2, sync_replica_count: 0 });
  const ready = await waitForStatus(b, c.service_id, 'READY');
  assert.deepEqual(ready.metadata, { environment: 'PROD' });
  assert.equal(ready.region_code, 'eu-west-1');
  assert.deepEqual(ready.ha_replicas, { replica_count: 2, sync_replica_count: 0 });
  // A name of exactly 128 characters is fine.
  assert.equal((await createService(b, { name: 'n'.repeat(128) })).name, 'n'.repeat(128));
});

test('bad create bodies are 400 INVALID_REQUEST and create nothing', async (t) => {
  const b = await startBasin(t);
  const bad: [unknown, RegExp?][] = [
    [{}, /name/],
    [{ name: 'x'.repeat(129) }, /name must be at most 128 characters/],
    [{ name: '' }, /name must not be empty/],
    [{ name: '   ' }, /name must not be empty/],
    [{ name: 'a\nb' }, /control characters/],
    [{ name: 5 }, /name/],
    [{ name: null }, /name/],
    [{ name: 'db', cpu_millis: 1000 }, /cpu_millis/],
    [{ name: 'db', memory_gbs: 4 }, /memory_gbs/],
    [{ name: 'db', cpu_millis: 1000, memory_gbs: 4 }, /cpu_millis/],
    [{ name: 'db', cpu_millis: '3000' }, /No size offers 3000m CPU/],
    [{ name: 'db', memory_gbs: '5' }, /No size offers 5 GB memory/],
    [
      { name: 'db', cpu_millis: '1000', memory_gbs: '8' },
      /No size offers 1000m CPU with 8 GB memory/,
    ],
    [{ name: 'db', cpu_millis: 'lots' }, /cpu_millis must be a positive number/],
    [{ name: 'db', cpu_millis: '-500' }, /cpu_millis/],
    [{ name: 'db', cpu_millis: 'shared', memory_gbs: '4' }, /both be "shared"/],
    [{ name: 'db', cpu_millis: '1000', memory_gbs: 'shared' }, /both be "shared"/],
    [{ name: 'db', addons: ['graph'] }, /addons/],
    [{ name: 'db', addons: ['ai', 'ai'] }, /addons/],
    [{ name: 'db', addons: 'ai' }, /addons/],
    [{ name: 'db', addons: [1] }, /addons/],
    [{ name: 'db', environment_tag: 'STAGING' }, /environment_tag/],
    [{ name: 'db', environment_tag: 'prod' }, /environment_tag/],
    [{ name: 'db', region_code: 'mars-1' }, /Unknown region_code "mars-1".*us-east-1/],
    [{ name: 'db', region_code: '' }, /region_code/],
    [{ name: 'db', region_code: 7 }, /region_code/],
    [{ name: 'db', replica_count: -1 }, /replica_count/],
    [{ name: 'db', replica_count: 6 }, /replica_count must be a whole number from 0 to 5/],
    [{ name: 'db', replica_count: 1.5 }, /replica_count/],
    [{ name: 'db', replica_count: '1' }, /replica_count/],
    [{ name: 'db', colour: 'blue' }, /colour|additional/],
    [{ name: 'db', initial_password: 'mine-is-better' }, /initial_password|additional/],
    [[], undefined],
    ['db', undefined],
    [null, undefined],
  ];
  for (const [body, message] of bad) {
    const res = await b.call('POST', servicesUrl(b), body);
    assert.equal(
      res.status,
      400,
      `${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body)}`,
    );
    assertError(res, 400, 'INVALID_REQUEST', message);
  }
  // No body at all.
  assertError(await b.call('POST', servicesUrl(b)), 400, 'INVALID_REQUEST');
  await b.basin.engine.idle();
  assert.deepEqual((await b.call('GET', servicesUrl(b))).body, []);
  assert.deepEqual(await b.basin.store.operations.listPending(), []);
});

test('get and list: unknown services and projects are 404', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const other = `/v1/projects/zzzzzzzzzz/services`;
  assertError(await b.call('GET', serviceUrl(b, 'nosuchsvc1')), 404, 'NOT_FOUND', /nosuchsvc1/);
  assertError(await b.call('GET', other), 404, 'NOT_FOUND');
  assertError(await b.call('GET', `${other}/${id}`), 404, 'NOT_FOUND');
  assertError(await b.call('POST', other, { name: 'db' }), 404, 'NOT_FOUND');
  for (const path of ['stop', 'start']) {
    assertError(await b.call('POST', `${serviceUrl(b, 'nosuchsvc1')}/${path}`), 404, 'NOT_FOUND');
    assertError(await b.call('POST', `${other}/${id}/${path}`), 404, 'NOT_FOUND');
  }
  assertError(await b.call('DELETE', serviceUrl(b, 'nosuchsvc1')), 404, 'NOT_FOUND');
  assertError(await b.call('DELETE', `${other}/${id}`), 404, 'NOT_FOUND');
  // The service is untouched.
  assert.equal((await getService(b, id)).status, 'READY');
});

test('delete answers 202 with no body; the service is then gone from GET and list', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const keep = await readyService(b, { name: 'keep' });
  const res = await b.call('DELETE', serviceUrl(b, id));
  assert.equal(res.status, 202);
  assert.equal(res.body, undefined);
  await waitGone(b, id);
  assertError(await b.call('GET', serviceUrl(b, id)), 404, 'NOT_FOUND');
  const list = await b.call('GET', servicesUrl(b));
  assert.deepEqual(
    list.body.map((s: any) => s.service_id),
    [keep.id],
  );
  // Gone for every other request too.
  assertError(await b.call('DELETE', serviceUrl(b, id)), 404, 'NOT_FOUND');
  assertError(await b.call('POST', `${serviceUrl(b, id)}/start`), 404, 'NOT_FOUND');
  assert.equal(await b.basin.store.services.get(id), undefined);
});

test('stop READY → PAUSING → PAUSED; start PAUSED → RESUMING → READY; wrong states are 409', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);

  assertError(
    await b.call('POST', `${serviceUrl(b, id)}/start`),
    409,
    'CONFLICT',
    /while it is READY/,
  );

  const stop = await b.call('POST', `${serviceUrl(b, id)}/stop`);
  assert.equal(stop.status, 202);
  assert.equal(stop.body.status, 'PAUSING');
  assert.equal(stop.body.service_id, id);
  assert.equal(stop.body.initial_password, undefined);
  await waitForStatus(b, id, 'PAUSED');
  assertError(
    await b.call('POST', `${serviceUrl(b, id)}/stop`),
    409,
    'CONFLICT',
    /while it is PAUSED/,
  );

  const start = await b.call('POST', `${serviceUrl(b, id)}/start`);
  assert.equal(start.status, 202);
  assert.equal(start.body.status, 'RESUMING');
  assert.equal(start.body.initial_password, undefined);
  await waitForStatus(b, id, 'READY');
  assertError(await b.call('POST', `${serviceUrl(b, id)}/start`), 409, 'CONFLICT');

  // start and stop take no body; an empty JSON body is fine too.
  const again = await b.call('POST', `${serviceUrl(b, id)}/stop`, {});
  assert.equal(again.status, 202, JSON.stringify(again.body));
  await waitForStatus(b, id, 'PAUSED');
  // A paused service can still be deleted.
  assert.equal((await b.call('DELETE', serviceUrl(b, id))).status, 202);
  await waitGone(b, id);
});

test('transitional states refuse what they cannot do; DELETING refuses everything', async (t) => {
  const b = await startBasin(t, { env: { BASIN_SIM_DELAY_MS: '800' } });
  const vpc = await b.call('POST', `/v1/projects/${b.projectId}/vpcs`, {
    name: 'net',
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(vpc.status, 201);

  const c = await createService(b);
  const id = c.service_id;
  const url = serviceUrl(b, id);
  await waitForStatus(b, id, 'CONFIGURING');
  assertError(await b.call('POST', `${url}/stop`), 409, 'CONFLICT', /while it is CONFIGURING/);
  assertError(
    await b.call('POST', `${url}/resize`, { cpu_millis: '1000', memory_gbs: '4' }),
    409,
    'CONFLICT',
  );
  await waitForStatus(b, id, 'READY');

  assert.equal((await b.call('POST', `${url}/stop`)).status, 202);
  assert.equal((await getService(b, id)).status, 'PAUSING');
  assertError(await b.call('POST', `${url}/stop`), 409, 'CONFLICT', /while it is PAUSING/);
  assertError(await b.call('POST', `${url}/start`), 409, 'CONFLICT', /while it is PAUSING/);
  await waitForStatus(b, id, 'PAUSED');
  assert.equal((await b.call('POST', `${url}/start`)).status, 202);
  assert.equal((await getService(b, id)).status, 'RESUMING');
  assertError(await b.call('POST', `${url}/start`), 409, 'CONFLICT', /while it is RESUMING/);
  await waitForStatus(b, id, 'READY');

  const del = await b.call('DELETE', url);
  assert.equal(del.status, 202);
  assert.equal(del.body, undefined);
  assert.equal((await getService(b, id)).status, 'DELETING');
  const listed = (await b.call('GET', servicesUrl(b))).body;
  assert.deepEqual(
    listed.map((s: any) => [s.service_id, s.status]),
    [[id, 'DELETING']],
  );

  const refused: [string, string, unknown?][] = [
    ['DELETE', url],
    ['POST', `${url}/start`],
    ['POST', `${url}/stop`],
    ['POST', `${url}/resize`, { cpu_millis: '1000', memory_gbs: '4' }],
    ['POST', `${url}/setHA`, { replica_count: 1 }],
    ['POST', `${url}/forkService`, { fork_strategy: 'NOW' }],
    ['POST', `${url}/attachToVPC`, { vpc_id: vpc.body.id }],
    ['POST', `${url}/enablePooler`],
    ['POST', `${url}/updatePassword`, { password: 'a-new-password' }],
    ['POST', `${url}/setEnvironment`, { environment: 'PROD' }],
    ['POST', `${url}/rename`, { name: 'late' }],
    ['POST', `${url}/replicaSets`, { name: 'r', nodes: 1, cpu_millis: 1000, memory_gbs: 4 }],
  ];
  for (const [method, path, body] of refused) {
    const res = await b.call(method, path, body);
    assert.equal(res.status, 409, `${method} ${path} → ${res.status} ${JSON.stringify(res.body)}`);
    assertError(res, 409, 'CONFLICT', /DELETING|deleted/);
  }
  assert.equal((await getService(b, id)).status, 'DELETING');
  await waitGone(b, id);
  assert.deepEqual((await b.call('GET', servicesUrl(b))).body, []);
});

test('drift: a READY service whose database dies goes UNSTABLE and is repaired to READY', async (t) => {
  const b = await startBasin(t, {
    env: { BASIN_SIM_DELAY_MS: '300', BASIN_RECONCILE_INTERVAL_MS: '100' },
  });
  const { id } = await readyService(b);
  const healthy = await readyService(b, { name: 'healthy' });
  assert.equal((b.basin.driver as SimDriver).crash(id), true);

  const unstable = await waitForStatus(b, id, 'UNSTABLE');
  assert.equal(unstable.service_id, id);
  await waitForStatus(b, id, 'READY');
  // The other service was never disturbed.
  assert.equal((await getService(b, healthy.id)).status, 'READY');
  // And the repaired one stays READY.
  await b.basin.engine.idle();
  await new Promise((r) => setTimeout(r, 250));
  assert.equal((await getService(b, id)).status, 'READY');
  assert.equal((await getService(b, healthy.id)).status, 'READY');
});

test('a service stopped on purpose is not "repaired" by the reconciler', async (t) => {
  const b = await startBasin(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '100' } });
  const { id } = await readyService(b);
  assert.equal((await b.call('POST', `${serviceUrl(b, id)}/stop`)).status, 202);
  await waitForStatus(b, id, 'PAUSED');
  await new Promise((r) => setTimeout(r, 300));
  await eventually(async () => (await getService(b, id)).status === 'PAUSED', 'still PAUSED');
});
