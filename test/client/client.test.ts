// The hand-written layer of basin/client (src/client): answers as values,
// errors as BasinError with a code, waitFor's backoff, failure and deadline,
// and log paging. Against a Basin (sim) listening on a real port, except
// where only a made-up answer can show the case (a proxy's 502, a 429).

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test, type TestContext } from 'node:test';
import { BasinError, createBasinClient } from '../../src/client/index.js';
import { issueCredential } from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { API_KEY, startBasin } from '../helpers.js';

async function listening(t: TestContext, env: Record<string, string> = {}) {
  const b = await startBasin(t, { env });
  await b.basin.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = b.basin.app.server.address() as { port: number };
  const url = `http://127.0.0.1:${port}`;
  return { b, url, api: createBasinClient({ url, apiKey: API_KEY }) };
}

/** Asserts a BasinError with `code` (and `status`) and returns it. */
async function rejectsWith(p: Promise<unknown>, code: string, status?: number) {
  let caught: unknown;
  await p.catch((e: unknown) => (caught = e));
  assert.ok(caught instanceof BasinError, `a BasinError, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  assert.equal(caught.status, status);
  return caught;
}

test('answers are the bodies; Basin errors are BasinErrors with the catalogue code', async (t) => {
  const { b, url, api } = await listening(t);
  assert.deepEqual(await api.GET('/v1/projects'), [{ id: b.projectId, name: 'default' }]);
  const path = { project_id: b.projectId };
  const svc = await api.POST('/v1/projects/{project_id}/services', {
    params: { path },
    body: { name: 'db', cpu_millis: 'shared', memory_gbs: 'shared' },
  });
  assert.equal(svc.status, 'QUEUED');
  const one = { params: { path: { ...path, service_id: svc.service_id as string } } };
  await api.waitFor(svc, 'READY');
  assert.equal(await api.DELETE('/v1/projects/{project_id}/services/{service_id}', one), undefined);

  const notFound = await rejectsWith(
    api.GET('/v1/projects/{project_id}/services/{service_id}', {
      params: { path: { ...path, service_id: 'nosuchsvc0' } },
    }),
    'NOT_FOUND',
    404,
  );
  assert.match(notFound.message, /Service nosuchsvc0 not found/);
  await rejectsWith(
    api.POST('/v1/projects/{project_id}/services', {
      params: { path },
      body: { name: 'x', cpu_millis: '3000' },
    }),
    'INVALID_REQUEST',
    400,
  );
  const stranger = createBasinClient({ url: `${url}/v1/`, apiKey: 'bsn_not-a-key-of-this-basin' });
  await rejectsWith(stranger.GET('/v1/auth/info'), 'UNAUTHORIZED', 401);

  // HTTP Basic, with the pair `basin credential create` prints.
  const issued = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'x');
  const basic = createBasinClient({
    url,
    accessKey: issued.accessKey,
    secretKey: issued.secretKey,
  });
  assert.equal((await basic.GET('/v1/auth/info')).api_key?.name, 'x');
});

test('a Basin that cannot be reached, or an answer that is not Basin’s, has a code too', async (t) => {
  // A port nothing listens on: one the system just gave and took back.
  const free = createServer();
  await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
  const freePort = (free.address() as { port: number }).port;
  await new Promise((r) => free.close(r));
  const closed = createBasinClient({ url: `http://127.0.0.1:${freePort}`, apiKey: API_KEY });
  const down = await rejectsWith(closed.GET('/v1/projects'), 'NETWORK_ERROR', undefined);
  assert.match(
    down.message,
    new RegExp(`Cannot reach Basin at http://127.0.0.1:${freePort}: ECONNREFUSED`),
  );

  const proxy = createServer((_req, res) => {
    res.writeHead(502, { 'content-type': 'text/html' });
    res.end('<html>Bad Gateway</html>');
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  t.after(() => proxy.close());
  const port = (proxy.address() as { port: number }).port;
  const behind = createBasinClient({ url: `http://127.0.0.1:${port}`, apiKey: API_KEY });
  const bad = await rejectsWith(behind.GET('/v1/projects'), 'BAD_RESPONSE', 502);
  assert.match(bad.message, /HTTP 502 .*without Basin's \{code, message\}: <html>Bad Gateway/);
});

test('waitFor: follows the statuses, waits out 429s, gives up at its deadline', async (t) => {
  const { b, api } = await listening(t, { BASIN_SIM_DELAY_MS: '300' });
  const svc = await api.POST('/v1/projects/{project_id}/services', {
    params: { path: { project_id: b.projectId } },
    body: { name: 'slow' },
  });
  const seen: string[] = [];
  const ready = await api.waitFor(svc, 'READY', { onStatus: (s) => seen.push(s) });
  assert.equal(ready.status, 'READY');
  assert.deepEqual(seen.at(-1), 'READY');
  assert.ok(
    seen.every((s) => ['QUEUED', 'CONFIGURING', 'READY'].includes(s)),
    seen.join(' → '),
  );

  // Stopping takes 300 ms: a 50 ms deadline is over first.
  await api.POST('/v1/projects/{project_id}/services/{service_id}/stop', {
    params: { path: { project_id: b.projectId, service_id: svc.service_id as string } },
  });
  const late = await rejectsWith(
    api.waitFor(svc, 'PAUSED', { timeoutMs: 50, intervalMs: 10 }),
    'WAIT_TIMEOUT',
    undefined,
  );
  assert.match(late.message, /did not become PAUSED within 0 s \(last seen PAUSING\)/);
  assert.equal((await api.waitFor(svc, 'PAUSED')).status, 'PAUSED');

  // DELETED: until GET answers 404.
  await api.DELETE('/v1/projects/{project_id}/services/{service_id}', {
    params: { path: { project_id: b.projectId, service_id: svc.service_id as string } },
  });
  await api.waitFor(svc, 'DELETED');
  await rejectsWith(
    api.GET('/v1/projects/{project_id}/services/{service_id}', {
      params: { path: { project_id: b.projectId, service_id: svc.service_id as string } },
    }),
    'NOT_FOUND',
    404,
  );
});

test('waitFor: UNSTABLE ends the wait (WAIT_FAILED); a 429 is waited out', async () => {
  // A made-up Basin: rate limited once, then UNSTABLE.
  const answers = [
    { status: 429, body: { code: 'RATE_LIMITED', message: 'Too many requests.' } },
    { status: 200, body: { service_id: 's', project_id: 'p', status: 'CONFIGURING' } },
    { status: 200, body: { service_id: 's', project_id: 'p', status: 'UNSTABLE' } },
  ];
  const calls: string[] = [];
  const api = createBasinClient({
    url: 'http://basin.invalid',
    apiKey: 'k',
    fetch: async (req) => {
      calls.push(`${req.method} ${new URL(req.url).pathname} ${req.headers.get('authorization')}`);
      const a = answers.shift() ?? (answers[0] as never);
      return new Response(JSON.stringify(a.body), {
        status: a.status,
        headers: { 'content-type': 'application/json', 'retry-after': '0' },
      });
    },
  });
  const failed = await rejectsWith(
    api.waitFor({ project_id: 'p', service_id: 's' }, 'READY', { intervalMs: 1 }),
    'WAIT_FAILED',
    undefined,
  );
  assert.match(failed.message, /Service s is UNSTABLE, not READY; its logs say why/);
  assert.deepEqual(calls, Array(3).fill('GET /v1/projects/p/services/s Bearer k'));
});

test('logs pages through every entry, newest first, following last_cursor', async (t) => {
  const { b, api } = await listening(t);
  const svc = await api.POST('/v1/projects/{project_id}/services', {
    params: { path: { project_id: b.projectId } },
    body: { name: 'chatty' },
  });
  await api.waitFor(svc, 'READY');
  const pages = [];
  for await (const page of api.logPages(svc)) pages.push(page);
  assert.ok(pages.length >= 2, `the sim's history spans pages (${pages.length})`);
  const entries = [];
  for await (const entry of api.logs(svc)) entries.push(entry);
  assert.deepEqual(
    entries,
    pages.flatMap((p) => p.entries ?? []),
  );
  const times = entries.map((e) => Date.parse(e.timestamp));
  assert.ok(
    times.every((x, i) => i === 0 || x <= (times[i - 1] as number)),
    'newest first',
  );
  const errors = [];
  for await (const e of api.logs(svc, { severities: ['ERROR', 'FATAL'] })) errors.push(e);
  assert.ok(errors.length > 0 && errors.length < entries.length);
  for (const e of errors) assert.ok(['ERROR', 'FATAL'].includes(e.severity));
});
