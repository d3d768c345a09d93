// The fast lane (api/polling-fast-lane.ts) changes nothing a client or an
// operator can observe. Two apps over one Basin (one store, one driver): one
// with the lane, one without, both listening on real sockets. The same raw
// requests go to both, and their answers must be the same bytes (status
// line, every header in order, body), Date aside; their access lines the
// same fields. A spy on the lane says which requests it answered, so the
// test also proves that it answers the hits and leaves everything else to
// Fastify.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { test, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { PollingFastLane } from '../../src/api/polling-fast-lane.js';
import { buildApp } from '../../src/app.js';
import { createUser, issueCredential } from '../../src/commands/admin.js';
import type { Ctx } from '../../src/commands/context.js';
import { type Clock, systemClock } from '../../src/lib/clock.js';
import { createStreamLog } from '../../src/lib/logger.js';
import { API_KEY, startBasin, type TestBasin } from '../helpers.js';
import { readyService, servicesUrl, serviceUrl } from './service-helpers.js';

const run = promisify(execFile);

/** Which requests the lane answered: a spy on PollingFastLane.offer (this file's process only). */
const answered: string[] = [];
const offer = PollingFastLane.prototype.offer;
PollingFastLane.prototype.offer = function (this: PollingFastLane, req, res) {
  const ok = offer.call(this, req, res);
  if (ok) answered.push(req.url as string);
  return ok;
};

interface Answer {
  status: number;
  /** The status line and header lines as sent, the Date header's value blanked. */
  head: string;
  body: Buffer;
}

/** One request, written as given, on a connection of its own; the answer as received. */
function exchange(port: number, request: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const head = request.startsWith('HEAD ');
    const done = () => {
      const data = Buffer.concat(chunks);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const text = data.toString('latin1', 0, end);
      const length = /\r\ncontent-length: (\d+)/i.exec(text);
      const bodyLength = head || !length ? 0 : Number(length[1]);
      if (data.length < end + 4 + bodyLength) return false;
      socket.destroy();
      resolve({
        status: Number(text.slice(9, 12)),
        head: text.replace(/\r\nDate: [^\r]*/, '\r\nDate: -'),
        body: data.subarray(end + 4, end + 4 + bodyLength),
      });
      return true;
    };
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      done();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      if (!done()) reject(new Error(`connection closed before a whole answer to ${request}`));
    });
    socket.write(request);
  });
}

interface Pair {
  b: TestBasin;
  /** Ports of the app with the lane and of the one without. */
  lane: number;
  fastify: number;
  /** Access lines of each app, parsed. */
  logs: { lane: Record<string, unknown>[]; fastify: Record<string, unknown>[] };
}

/**
 * A Basin, and two apps over it, listening: one with the lane (as shipped),
 * one without. Its clock stands still unless moved (`time.ms`): the sim's
 * metrics follow the clock, and the two apps must be asked the same thing.
 */
async function twoApps(
  t: TestContext,
  env: Record<string, string> = {},
  time = { ms: Date.now() },
): Promise<Pair> {
  const clock: Clock = () => time.ms;
  const b = await startBasin(t, { env, options: { clock } });
  const ctx: Ctx = {
    store: b.basin.store,
    driver: b.basin.driver,
    clock,
    settings: {
      regions: b.config.regions,
      defaultRegion: b.config.defaultRegion,
      sizes: b.config.sizes,
      portRange: b.config.portRange,
      adminEmail: b.config.adminEmail,
    },
    kick: () => b.basin.engine.kick(),
    portUsable: async () => true,
  };
  const logs = { lane: [] as Record<string, unknown>[], fastify: [] as Record<string, unknown>[] };
  const ports = { lane: 0, fastify: 0 };
  for (const which of ['lane', 'fastify'] as const) {
    const app = await buildApp({
      deps: { ctx, present: { publicHost: b.config.publicHost, volumeType: 'sim' } },
      bodyLimitBytes: b.config.bodyLimitBytes,
      loggerInstance: createStreamLog('info', {
        write: (line: string) => {
          const l = JSON.parse(line) as Record<string, unknown>;
          if (l.msg === 'request') logs[which].push(l);
        },
      }),
      rateLimits: b.config.rateLimits,
      fastLane: which === 'lane',
    });
    t.after(() => app.close());
    await app.listen({ host: '127.0.0.1', port: 0 });
    ports[which] = (app.server.address() as AddressInfo).port;
  }
  return { b, ...ports, logs };
}

const request = (method: string, path: string, headers: Record<string, string> = {}) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
  Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('') +
  '\r\n';

const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/**
 * Sends `req` to both apps; asserts the same answer; returns it, and whether
 * the lane answered. (The seconds until a rate limit's window ends may differ
 * by one between the apps, whose windows start a moment apart.)
 */
async function same(p: Pair, req: string): Promise<Answer & { byLane: boolean }> {
  const before = answered.length;
  const viaLane = await exchange(p.lane, req);
  const byLane = answered.length > before;
  const viaFastify = await exchange(p.fastify, req);
  const label = req.split('\r\n')[0] as string;
  const seconds = (s: string) =>
    s
      .replace(/(retry-after|x-ratelimit-reset): \d+/g, '$1: N')
      .replace(/retry in \d+ s/, 'retry in N s');
  assert.equal(
    seconds(viaLane.head),
    seconds(viaFastify.head),
    `${label}: status line and headers`,
  );
  assert.equal(
    seconds(viaLane.body.toString('latin1')),
    seconds(viaFastify.body.toString('latin1')),
    `${label}: body`,
  );
  if (viaLane.status !== 429) assert.ok(viaLane.body.equals(viaFastify.body), `${label}: body`);
  return { ...viaLane, byLane };
}

/** The access lines of both apps, the same but for time and duration. */
function assertSameAccessLines(p: Pair): void {
  const strip = (l: Record<string, unknown>) => ({ ...l, time: 0, ms: 0 });
  assert.equal(p.logs.lane.length, p.logs.fastify.length, 'one access line per request');
  assert.deepEqual(p.logs.lane.map(strip), p.logs.fastify.map(strip));
}

test('the lane answers a poll of a service as Fastify does, and leaves every other request to it', async (t) => {
  const p = await twoApps(t);
  const { b } = p;
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const other = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const basic = Buffer.from(`${other.accessKey}:${other.secretKey}`).toString('base64');
  const rs = await b.call('POST', `${url}/replicaSets`, {
    name: 'readers',
    nodes: 1,
    cpu_millis: 1000,
    memory_gbs: 4,
  });
  assert.equal(rs.status, 202, JSON.stringify(rs.body));

  // Hits: the lane answers them, with Fastify's bytes.
  for (const headers of [
    bearer(API_KEY),
    bearer(other.bearerKey),
    { Authorization: `Basic ${basic}` },
  ]) {
    const hit = await same(p, request('GET', url, { ...headers, Accept: 'application/json' }));
    assert.equal(hit.status, 200);
    assert.ok(hit.byLane, 'answered by the lane');
    assert.equal(JSON.parse(hit.body.toString()).service_id, id);
  }
  const list = await same(p, request('GET', servicesUrl(b), bearer(API_KEY)));
  assert.equal(list.status, 200);
  assert.ok(list.byLane, 'the list answered by the lane');
  assert.deepEqual(
    JSON.parse(list.body.toString()).map((s: { service_id: string }) => s.service_id),
    [id],
  );

  // Everything else: Fastify answers, the same way with the lane in front.
  const fallThrough: [string, number][] = [
    [request('GET', url), 401],
    [request('GET', url, bearer('not-a-key-0123456789')), 401],
    [request('GET', url, { Authorization: 'Token abc' }), 401],
    [request('GET', url, { Authorization: 'Basic !!!' }), 401],
    [request('GET', serviceUrl(b, 'nosuchsvc0'), bearer(API_KEY)), 404],
    [request('GET', `/v1/projects/nosuchproj/services/${id}`, bearer(API_KEY)), 404],
    [request('GET', `${url}?fields=all`, bearer(API_KEY)), 200],
    [request('GET', `${url}/`, bearer(API_KEY)), 404],
    [request('GET', url.toUpperCase(), bearer(API_KEY)), 404],
    // Percent-encoded: Fastify decodes it to the service's id and answers.
    [
      request(
        'GET',
        url.replace(/.$/, (c) => `%${c.charCodeAt(0).toString(16)}`),
        bearer(API_KEY),
      ),
      200,
    ],
    [request('HEAD', url, bearer(API_KEY)), 200],
    [request('GET', url, { ...bearer(API_KEY), 'Content-Length': '2' }) + '{}', 200],
    [request('GET', url, { ...bearer(API_KEY), 'Accept-Version': '1.x' }), 200],
    [request('GET', `${url}/logs`, bearer(API_KEY)), 200],
    [request('GET', `${servicesUrl(b)}?limit=1`, bearer(API_KEY)), 200],
    [request('GET', `${servicesUrl(b)}/`, bearer(API_KEY)), 400],
    [request('GET', `${servicesUrl(b)}x`, bearer(API_KEY)), 404],
    [request('GET', '/v1/projects/nosuchproj/services', bearer(API_KEY)), 404],
    [request('GET', servicesUrl(b)), 401],
    [request('GET', serviceUrl(b, rs.body.id), bearer(API_KEY)), 200],
    [request('DELETE', serviceUrl(b, 'nosuchsvc0'), bearer(API_KEY)), 404],
  ];
  for (const [req, status] of fallThrough) {
    const got = await same(p, req);
    assert.equal(got.status, status, req);
    assert.ok(!got.byLane, `left to Fastify: ${req.split('\r\n')[0]}`);
  }
  assertSameAccessLines(p);
});

test('a commit by another process is seen at once: a revoked key, a new project member, a changed service', async (t) => {
  const p = await twoApps(t);
  const { b } = p;
  const { id } = await readyService(b);
  const url = serviceUrl(b, id);
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const poll = (key: string) => same(p, request('GET', url, bearer(key)));
  for (let i = 0; i < 3; i++) assert.ok((await poll(cred.bearerKey)).byLane);

  const cli = (...args: string[]) =>
    run(process.execPath, [
      '--import',
      'tsx',
      'src/cli/basin.ts',
      '--data-dir',
      b.config.dataDir,
      ...args,
    ]);
  await cli('credential', 'revoke', cred.id);
  const revoked = await poll(cred.bearerKey);
  assert.equal(revoked.status, 401);
  assert.ok(!revoked.byLane);

  // A user's token sees the project once another process adds the user to it.
  const user = await createUser(b.basin.store, systemClock, 'ana');
  const token = await issueCredential(b.basin.store, systemClock, { userId: user.id }, 'laptop');
  assert.equal((await poll(token.bearerKey)).status, 404);
  await cli('user', 'add', user.id, '--project', b.projectId);
  const member = await poll(token.bearerKey);
  assert.equal(member.status, 200);
  assert.ok(member.byLane);

  // The service renamed by another process: the next poll shows it.
  const renamed = await run(process.execPath, [
    '--import',
    'tsx',
    '--input-type=module',
    '-e',
    `import { openStore } from './src/open-store.ts';
     const { store } = await openStore({ dataDir: ${JSON.stringify(b.config.dataDir)}, storeUrl: null });
     await store.transaction(async (tx) => {
       const svc = await tx.services.get(${JSON.stringify(id)});
       await tx.services.update({ ...svc, name: 'renamed-elsewhere' });
     });
     store.close();`,
  ]);
  assert.equal(renamed.stderr, '');
  const after = await poll(API_KEY);
  assert.ok(after.byLane);
  assert.equal(JSON.parse(after.body.toString()).name, 'renamed-elsewhere');
  assertSameAccessLines(p);
});

test('changed metrics are answered as soon as the driver reports them', async (t) => {
  const time = { ms: Date.now() };
  const p = await twoApps(t, {}, time);
  const { b } = p;
  const { id } = await readyService(b);
  const poll = () => same(p, request('GET', serviceUrl(b, id), bearer(API_KEY)));
  const first = await poll();
  assert.ok(first.byLane);
  // The sim's metrics drift over minutes: ten minutes on, they differ.
  time.ms += 10 * 60_000;
  const later = await poll();
  assert.ok(later.byLane);
  const metrics = (a: Answer) => JSON.parse(a.body.toString()).metrics;
  assert.notDeepEqual(metrics(later), metrics(first));
  assert.deepEqual(metrics(later), (await b.call('GET', serviceUrl(b, id))).body.metrics);
});

test('reads answered by the lane count against the same budget: the 429 comes after the same number of reads', async (t) => {
  const p = await twoApps(t, { BASIN_RATE_LIMIT_READS: '4' });
  const { b } = p;
  const { id } = await readyService(b);
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const other = await issueCredential(
    b.basin.store,
    systemClock,
    { projectId: b.projectId },
    'ci2',
  );
  const url = serviceUrl(b, id);
  const poll = (key: string, path = url) => same(p, request('GET', path, bearer(key)));

  // Lane, Fastify (a query string), lane, lane: four reads, then 429 on the lane's URL.
  const statuses: [number, boolean][] = [];
  for (const path of [url, `${url}?x=1`, url, url, url, `${url}?x=1`]) {
    const got = await poll(cred.bearerKey, path);
    statuses.push([got.status, got.byLane]);
  }
  assert.deepEqual(statuses, [
    [200, true],
    [200, false],
    [200, true],
    [200, true],
    [429, false],
    [429, false],
  ]);
  // Another credential's budget is its own.
  assert.ok((await poll(other.bearerKey)).byLane);
  assertSameAccessLines(p);
});

test('a loopback client exempt from the limits (--rate-limit-loopback off) is not counted by the lane either', async (t) => {
  const p = await twoApps(t, { BASIN_RATE_LIMIT_READS: '2', BASIN_RATE_LIMIT_LOOPBACK: 'off' });
  const { id } = await readyService(p.b);
  for (let i = 0; i < 5; i++) {
    const got = await same(p, request('GET', serviceUrl(p.b, id), bearer(API_KEY)));
    assert.equal(got.status, 200);
    assert.ok(got.byLane);
  }
});
