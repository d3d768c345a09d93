// Per-credential rate limits (api/rate-limit.ts): over budget a client gets
// 429 {code: RATE_LIMITED} with Retry-After, reads and writes have budgets of
// their own, one credential's budget is not another's, requests without
// valid credentials count by address, and loopback clients are exempt only
// when configured. Limits here are tiny so that a few requests reach them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { issueCredential } from '../../src/commands/admin.js';
import { ConfigError, parseConfig } from '../../src/config.js';
import { systemClock } from '../../src/lib/clock.js';
import { API_KEY, startBasin, type TestBasin } from '../helpers.js';

interface Answer {
  status: number;
  body: any;
  headers: Record<string, unknown>;
}

async function send(
  b: TestBasin,
  method: 'GET' | 'POST',
  url: string,
  opts: { key?: string | null; body?: unknown; remoteAddress?: string } = {},
): Promise<Answer> {
  const key = opts.key === undefined ? API_KEY : opts.key;
  const res = await b.basin.app.inject({
    method,
    url,
    headers: {
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(opts.body === undefined ? {} : { payload: JSON.stringify(opts.body) }),
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
  });
  return {
    status: res.statusCode,
    body: res.body ? JSON.parse(res.body) : undefined,
    headers: res.headers,
  };
}

function assertLimited(res: Answer): void {
  assert.equal(res.status, 429, JSON.stringify(res.body));
  assert.equal(res.body.code, 'RATE_LIMITED');
  assert.match(res.body.message, /retry in \d+ s/);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
    `Retry-After ${String(res.headers['retry-after'])}`,
  );
  assert.match(String(res.headers['content-type']), /^application\/json/);
}

const limits = (reads: number, writes: number, loopback = 'on') => ({
  env: {
    BASIN_RATE_LIMIT_READS: String(reads),
    BASIN_RATE_LIMIT_WRITES: String(writes),
    BASIN_RATE_LIMIT_LOOPBACK: loopback,
  },
});

test('over its read budget a credential gets 429 RATE_LIMITED with Retry-After', async (t) => {
  const b = await startBasin(t, limits(3, 100));
  const url = `/v1/projects/${b.projectId}/vpcs`;
  for (let i = 0; i < 3; i++) {
    const ok = await send(b, 'GET', url);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['x-ratelimit-limit'], undefined, 'no rate limit headers within budget');
  }
  const refused = await send(b, 'GET', url);
  assertLimited(refused);
  assert.equal(refused.headers['x-ratelimit-limit'], '3');
  assert.match(refused.body.message, /this credential may make 3 reads \(GET\) a minute/);
  // Another GET route shares the budget: reads are counted per credential, not per route.
  assertLimited(await send(b, 'GET', `/v1/projects/${b.projectId}/services`));
});

test('reads and writes are counted separately', async (t) => {
  const b = await startBasin(t, limits(2, 2));
  const vpcs = `/v1/projects/${b.projectId}/vpcs`;
  const vpc = (i: number) => ({
    name: `net-${i}`,
    cidr: `10.${i}.0.0/16`,
    region_code: 'us-east-1',
  });

  for (let i = 0; i < 2; i++) assert.equal((await send(b, 'GET', vpcs)).status, 200);
  assertLimited(await send(b, 'GET', vpcs));
  // The read budget is spent; the write budget is whole.
  for (let i = 0; i < 2; i++) {
    assert.equal((await send(b, 'POST', vpcs, { body: vpc(i) })).status, 201);
  }
  const refused = await send(b, 'POST', vpcs, { body: vpc(9) });
  assertLimited(refused);
  // The refused write created nothing (seen through a credential with budget left).
  const other = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const listed = await send(b, 'GET', vpcs, { key: other.bearerKey });
  assert.deepEqual(listed.body.map((v: { name: string }) => v.name).sort(), ['net-0', 'net-1']);
});

test('limits are per credential: another credential keeps its own budget', async (t) => {
  const b = await startBasin(t, limits(2, 2));
  const other = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const url = `/v1/projects/${b.projectId}/vpcs`;
  for (let i = 0; i < 2; i++) assert.equal((await send(b, 'GET', url)).status, 200);
  assertLimited(await send(b, 'GET', url));
  for (let i = 0; i < 2; i++) {
    assert.equal((await send(b, 'GET', url, { key: other.bearerKey })).status, 200);
  }
  assertLimited(await send(b, 'GET', url, { key: other.bearerKey }));
  // From another address, the first credential is still over its budget: it is the key that counts.
  assertLimited(await send(b, 'GET', url, { remoteAddress: '10.1.2.3' }));
});

test('requests without valid credentials are limited by client address', async (t) => {
  const b = await startBasin(t, limits(2, 2));
  const url = `/v1/projects/${b.projectId}/vpcs`;
  const wrong = 'not-a-key-of-this-basin-0123456789';
  const from = '10.0.0.7';
  for (let i = 0; i < 2; i++) {
    const res = await send(b, 'GET', url, { key: wrong, remoteAddress: from });
    assert.equal(res.status, 401);
    assert.equal(res.body.code, 'UNAUTHORIZED');
  }
  assertLimited(await send(b, 'GET', url, { key: wrong, remoteAddress: from }));
  assertLimited(await send(b, 'GET', url, { key: null, remoteAddress: from }));
  // Another address, and a valid credential from the same address, are not limited.
  assert.equal((await send(b, 'GET', url, { key: wrong, remoteAddress: '10.0.0.8' })).status, 401);
  assert.equal((await send(b, 'GET', url, { remoteAddress: from })).status, 200);
  // The OpenAPI document needs no credentials: it counts by address too.
  assertLimited(await send(b, 'GET', '/v1/openapi.json', { key: null, remoteAddress: from }));
});

test('loopback clients are exempt only with --rate-limit-loopback off', async (t) => {
  const url = (b: TestBasin) => `/v1/projects/${b.projectId}/vpcs`;

  const strict = await startBasin(t, limits(1, 1));
  assert.equal((await send(strict, 'GET', url(strict))).status, 200);
  assertLimited(await send(strict, 'GET', url(strict)));
  assertLimited(await send(strict, 'GET', url(strict), { remoteAddress: '::1' }));

  const dev = await startBasin(t, limits(1, 1, 'off'));
  for (const remoteAddress of ['127.0.0.1', '127.0.0.53', '::1', '::ffff:127.0.0.1']) {
    for (let i = 0; i < 3; i++) {
      assert.equal((await send(dev, 'GET', url(dev), { remoteAddress })).status, 200);
    }
  }
  // Other addresses are still limited.
  assert.equal((await send(dev, 'GET', url(dev), { remoteAddress: '192.0.2.1' })).status, 200);
  assertLimited(await send(dev, 'GET', url(dev), { remoteAddress: '192.0.2.1' }));
});

test('a limit of 0 means no limit; the defaults are far above what a polling client does', async (t) => {
  const b = await startBasin(t, limits(0, 0));
  const url = `/v1/projects/${b.projectId}/vpcs`;
  for (let i = 0; i < 50; i++) assert.equal((await send(b, 'GET', url)).status, 200);

  const d = await startBasin(t);
  assert.deepEqual(d.config.rateLimits, {
    readsPerMinute: 60_000,
    writesPerMinute: 1_200,
    loopback: true,
  });
});

test('the limits are set by flags or environment, and bad values are refused with the option named', () => {
  const base = { BASIN_DATA_DIR: '/tmp/x', BASIN_DRIVER: 'sim' };
  const flags = parseConfig(
    ['--rate-limit-reads', '100', '--rate-limit-writes=5', '--rate-limit-loopback', 'off'],
    base,
  );
  assert.deepEqual(flags.rateLimits, { readsPerMinute: 100, writesPerMinute: 5, loopback: false });
  const env = parseConfig([], {
    ...base,
    BASIN_RATE_LIMIT_READS: '7',
    BASIN_RATE_LIMIT_LOOPBACK: 'on',
  });
  assert.deepEqual(env.rateLimits, { readsPerMinute: 7, writesPerMinute: 1200, loopback: true });
  assert.throws(() => parseConfig(['--rate-limit-reads', '-1'], base), ConfigError);
  assert.throws(() => parseConfig(['--rate-limit-writes', 'lots'], base), /rateLimitWrites/);
  assert.throws(
    () => parseConfig(['--rate-limit-loopback', 'maybe'], base),
    /BASIN_RATE_LIMIT_LOOPBACK must be on or off/,
  );
});
