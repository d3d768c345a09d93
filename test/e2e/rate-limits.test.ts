// Per-credential rate limits (issue 7, item 5), through Basin as shipped:
// `node dist/main.js` with small budgets set by flags. A credential over its
// budget gets 429 RATE_LIMITED with Retry-After; reads and writes have
// budgets of their own; another tenant's credential is not held back.
// (test/api/rate-limit.test.ts covers the details in process: the loopback
// switch, unauthenticated requests by address, the window.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type HttpResult } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { newTenant, type Tenant } from './tenants.js';

function assertLimited(res: HttpResult): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.body.code, 'RATE_LIMITED');
  assert.match(res.body.message, /\S{10}/);
  const retryAfter = Number(res.headers.get('retry-after'));
  assert.ok(Number.isInteger(retryAfter) && retryAfter > 0, `Retry-After: ${retryAfter}`);
}

test('a credential over its budget gets 429 with Retry-After; others do not', async (t) => {
  const inst = await installation(t, { driver: 'sim' });
  const b = await inst.start({
    args: ['--rate-limit-reads', '5', '--rate-limit-writes', '2'],
  });
  // Fresh credentials (the harness itself reads with the bootstrap one).
  const mine = await newTenant(inst, 'mine');
  const other = await newTenant(inst, 'other');
  const as = (tenant: Tenant) => ({
    authorization: tenant.authorization,
    retryRateLimited: false,
  });
  const vpcs = (tenant: Tenant) => `/projects/${tenant.projectId}/vpcs`;

  for (let i = 0; i < 5; i++) {
    assert.equal((await b.request('GET', vpcs(mine), as(mine))).status, 200, `read ${i + 1}`);
  }
  assertLimited(await b.request('GET', vpcs(mine), as(mine)));

  // Writes have a budget of their own: the spent reads do not touch it.
  const vpc = (n: number) => ({
    name: `net-${n}`,
    cidr: `10.${n}.0.0/16`,
    region_code: 'us-east-1',
  });
  for (let i = 0; i < 2; i++) {
    const res = await b.request('POST', vpcs(mine), { ...as(mine), body: vpc(i) });
    assert.equal(res.status, 201, res.text);
  }
  assertLimited(await b.request('POST', vpcs(mine), { ...as(mine), body: vpc(9) }));

  // Another tenant's credential has budgets of its own.
  assert.equal((await b.request('GET', vpcs(other), as(other))).status, 200);
  const res = await b.request('POST', vpcs(other), { ...as(other), body: vpc(1) });
  assert.equal(res.status, 201, res.text);
});
