// The access log (api/access-log.ts) and the server's logger (lib/logger.ts):
// one line per request with its method, route pattern, status, duration and
// request id, and no credential, cookie or query string in it; the engine's
// lines through the same logger; and no line lost when the server stops or
// dies of an uncaught error, although lines are buffered in memory.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { hundredths } from '../../src/api/access-log.js';
import { issueCredential } from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { createStreamLog } from '../../src/lib/logger.js';
import { sha256Hex } from '../../src/lib/secrets.js';
import { claimPortBlock } from '../harness/port-block.js';
import { API_KEY, startBasin, tempDir } from '../helpers.js';
import { readyService, serviceUrl } from './service-helpers.js';

/** A Basin whose log lines are captured, parsed. */
async function loggedBasin(t: Parameters<typeof startBasin>[0]) {
  const raw: string[] = [];
  const logger = createStreamLog('info', { write: (line: string) => void raw.push(line) });
  const b = await startBasin(t, { options: { logger } });
  const lines = () => raw.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { b, raw, lines, access: () => lines().filter((l) => l.msg === 'request') };
}

test('one access line per request: method, route pattern, status, duration, request id, credential', async (t) => {
  const { b, access } = await loggedBasin(t);
  const { id } = await readyService(b);
  const before = access().length;

  const res = await b.basin.app.inject({ method: 'GET', url: serviceUrl(b, id), headers: b.auth });
  assert.equal(res.statusCode, 200);
  const got = access().slice(before);
  assert.equal(got.length, 1, JSON.stringify(got));
  const line = got[0] as Record<string, unknown>;
  assert.equal(line.level, 30);
  assert.equal(line.method, 'GET');
  assert.equal(line.route, '/v1/projects/:project_id/services/:service_id');
  assert.equal(line.status, 200);
  assert.equal(typeof line.ms, 'number');
  assert.ok((line.ms as number) >= 0);
  assert.match(String(line.reqId), /^req-/);
  assert.equal(line.ip, '127.0.0.1');
  const cred = await b.basin.store.credentials.findByBearerHash(sha256Hex(API_KEY));
  assert.equal(line.credential, cred?.id);
  // The ids of the URL are not in the line: the route is the pattern.
  assert.ok(!JSON.stringify(line).includes(id));
});

test('credentials, cookies and query strings never reach the log', async (t) => {
  const { b, raw, access } = await loggedBasin(t);
  const other = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const basic = `Basic ${Buffer.from(`${other.accessKey}:${other.secretKey}`).toString('base64')}`;
  const secrets = [API_KEY, other.bearerKey, other.secretKey, 'session=s3cr3t', 'q-s3cr3t'];
  const requests: { url: string; headers: Record<string, string>; status: number }[] = [
    { url: `/v1/projects?token=q-s3cr3t`, headers: b.auth, status: 200 },
    {
      url: `/v1/projects`,
      headers: { authorization: basic, cookie: 'session=s3cr3t' },
      status: 200,
    },
    { url: `/v1/projects`, headers: { authorization: `Bearer ${other.bearerKey}x` }, status: 401 },
    { url: `/v1/nothing/here?token=q-s3cr3t`, headers: b.auth, status: 404 },
  ];
  for (const r of requests) {
    const res = await b.basin.app.inject({ method: 'GET', url: r.url, headers: r.headers });
    assert.equal(res.statusCode, r.status, r.url);
  }
  const lines = access().slice(-requests.length);
  assert.deepEqual(
    lines.map((l) => [l.route, l.status]),
    [
      ['/v1/projects', 200],
      ['/v1/projects', 200],
      ['/v1/projects', 401],
      [null, 404],
    ],
  );
  // A request that matched no route: its path, without the query.
  assert.equal(lines[3]?.path, '/v1/nothing/here');
  assert.equal(lines[2]?.credential, undefined);
  const all = raw.join('');
  for (const s of secrets) assert.ok(!all.includes(s), `${s} is not in the log`);
  assert.ok(!/authorization|cookie/i.test(all), 'no header is logged');
});

test("every access line is valid JSON in pino's format, whatever the path", async (t) => {
  const { b, raw, access } = await loggedBasin(t);
  // (inject percent-encodes what a client could not send raw.)
  const res = await b.basin.app.inject({
    method: 'GET',
    url: '/v1/a"b\u2028é?q="',
    headers: b.auth,
  });
  assert.equal(res.statusCode, 404);
  const line = access().at(-1) as Record<string, unknown>;
  assert.equal(line.path, '/v1/a%22b%E2%80%A8%C3%A9');
  assert.equal(typeof line.pid, 'number');
  assert.equal(typeof line.hostname, 'string');
  assert.equal(typeof line.time, 'number');
  // Every line, access or not, is one JSON object on one line.
  for (const l of raw) {
    assert.ok(l.endsWith('\n') && !l.slice(0, -1).includes('\n'));
    JSON.parse(l);
  }
});

test('durations are printed as String(Math.round(ms * 100) / 100) prints them', () => {
  const samples = [
    0, 0.001, 0.004, 0.005, 0.01, 0.1, 0.105, 0.995, 1, 1.5, 2.25, 12.3, 99.999, 1234.56,
  ];
  for (let i = 0; i < 20_000; i++) samples.push(Math.random() * 10 ** (i % 7));
  for (const ms of samples)
    assert.equal(hundredths(ms), String(Math.round(ms * 100) / 100), `${ms}`);
});

test("the engine's lines go through the same logger", async (t) => {
  const { b, raw } = await loggedBasin(t);
  const { id } = await readyService(b);
  const engineLines = raw.filter((l) => !l.includes('"msg":"request"') && l.includes(id));
  assert.ok(engineLines.length > 0, `a line about service ${id} besides the access lines`);
});

/** `node dist/main.js` as `npm start` runs it (npm test builds first), stdout into a file. */
async function startServer(dataDir: string, logFile: string, port: number) {
  const out = openSync(logFile, 'a');
  const child = spawn(
    process.execPath,
    ['dist/main.js', '--driver', 'sim', '--data-dir', dataDir, '--port', String(port)],
    {
      env: { ...process.env, BASIN_BOOTSTRAP_API_KEY: API_KEY, BASIN_LOG_LEVEL: 'info' },
      stdio: ['ignore', out, out],
    },
  );
  closeSync(out);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${base}/v1/projects`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    })
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the server did not start:\n${readFileSync(logFile, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { base, child, exited };
}

test('on SIGTERM the server writes out every buffered line before it exits', async (t) => {
  const dir = tempDir(t);
  const logFile = join(dir, 'basin.log');
  const ports = await claimPortBlock();
  t.after(() => ports.release());
  const server = await startServer(join(dir, 'data'), logFile, ports.apiPort);
  t.after(() => server.child.kill('SIGKILL'));
  const n = 25;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${server.base}/v1/projects?i=${i}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  }
  // At once: far less than the buffer's size, and before its periodic write.
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);

  const lines = readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const access = lines.filter((l) => l.msg === 'request' && l.route === '/v1/projects');
  assert.ok(access.length >= n, `${access.length} access lines for at least ${n} requests`);
  for (const l of access) ids.push(l.reqId as string);
  assert.equal(new Set(ids).size, ids.length, 'request ids are unique');
  assert.equal(lines.at(-1)?.msg, 'stopped');
  assert.ok(!readFileSync(logFile, 'utf8').includes(API_KEY.slice(5)), 'the key is not logged');
});

for (const [kind, what] of [
  ['exception', 'an uncaught exception'],
  ['rejection', 'an unhandled rejection'],
] as const) {
  test(`${what} is logged and every line before it is written`, async () => {
    // 20 lines stay in the buffer; 20 000 (~1.3 MB) fill the pipe, which is
    // read only after a pause, so writes are still under way when it dies.
    for (const count of [20, 20_000]) {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'test/api/fixtures/fatal-exit.ts', kind, String(count)],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const chunks: Buffer[] = [];
      child.stdout.pause();
      child.stdout.on('data', (d: Buffer) => chunks.push(d));
      setTimeout(() => child.stdout.resume(), 500);
      const [code] = await Promise.all([
        new Promise<number | null>((resolve) => child.once('exit', resolve)),
        new Promise((resolve) => child.stdout.once('end', resolve)),
      ]);
      assert.equal(code, 1, stderr);
      const lines = Buffer.concat(chunks)
        .toString('utf8')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, any>);
      const numbered = lines.filter((l) => l.msg === 'line').map((l) => l.i);
      assert.deepEqual(
        numbered,
        Array.from({ length: count }, (_, i) => i),
      );
      const last = lines.at(-1) as Record<string, any>;
      assert.equal(last.level, 60);
      assert.equal(last.err.message, `boom: ${what}`);
    }
  });
}
