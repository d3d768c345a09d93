import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { openApiDocument } from '../../src/openapi-document.js';
import { ERROR_CATALOGUE } from '../../src/domain/errors.js';

test('the committed openapi.json matches the route schemas (run `npm run openapi` to refresh)', async () => {
  const committed = readFileSync('openapi.json', 'utf8');
  assert.equal(committed, await openApiDocument());
});

test('the OpenAPI document covers every endpoint of the spec, and those of upstream', async () => {
  const doc = JSON.parse(await openApiDocument());
  const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(
    ([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
  );
  const p = '/v1/projects/{project_id}';
  const s = `${p}/services/{service_id}`;
  const rs = `${s}/replicaSets/{replica_set_id}`;
  const expected = [
    'GET /v1/projects',
    // Beyond the spec, as upstream has them (docs/architecture.md §8).
    'GET /v1/auth/info',
    'POST /v1/auth/logout',
    'POST /v1/analytics/identify',
    'POST /v1/analytics/track',
    `POST ${s}/rename`,
    `GET ${p}/vpcs`,
    `POST ${p}/vpcs`,
    `GET ${p}/vpcs/{vpc_id}`,
    `DELETE ${p}/vpcs/{vpc_id}`,
    `POST ${p}/vpcs/{vpc_id}/rename`,
    `GET ${p}/vpcs/{vpc_id}/peerings`,
    `POST ${p}/vpcs/{vpc_id}/peerings`,
    `GET ${p}/vpcs/{vpc_id}/peerings/{peering_id}`,
    `DELETE ${p}/vpcs/{vpc_id}/peerings/{peering_id}`,
    `GET ${p}/services`,
    `POST ${p}/services`,
    `GET ${s}`,
    `DELETE ${s}`,
    ...[
      'start',
      'stop',
      'attachToVPC',
      'detachFromVPC',
      'resize',
      'enablePooler',
      'disablePooler',
      'forkService',
      'updatePassword',
      'setEnvironment',
      'setHA',
    ].map((a) => `POST ${s}/${a}`),
    `GET ${s}/logs`,
    `GET ${s}/metrics/available-series`,
    `POST ${s}/metrics/series`,
    `GET ${s}/replicaSets`,
    `POST ${s}/replicaSets`,
    `DELETE ${rs}`,
    ...['resize', 'enablePooler', 'disablePooler', 'setEnvironment'].map((a) => `POST ${rs}/${a}`),
  ];
  assert.deepEqual([...ops].sort(), [...expected].sort());
});

test('the error catalogue, the OpenAPI ErrorBody and docs/errors.md agree', async () => {
  const doc = JSON.parse(await openApiDocument());
  const codes = doc.components.schemas.ErrorBody.properties.code.anyOf.map(
    (c: { enum?: string[]; const?: string }) => c.enum?.[0] ?? c.const,
  );
  assert.deepEqual([...codes].sort(), Object.keys(ERROR_CATALOGUE).sort());
  const docs = readFileSync('docs/errors.md', 'utf8');
  for (const [code, { status }] of Object.entries(ERROR_CATALOGUE)) {
    assert.match(
      docs,
      new RegExp(`\\|\\s*\`${code}\`\\s*\\|\\s*${status}\\s*\\|`),
      `docs/errors.md lists ${code} with status ${status}`,
    );
  }
});

/**
 * Every schema a response can carry, with where it is: a walk from each
 * response through $refs, properties, items and combinators.
 */
function responseSchemas(doc: any): { where: string; schema: any }[] {
  const found: { where: string; schema: any }[] = [];
  const seen = new Set<string>();
  const walk = (schema: any, where: string) => {
    if (!schema || typeof schema !== 'object') return;
    if (typeof schema.$ref === 'string') {
      const name = schema.$ref.replace('#/components/schemas/', '');
      if (seen.has(name)) return;
      seen.add(name);
      return walk(doc.components.schemas[name], name);
    }
    found.push({ where, schema });
    for (const [k, v] of Object.entries(schema.properties ?? {})) walk(v, `${where}.${k}`);
    if (schema.items) walk(schema.items, `${where}[]`);
    for (const key of ['anyOf', 'oneOf', 'allOf'])
      for (const [i, v] of (schema[key] ?? []).entries()) walk(v, `${where}|${i}`);
  };
  for (const [path, ops] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(ops)) {
      for (const [status, res] of Object.entries<any>(op.responses ?? {})) {
        for (const media of Object.values<any>(res.content ?? {})) {
          walk(media.schema, `${method.toUpperCase()} ${path} ${status}`);
        }
      }
    }
  }
  return found;
}

test('every number a response carries is typed integer (counts, ports, sizes, metrics)', async () => {
  const doc = JSON.parse(readFileSync('openapi.json', 'utf8'));
  const schemas = responseSchemas(doc);
  // The vendor's own fractions (its document types them number/double): a
  // rate or an average of a metric series is one.
  const fractions = ['MetricDataPoint.value'];
  const numbers = schemas.filter(({ schema }) => schema.type === 'number');
  assert.deepEqual(
    numbers.map((n) => n.where).filter((w) => !fractions.includes(w)),
    [],
    'a Go client reading an int rejects a fraction: type these integer',
  );
  const integers = schemas.filter(({ schema }) => schema.type === 'integer').map((s) => s.where);
  for (const field of [
    'Endpoint.port',
    'VpcEndpoint.port',
    'ReadReplicaSet.nodes',
    'ReadReplicaSet.cpu_millis',
    'ReadReplicaSet.memory_gbs',
    'Service.ha_replicas.replica_count',
    'Service.ha_replicas.sync_replica_count',
    'Service.metrics.memory_mb',
    'Service.metrics.milli_cpu',
    'Service.metrics.storage_mb',
    'Service.resources[].spec.cpu_millis',
    'Service.resources[].spec.memory_gbs',
  ]) {
    assert.ok(integers.includes(field), `${field} is an integer`);
  }
});

test('both spellings of the renamed fields are documented', () => {
  const doc = JSON.parse(readFileSync('openapi.json', 'utf8'));
  const { Service, ServiceLogsResponse } = doc.components.schemas;
  assert.deepEqual(Service.properties.vpcEndpoint, Service.properties.vpc_endpoint);
  assert.equal(ServiceLogsResponse.properties.lastCursor.type, 'string');
  assert.equal(ServiceLogsResponse.properties.last_cursor.type, 'string');
});
