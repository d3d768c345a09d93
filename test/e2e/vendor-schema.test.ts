// The vendor's newest OpenAPI document (test/fixtures/vendor-openapi.yaml,
// the one its official CLI and MCP tools are built from) against Basin as
// shipped (`node dist/main.js`, sim driver: shapes need no PostgreSQL). With
// `--service-type-name TIMESCALEDB`, every operation of that document that
// Basin serves is called (successes and errors), and every answer validates
// against the vendor's schema for that operation and status. At the default
// setting, the same walk validates against Basin's own openapi.json, the
// spec's. Every operation of the vendor's document is served (its CLI's
// telemetry as well, accepted and kept nowhere).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { join } from 'node:path';
import type { BasinProcess, HttpResult, RequestOptions } from '../harness/basin-api.js';
import { installation, type Installation } from './basin-process.js';
import { type Answer, loadDocument, openApiValidator } from './openapi-answers.js';
import { ROOT } from '../harness/root.js';

const VENDOR = loadDocument(join(ROOT, 'test/fixtures/vendor-openapi.yaml'));
const BASIN = loadDocument(join(ROOT, 'openapi.json'));

/** Every answer of a walk, each with the vendor's operationId it called. */
interface Walked extends Answer {
  op: string;
}

/**
 * Calls every served operation of the vendor's document once or more, as a
 * client of it would, in an order that lets each succeed (and a few that
 * fail as clients' requests do: 400, 404, 409), recording every answer.
 */
async function walk(inst: Installation, b: BasinProcess): Promise<Walked[]> {
  const answers: Walked[] = [];
  const P = { project_id: b.projectId };
  async function call(
    op: string,
    params: Record<string, string>,
    body?: unknown,
    options: RequestOptions = {},
  ): Promise<HttpResult> {
    const found = VENDOR_OPS.get(op);
    if (!found) throw new Error(`no vendor operation ${op}`);
    const url = found.path.replace(/\{(\w+)\}/g, (_, k: string) => {
      const v = params[k];
      if (v === undefined) throw new Error(`${op} needs ${k}`);
      return v;
    });
    const res = await b.request(found.method, url, {
      ...(body === undefined ? {} : { body }),
      ...options,
    });
    answers.push({
      op,
      method: found.method,
      path: found.path,
      url,
      status: res.status,
      body: res.body,
    });
    return res;
  }
  const ok = (res: HttpResult, status: number) => {
    assert.equal(res.status, status, res.text);
    return res.body;
  };
  const ready = (id: string) => b.waitForStatus(id, 'READY', 60_000);

  // Auth, projects.
  ok(await call('getAuthInfo', {}), 200);
  ok(await call('getProjects', {}), 200);
  // The CLI's telemetry: accepted, kept nowhere; an event needs its name.
  ok(await call('identifyUser', {}, { properties: { email: 'user@example.com' } }), 200);
  ok(await call('trackEvent', {}, { event: 'service_created', properties: { n: 1 } }), 200);
  ok(await call('trackEvent', {}, { properties: {} }), 400);

  // VPCs and a peering.
  const vpc = ok(
    await call('createVPC', P, { name: 'net', cidr: '10.20.0.0/16', region_code: 'us-east-1' }),
    201,
  );
  const V = { ...P, vpc_id: vpc.id as string };
  ok(await call('getVPCs', P), 200);
  ok(await call('getVPC', V), 200);
  ok(await call('renameVPC', V, { name: 'net-renamed' }), 200);
  ok(await call('renameVPC', V, { name: '' }), 400);
  const peering = ok(
    await call('createVPCPeering', V, {
      peer_account_id: '123456789012',
      peer_region_code: 'us-east-1',
      peer_vpc_id: 'vpc-0abc',
    }),
    201,
  );
  const PE = { ...V, peering_id: peering.id as string };
  ok(await call('getVPCPeerings', V), 200);
  ok(await call('getVPCPeering', PE), 200);

  // A service through its life.
  const created = ok(await call('createService', P, { name: 'walk', replica_count: 0 }), 202);
  const S = { ...P, service_id: created.service_id as string };
  ok(await call('getServices', P), 200);
  ok(await call('getService', { ...P, service_id: 'nosuchsvc0' }), 404);
  await ready(S.service_id);
  ok(await call('getService', S), 200);
  ok(await call('renameService', S, { name: 'walk-renamed' }), 200);
  ok(await call('resizeService', S, { cpu_millis: '1000', memory_gbs: '4' }), 202);
  await ready(S.service_id);
  ok(await call('enablePooler', S), 200);
  ok(await call('getService', S), 200);
  ok(await call('disablePooler', S), 200);
  ok(await call('updatePassword', S, { password: 'a-new-long-password' }), 204);
  ok(await call('setEnvironment', S, { environment: 'PROD' }), 200);
  ok(await call('getServiceLogs', S), 200);
  // The metrics series: once the collector has sampled the service (every second here).
  const CPU = 'timescale_cloud_system_cpu_usage_millicores';
  await b.waitFor(async () => {
    const names = (await b.call('GET', `${b.servicePath(S.service_id)}/metrics/available-series`))
      .body;
    return Array.isArray(names) && names.includes(CPU);
  }, 'the service sampled');
  ok(await call('getServiceMetricsAvailableSeries', S), 200);
  ok(await call('getServiceMetricsAvailableSeries', { ...P, service_id: 'nosuchsvc0' }), 404);
  const window = {
    from: new Date(Date.now() - 600_000).toISOString(),
    to: new Date().toISOString(),
  };
  const cpu = ok(await call('getServiceMetricsSeries', S, { name: CPU, ...window }), 200);
  assert.ok(cpu.length >= 1 && cpu[0].data.some((d: { value: unknown }) => d.value !== null));
  ok(
    await call('getServiceMetricsSeries', S, {
      name: 'basin_database_xact_commit_total',
      ...window,
      bucket_seconds: 60,
      fn: 'RATE',
      filters: [{ key: 'role', value: 'primary' }],
    }),
    200,
  );
  ok(await call('getServiceMetricsSeries', S, { name: CPU, ...window, fn: 'P99' }), 400);
  ok(await call('getServiceMetricsSeries', S, { name: 'nosuch', ...window }), 400);
  ok(await call('attachServiceToVPC', S, { vpc_id: V.vpc_id }), 202);
  await b.waitFor(
    async () => (await b.call('GET', b.servicePath(S.service_id))).body?.vpc_endpoint,
    'the service in its VPC',
  );
  await ready(S.service_id);
  ok(await call('getService', S), 200);
  ok(await call('detachServiceFromVPC', S, { vpc_id: V.vpc_id }), 202);
  await ready(S.service_id);
  ok(await call('setHAReplica', S, { replica_count: 1 }), 202);
  await ready(S.service_id);
  ok(await call('getService', S), 200);

  // A read replica set.
  const rs = ok(
    await call('createReplicaSet', S, { name: 'reads', nodes: 1, cpu_millis: 1000, memory_gbs: 4 }),
    202,
  );
  const R = { ...S, replica_set_id: rs.id as string };
  await b.waitFor(async () => {
    const sets = (await b.call('GET', `${b.servicePath(S.service_id)}/replicaSets`)).body;
    return sets?.some(
      (x: { id: string; status: string }) => x.id === R.replica_set_id && x.status === 'active',
    );
  }, 'the replica set active');
  ok(await call('getReplicaSets', S), 200);
  ok(await call('getService', { ...P, service_id: R.replica_set_id }), 200);
  ok(await call('enableReplicaPooler', R), 200);
  ok(await call('getReplicaSets', S), 200);
  ok(await call('disableReplicaPooler', R), 200);
  ok(await call('setReplicaEnvironment', R, { environment: 'PROD' }), 200);
  ok(await call('resizeReplicaSet', R, { cpu_millis: '2000', memory_gbs: '8' }), 202);
  await b.waitFor(async () => {
    const sets = (await b.call('GET', `${b.servicePath(S.service_id)}/replicaSets`)).body;
    return sets?.some(
      (x: { id: string; status: string }) => x.id === R.replica_set_id && x.status === 'active',
    );
  }, 'the replica set resized');
  ok(await call('deleteReplicaSet', R), 202);

  // A fork, stop and start, then everything goes.
  const fork = ok(await call('forkService', S, { fork_strategy: 'NOW' }), 202);
  await ready(fork.service_id);
  ok(await call('getService', { ...P, service_id: fork.service_id }), 200);
  ok(await call('deleteService', { ...P, service_id: fork.service_id }), 202);
  ok(await call('stopService', S), 202);
  await b.waitForStatus(S.service_id, 'PAUSED', 60_000);
  ok(await call('stopService', S), 409);
  ok(await call('startService', S), 202);
  await ready(S.service_id);
  ok(await call('deleteService', S), 202);
  await b.waitGone(S.service_id, 60_000);
  await b.waitGone(fork.service_id, 60_000);
  ok(await call('deleteVPCPeering', PE), 204);
  ok(await call('deleteVPC', V), 204);

  // Logging out: a user token made by the shipped CLI (revoked), then the project key (kept).
  const user = await inst.cli('--json', 'user', 'create', 'walker');
  assert.equal(user.code, 0, user.stderr);
  const userId = JSON.parse(user.stdout).id as string;
  assert.equal((await inst.cli('user', 'add', userId, '--project', b.projectId)).code, 0);
  const made = await inst.cli('--json', 'credential', 'create', '--user', userId);
  assert.equal(made.code, 0, made.stderr);
  const token = `Bearer ${JSON.parse(made.stdout).bearer_key as string}`;
  ok(await call('getAuthInfo', {}, undefined, { authorization: token }), 200);
  ok(
    await call('logout', {}, { refresh_token: 'held-by-the-client' }, { authorization: token }),
    204,
  );
  ok(await call('getAuthInfo', {}, undefined, { authorization: token }), 401);
  ok(await call('logout', {}), 204);
  ok(await call('getProjects', {}), 200);
  return answers;
}

const VENDOR_OPS = new Map(
  openApiValidator(VENDOR).operations.map((o) => [o.id, { method: o.method, path: o.path }]),
);

/** The operations that answer a Service (or a list of them). */
const SERVICE_ANSWERS = [
  'getServices',
  'getService',
  'createService',
  'forkService',
  'renameService',
  'resizeService',
  'setHAReplica',
  'startService',
  'stopService',
];

/** Every answer's problems under `doc`, one line each. */
const problemsUnder = (validator: ReturnType<typeof openApiValidator>, answers: Walked[]) =>
  answers.flatMap((a) => validator.problems(a));

test(
  "--service-type-name TIMESCALEDB: every served operation of the vendor's newest document answers as its schema says",
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t, {
      driver: 'sim',
      env: { BASIN_SIM_DELAY_MS: '50', BASIN_SERIES_INTERVAL_MS: '1000' },
    });
    const b = await inst.start({ args: ['--service-type-name', 'TIMESCALEDB'] });
    const answers = await walk(inst, b);

    assert.deepEqual(problemsUnder(openApiValidator(VENDOR), answers), []);

    // Every operation of the vendor's document was called with success.
    const succeeded = new Set(answers.filter((a) => a.status < 300).map((a) => a.op));
    const missed = [...VENDOR_OPS.keys()].filter((op) => !succeeded.has(op));
    assert.deepEqual(missed, [], 'vendor operations the walk did not call');

    // The name is the vendor's wherever a service is answered.
    const serviceAnswers = new Set(SERVICE_ANSWERS);
    const types = answers.flatMap((a) =>
      a.status < 300 && serviceAnswers.has(a.op)
        ? [a.body].flat().map((s) => (s as { service_type?: string }).service_type)
        : [],
    );
    assert.ok(types.length > 5, `${types.length} services answered`);
    assert.deepEqual(new Set(types), new Set(['TIMESCALEDB']));
  },
);

test(
  "at the default setting, the same walk answers as Basin's own openapi.json (the spec's) says",
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t, {
      driver: 'sim',
      env: { BASIN_SIM_DELAY_MS: '50', BASIN_SERIES_INTERVAL_MS: '1000' },
    });
    const b = await inst.start();
    const served = await b.request('GET', '/openapi.json');
    assert.deepEqual(served.body, BASIN, 'the served document is openapi.json');
    const answers = await walk(inst, b);
    assert.deepEqual(problemsUnder(openApiValidator(BASIN, '/v1'), answers), []);
    const serviceAnswers = new Set(SERVICE_ANSWERS);
    const types = answers.flatMap((a) =>
      a.status < 300 && serviceAnswers.has(a.op)
        ? [a.body].flat().map((s) => (s as { service_type?: string }).service_type)
        : [],
    );
    assert.ok(types.length > 5, `${types.length} services answered`);
    assert.deepEqual(new Set(types), new Set(['TIMESERIESDB']));
    // The vendor's schema rejects these answers on the type's name, and on nothing else.
    const underVendor = problemsUnder(openApiValidator(VENDOR), answers);
    assert.ok(underVendor.length >= types.length, underVendor.join('\n'));
    assert.deepEqual(
      underVendor.filter((p) => !/service_type must be equal to one of the allowed values/.test(p)),
      [],
    );
  },
);
