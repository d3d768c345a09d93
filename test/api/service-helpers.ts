// Helpers shared by the service, fork, replica set and logs API tests.

import assert from 'node:assert/strict';
import { eventually, type TestBasin } from '../helpers.js';

export type Res = Awaited<ReturnType<TestBasin['call']>>;

/** RFC 3339 date-time (what the API promises for every timestamp). */
export const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export const servicesUrl = (b: TestBasin) => `/v1/projects/${b.projectId}/services`;
export const serviceUrl = (b: TestBasin, id: string) => `${servicesUrl(b)}/${id}`;

/** An error answer: the status, the body exactly `{code, message}`, a message a person can read. */
export function assertError(res: Res, status: number, code: string, message?: RegExp): void {
  assert.equal(res.status, status, `expected ${status} ${code}, got ${JSON.stringify(res.body)}`);
  assert.deepEqual(Object.keys(res.body ?? {}).sort(), ['code', 'message']);
  assert.equal(res.body.code, code);
  assert.equal(typeof res.body.message, 'string');
  assert.ok(res.body.message.length > 10, `a helpful message: ${res.body.message}`);
  if (message) assert.match(res.body.message, message);
}

export async function getService(b: TestBasin, id: string): Promise<any> {
  const res = await b.call('GET', serviceUrl(b, id));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Polls GET until the service has `status`; returns that body. */
export function waitForStatus(b: TestBasin, id: string, status: string): Promise<any> {
  return eventually(async () => {
    const res = await b.call('GET', serviceUrl(b, id));
    return res.status === 200 && res.body.status === status ? res.body : undefined;
  }, `service ${id} ${status}`);
}

/** Polls until GET answers 404. */
export function waitGone(b: TestBasin, id: string): Promise<unknown> {
  return eventually(
    async () => (await b.call('GET', serviceUrl(b, id))).status === 404,
    `service ${id} gone`,
  );
}

/** POST /services; asserts the 202 and returns the body. */
export async function createService(b: TestBasin, body: unknown = { name: 'db' }): Promise<any> {
  const res = await b.call('POST', servicesUrl(b), body);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  assert.equal(res.body.status, 'QUEUED');
  return res.body;
}

/** A service that is READY: the creation body and the READY body. */
export async function readyService(
  b: TestBasin,
  body: unknown = { name: 'db' },
): Promise<{ id: string; created: any; ready: any }> {
  const created = await createService(b, body);
  const ready = await waitForStatus(b, created.service_id, 'READY');
  return { id: created.service_id, created, ready };
}

/** A READY service stopped until PAUSED. */
export async function pausedService(b: TestBasin): Promise<string> {
  const { id } = await readyService(b);
  const res = await b.call('POST', `${serviceUrl(b, id)}/stop`);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await waitForStatus(b, id, 'PAUSED');
  return id;
}
