// Basin compiles each route's validators and serializers at its first use
// (src/api/lazy-schemas.ts). A schema that cannot compile would then fail a
// request, not the start: here every one of the whole API is compiled.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileEverySchema } from '../../src/api/lazy-schemas.js';
import { startBasin } from '../helpers.js';

test("every route's validators and serializers compile", async (t) => {
  const b = await startBasin(t);
  await b.basin.app.ready();
  // A validator per route and request part, a serializer per distinct response schema.
  assert.ok(compileEverySchema(b.basin.app) > 100, 'the schemas were put off until used');
  assert.equal(compileEverySchema(b.basin.app), 0, 'each is compiled once');
});

test('a route compiles its schemas at its first request, and answers as it did', async (t) => {
  const b = await startBasin(t);
  await b.basin.app.ready();
  const projects = await b.call('GET', '/v1/projects');
  assert.equal(projects.status, 200);
  assert.equal(projects.body[0].id, b.projectId);
  // Ajv's message for a field of the wrong type, through the deferred validator.
  const bad = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 7 });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.code, 'INVALID_REQUEST');
  assert.match(bad.body.message, /name/);
  assert.match(bad.body.message, /must be string/);
  const made = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 'db' });
  assert.equal(made.status, 202);
  assert.equal(made.body.name, 'db');
});
