// HTTP-level errors: bad JSON, wrong media type, oversized bodies, unknown
// routes, hostile bodies and paths. Every error is `{code, message}` with a
// code from the catalogue, and no input produces a 500.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CATALOGUE } from '../../src/domain/errors.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';

interface Reply {
  status: number;
  body: any;
  contentType: string;
}

/** A request with a raw body text (or none) and the bootstrap credential. */
async function raw(
  b: TestBasin,
  method: string,
  url: string,
  payload?: string,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<Reply> {
  const res = await b.basin.app.inject({
    method: method as 'GET',
    url,
    headers: { ...b.auth, ...(payload === undefined ? {} : headers) },
    ...(payload === undefined ? {} : { payload }),
  });
  let body: unknown;
  if (res.body) {
    try {
      body = JSON.parse(res.body);
    } catch {
      assert.fail(`${method} ${url}: the answer is not JSON: ${res.body.slice(0, 200)}`);
    }
  }
  return { status: res.statusCode, body, contentType: String(res.headers['content-type'] ?? '') };
}

/** An error answer: the status, the catalogue code that goes with it, a useful message. */
function assertError(res: Reply, status: number | number[], code: string | null, what: string) {
  const statuses = Array.isArray(status) ? status : [status];
  assert.ok(
    statuses.includes(res.status),
    `${what}: status ${res.status}, wanted ${statuses.join(' or ')} (body ${JSON.stringify(res.body)})`,
  );
  assertErrorBody(res, what);
  if (code) assert.equal(res.body.code, code, `${what}: code`);
}

function assertErrorBody(res: Reply, what: string) {
  assert.match(res.contentType, /^application\/json/, `${what}: content type`);
  assert.ok(res.body && typeof res.body === 'object', `${what}: a JSON object body`);
  assert.deepEqual(Object.keys(res.body).sort(), ['code', 'message'], `${what}: body keys`);
  const entry = ERROR_CATALOGUE[res.body.code as keyof typeof ERROR_CATALOGUE];
  assert.ok(entry, `${what}: ${res.body.code} is in the catalogue`);
  assert.equal(entry.status, res.status, `${what}: ${res.body.code} goes with ${entry.status}`);
  assert.equal(typeof res.body.message, 'string', `${what}: message`);
  assert.ok(res.body.message.length > 10, `${what}: message is a sentence`);
}

async function readyService(b: TestBasin, name = 'db'): Promise<string> {
  const created = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name });
  assert.equal(created.status, 202);
  const id = created.body.service_id as string;
  await eventually(
    async () =>
      (await b.call('GET', `/v1/projects/${b.projectId}/services/${id}`)).body.status === 'READY',
    `service ${id} READY`,
  );
  return id;
}

test('malformed JSON is 400 INVALID_REQUEST', async (t) => {
  const b = await startBasin(t);
  const url = `/v1/projects/${b.projectId}/vpcs`;
  for (const payload of [
    '{"name": "x",',
    '{name: "x"}',
    "{'name': 'x'}",
    '{"a":1}}',
    'nul',
    '{"a":1,}',
  ]) {
    const res = await raw(b, 'POST', url, payload);
    assertError(res, 400, 'INVALID_REQUEST', `body ${payload}`);
    assert.match(res.body.message, /JSON/);
  }
  assert.deepEqual((await b.call('GET', url)).body, []);
});

test('a body that is not JSON is 415 UNSUPPORTED_MEDIA_TYPE', async (t) => {
  const b = await startBasin(t);
  const url = `/v1/projects/${b.projectId}/vpcs`;
  const json = '{"name":"n","cidr":"10.0.0.0/16","region_code":"us-east-1"}';
  for (const contentType of [
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/xml',
  ]) {
    const res = await raw(b, 'POST', url, json, { 'content-type': contentType });
    assertError(res, 415, 'UNSUPPORTED_MEDIA_TYPE', contentType);
    assert.match(res.body.message, /application\/json/, 'the message names the accepted type');
  }
  const none = await raw(b, 'POST', url, json, {});
  assertError(none, 415, 'UNSUPPORTED_MEDIA_TYPE', 'a body without a content type');
  assert.deepEqual((await b.call('GET', url)).body, [], 'nothing was created');

  // JSON with a charset parameter is JSON.
  const ok = await raw(b, 'POST', url, json, { 'content-type': 'application/json; charset=utf-8' });
  assert.equal(ok.status, 201);
});

test('a body over the configured limit is 413 PAYLOAD_TOO_LARGE', async (t) => {
  const b = await startBasin(t, { env: { BASIN_BODY_LIMIT: '2048' } });
  const url = `/v1/projects/${b.projectId}/vpcs`;
  const big = JSON.stringify({
    name: 'x'.repeat(10 * 1024),
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  const res = await raw(b, 'POST', url, big);
  assertError(res, 413, 'PAYLOAD_TOO_LARGE', '10 KB body');
  assert.match(res.body.message, /2048/, 'the message tells the limit');

  // Just under the limit the request is judged on its content.
  const under = JSON.stringify({
    name: 'x'.repeat(1900),
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  assert.ok(Buffer.byteLength(under) < 2048);
  const judged = await raw(b, 'POST', url, under);
  assertError(judged, 400, 'INVALID_REQUEST', 'a 1900-character name');
  assert.match(judged.body.message, /128/);
  assert.deepEqual((await b.call('GET', url)).body, []);
});

test('unknown routes and wrong methods are 404 or 405 with a JSON error body', async (t) => {
  const b = await startBasin(t);
  const p = `/v1/projects/${b.projectId}`;
  for (const [method, url] of [
    ['GET', '/'],
    ['GET', '/nothing'],
    ['GET', '/v1'],
    ['GET', '/v1/nothing'],
    ['GET', '/v2/projects'],
    ['GET', `${p}/unknown`],
    ['POST', `${p}/services/abc/explode`],
    ['GET', `${p}/vpcs/1/peerings/2/extra`],
  ] as const) {
    const res = await raw(b, method, url);
    assertError(res, 404, 'NOT_FOUND', `${method} ${url}`);
    assert.match(res.body.message, /openapi/, 'the message points at the API description');
  }
  for (const [method, url] of [
    ['PUT', '/v1/projects'],
    ['DELETE', '/v1/projects'],
    ['POST', '/v1/projects'],
    ['PATCH', `${p}/vpcs/1`],
    ['PUT', `${p}/services`],
    ['GET', `${p}/services/abc/stop`],
    ['DELETE', `${p}/vpcs/1/rename`],
  ] as const) {
    assertError(await raw(b, method, url), [404, 405], null, `${method} ${url}`);
  }
});

test('an empty JSON body is accepted where no body is needed', async (t) => {
  const b = await startBasin(t);
  const id = await readyService(b);
  const one = `/v1/projects/${b.projectId}/services/${id}`;

  const pooler = await raw(b, 'POST', `${one}/enablePooler`, '');
  assert.equal(pooler.status, 200, JSON.stringify(pooler.body));
  assert.equal(typeof pooler.body.message, 'string');
  // The pooler is applied (CONFIGURING) before the service stops.
  await eventually(
    async () => (await b.call('GET', one)).body.status === 'READY',
    'the pooler applied',
  );
  // White space counts as empty too.
  const stop = await raw(b, 'POST', `${one}/stop`, ' \n');
  assert.equal(stop.status, 202, JSON.stringify(stop.body));
  assert.equal(stop.body.service_id, id);
  assert.equal(stop.body.status, 'PAUSING');

  // A route that needs a body says what is missing.
  const rename = await raw(b, 'POST', `/v1/projects/${b.projectId}/vpcs/1/rename`, '');
  assertError(rename, 400, 'INVALID_REQUEST', 'empty body where one is needed');
});

test('JSON that is not an object where an object is expected is 400', async (t) => {
  const b = await startBasin(t);
  const url = `/v1/projects/${b.projectId}/vpcs`;
  for (const payload of ['[]', 'null', '"x"', '1', 'true', '[{"name":"x"}]']) {
    const res = await raw(b, 'POST', url, payload);
    assertError(res, 400, 'INVALID_REQUEST', `body ${payload}`);
    assert.match(res.body.message, /object/);
  }
  assert.deepEqual((await b.call('GET', url)).body, []);
});

test('prototype pollution attempts are refused with 400 and pollute nothing', async (t) => {
  const b = await startBasin(t);
  const url = `/v1/projects/${b.projectId}/vpcs`;
  const valid = '"name":"n","cidr":"10.0.0.0/16","region_code":"us-east-1"';
  for (const payload of [
    `{"__proto__":{"polluted":"yes"},${valid}}`,
    `{${valid},"__proto__":{"isAdmin":true}}`,
    `{"constructor":{"prototype":{"polluted":"yes"}},${valid}}`,
    `{"name":{"__proto__":{"polluted":"yes"}},"cidr":"10.0.0.0/16","region_code":"us-east-1"}`,
  ]) {
    const res = await raw(b, 'POST', url, payload);
    assertError(res, 400, 'INVALID_REQUEST', payload);
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(({} as Record<string, unknown>).isAdmin, undefined);
  assert.deepEqual((await b.call('GET', url)).body, []);
});

test('over-long and malformed path parameters are 400 or 404, never 500', async (t) => {
  const b = await startBasin(t);
  const p = `/v1/projects/${b.projectId}`;
  for (const length of [65, 101, 1000, 5000]) {
    const long = 'x'.repeat(length);
    for (const [method, url] of [
      ['GET', `${p}/vpcs/${long}`],
      ['DELETE', `${p}/vpcs/${long}`],
      ['GET', `/v1/projects/${long}/services`],
      ['GET', `${p}/services/${long}`],
      ['POST', `${p}/services/${long}/start`],
      ['GET', `${p}/vpcs/1/peerings/${long}`],
    ] as const) {
      assertError(await raw(b, method, url), [400, 404], null, `${method} ${length}-char param`);
    }
  }
  for (const segment of ['%', '%zz', '%E0%A4%A', '%00', '..%2F..%2Fetc', '%F0%9F%92%A9']) {
    const res = await raw(b, 'GET', `${p}/vpcs/${segment}`);
    assertError(res, [400, 404], null, `VPC id ${segment}`);
  }
});

// Each POST route with a body, a valid body for it, and the ids it needs.
function bodyRoutes(ids: { p: string; svc: string; rs: string; vpc: string }) {
  const { p, svc, rs, vpc } = ids;
  const s = `${p}/services/${svc}`;
  return [
    { url: `${p}/vpcs`, body: { name: 'n', cidr: '10.9.0.0/16', region_code: 'us-east-1' } },
    { url: `${p}/vpcs/${vpc}/rename`, body: { name: 'renamed' } },
    {
      url: `${p}/vpcs/${vpc}/peerings`,
      body: { peer_account_id: '1', peer_region_code: 'us-east-1', peer_vpc_id: 'vpc-1' },
    },
    {
      url: `${p}/services`,
      body: {
        name: 'fz',
        addons: ['time-series'],
        cpu_millis: '500',
        memory_gbs: '2',
        environment_tag: 'DEV',
        region_code: 'us-east-1',
        replica_count: 0,
      },
    },
    {
      url: `${s}/forkService`,
      body: {
        fork_strategy: 'PITR',
        target_time: new Date().toISOString(),
        cpu_millis: '500',
        memory_gbs: '2',
        name: 'fork',
        environment_tag: 'DEV',
      },
    },
    { url: `${s}/resize`, body: { cpu_millis: '1000', memory_gbs: '4' } },
    { url: `${s}/setHA`, body: { replica_count: 1, sync_replica_count: 0 } },
    { url: `${s}/attachToVPC`, body: { vpc_id: vpc } },
    { url: `${s}/detachFromVPC`, body: { vpc_id: vpc } },
    { url: `${s}/updatePassword`, body: { password: 'correct horse battery' } },
    { url: `${s}/setEnvironment`, body: { environment: 'PROD' } },
    {
      url: `${s}/replicaSets`,
      body: { cpu_millis: 500, memory_gbs: 2, name: 'rr', nodes: 1 },
    },
    { url: `${s}/replicaSets/${rs}/resize`, body: { cpu_millis: '1000', memory_gbs: '4' } },
    { url: `${s}/replicaSets/${rs}/setEnvironment`, body: { environment: 'PROD' } },
  ];
}

const deep = (depth: number, leaf = '1') => '{"a":'.repeat(depth) + leaf + '}'.repeat(depth);

/** Whole bodies no route should take (some are valid JSON, some are not objects). */
const HOSTILE_BODIES = [
  '{}',
  '[]',
  '"x"',
  '1',
  '0',
  '-1',
  'true',
  'false',
  'null',
  '1e308',
  '-1e308',
  '1e999',
  '"NaN"',
  '"Infinity"',
  '{"name": {}}',
  '{"name": []}',
  '{"name": null}',
  '{"name": 1e308}',
  '{"name": -1}',
  '{"name": "NaN"}',
  '{"name": "\\u0000"}',
  '{"name": "日本語 😀 \\u202e ñ"}',
  '{"😀": "😀"}',
  '{"": ""}',
  '{"name": "x", "name": 1}',
  deep(200),
  deep(2000),
  `{"name": ${deep(500)}}`,
  `[${'['.repeat(1000)}${']'.repeat(1000)}]`,
  JSON.stringify({ name: 'x'.repeat(20_000) }),
];

/** Values put in each field of a route's valid body in turn. */
const HOSTILE_VALUES = [
  '{}',
  '[]',
  '[[]]',
  '""',
  '" "',
  '"x"',
  '0',
  '1',
  '-1',
  '1.5',
  '-0',
  '1e308',
  '-1e308',
  '1e999',
  '-1e999',
  '9007199254740993',
  'true',
  'null',
  '"NaN"',
  '"-NaN"',
  '"Infinity"',
  '"-1"',
  '"0"',
  '"1e308"',
  '"0x1F4"',
  '"500m"',
  '" 500 "',
  '"shared"',
  '"PROD"',
  '"us-east-1"',
  '"10.0.0.0/16"',
  '"2000-01-01T00:00:00Z"',
  '"9999-12-31T23:59:59Z"',
  '"日本語 😀 \\u202e"',
  '"\\u0000"',
  '"\\ud800"',
  '"../../etc/passwd"',
  '"\'; DROP TABLE services; --"',
  JSON.stringify('x'.repeat(10_000)),
  deep(300),
];

function withField(body: Record<string, unknown>, field: string, rawValue: string): string {
  const parts = Object.entries(body).map(
    ([k, v]) => `${JSON.stringify(k)}:${k === field ? rawValue : JSON.stringify(v)}`,
  );
  return `{${parts.join(',')}}`;
}

test('hostile bodies on every POST route never produce a 500 and errors are {code, message}', async (t) => {
  const b = await startBasin(t);
  const p = `/v1/projects/${b.projectId}`;
  const svc = await readyService(b, 'target');
  const vpc = await b.call('POST', `${p}/vpcs`, {
    name: 'fuzz',
    cidr: '10.0.0.0/16',
    region_code: 'us-east-1',
  });
  assert.equal(vpc.status, 201);
  const rs = await b.call('POST', `${p}/services/${svc}/replicaSets`, {
    cpu_millis: 500,
    memory_gbs: 2,
    name: 'replica',
    nodes: 1,
  });
  assert.equal(rs.status, 202, JSON.stringify(rs.body));
  await eventually(async () => {
    const list = await b.call('GET', `${p}/services/${svc}/replicaSets`);
    return list.body.every((r: { status: string }) => r.status === 'active');
  }, 'replica set active');

  const routes = bodyRoutes({ p, svc, rs: rs.body.id, vpc: vpc.body.id });
  const seen = new Map<number, number>();
  for (const route of routes) {
    const attempts: Array<[string, string]> = HOSTILE_BODIES.map((body) => [
      `body ${body.slice(0, 40)}`,
      body,
    ]);
    for (const field of Object.keys(route.body)) {
      for (const value of HOSTILE_VALUES) {
        attempts.push([`${field}=${value.slice(0, 40)}`, withField(route.body, field, value)]);
      }
    }
    for (const [what, payload] of attempts) {
      const res = await raw(b, 'POST', route.url, payload);
      const label = `POST ${route.url.replace(p, '')} with ${what}`;
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
      assert.ok(res.status < 500, `${label}: ${res.status} ${JSON.stringify(res.body)}`);
      if (res.status >= 400) assertErrorBody(res, label);
    }
  }
  // The fuzz mostly hit errors, so it checked error bodies, not only successes.
  assert.ok((seen.get(400) ?? 0) > 500, `status counts ${JSON.stringify([...seen])}`);

  // Whatever was accepted left every resource readable.
  const vpcs = await b.call('GET', `${p}/vpcs`);
  assert.equal(vpcs.status, 200);
  for (const v of vpcs.body as Array<{ id: string }>) {
    assert.equal((await b.call('GET', `${p}/vpcs/${v.id}`)).status, 200);
    const peerings = await b.call('GET', `${p}/vpcs/${v.id}/peerings`);
    assert.equal(peerings.status, 200);
    for (const x of peerings.body as Array<{ id: string }>) {
      assert.equal((await b.call('GET', `${p}/vpcs/${v.id}/peerings/${x.id}`)).status, 200);
    }
  }
  const services = await b.call('GET', `${p}/services`);
  assert.equal(services.status, 200, JSON.stringify(services.body));
  for (const s of services.body as Array<{ service_id: string }>) {
    const one = await b.call('GET', `${p}/services/${s.service_id}`);
    assert.equal(one.status, 200, JSON.stringify(one.body));
    const replicas = await b.call('GET', `${p}/services/${s.service_id}/replicaSets`);
    assert.equal(replicas.status, 200);
    for (const r of replicas.body as Array<{ id: string }>) {
      // A replica set reads as a service too.
      assert.equal((await b.call('GET', `${p}/services/${r.id}`)).status, 200);
    }
  }
});
