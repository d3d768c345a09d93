import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { openApiDocument } from '../../src/openapi-document.js';
import { ERROR_CATALOGUE } from '../../src/domain/errors.js';

test('the committed openapi.json matches the route schemas (run `npm run openapi` to refresh)', async () => {
  const committed = readFileSync('openapi.json', 'utf8');
  assert.equal(committed, await openApiDocument());
});

test('the OpenAPI document covers every endpoint of the spec', async () => {
  const doc = JSON.parse(await openApiDocument());
  const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(
    ([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
  );
  const p = '/v1/projects/{project_id}';
  const s = `${p}/services/{service_id}`;
  const rs = `${s}/replicaSets/{replica_set_id}`;
  const expected = [
    'GET /v1/projects',
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
