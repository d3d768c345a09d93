import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, startBasin } from '../helpers.js';

test('a created service becomes READY and is listed', async (t) => {
  const b = await startBasin(t);
  const created = await b.call('POST', `/v1/projects/${b.projectId}/services`, { name: 'db' });
  assert.equal(created.status, 202);
  assert.equal(created.body.status, 'QUEUED');
  const id = created.body.service_id;
  await eventually(
    async () =>
      (await b.call('GET', `/v1/projects/${b.projectId}/services/${id}`)).body.status === 'READY',
    'READY',
  );
  const list = await b.call('GET', `/v1/projects/${b.projectId}/services`);
  assert.deepEqual(
    list.body.map((s: { service_id: string }) => s.service_id),
    [id],
  );
});
