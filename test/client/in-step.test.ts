// What `npm run check` checks (scripts/in-step.ts), also in the tests: the
// committed openapi.json, the client's generated types and the docs are in
// step with the code. And that the check would notice a change.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CLIENT_TYPES_FILE, clientTypes, OPENAPI_FILE, outOfStep } from '../../scripts/in-step.js';

test('openapi.json, the generated client and the docs are in step with the code', async () => {
  assert.deepEqual(await outOfStep(), []);
});

test('a changed schema changes the generated client (so a stale one fails the check)', async () => {
  const doc = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8'));
  doc.components.schemas.Endpoint.properties.port.type = 'string';
  const changed = await clientTypes(JSON.stringify(doc));
  assert.notEqual(changed, readFileSync(CLIENT_TYPES_FILE, 'utf8'));
  assert.match(changed, /port: string;/);
});
