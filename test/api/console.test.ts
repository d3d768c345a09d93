// The console's files as Basin serves them (src/api/console.ts): the page
// and its hashed assets with the Content-Security-Policy and caching, the
// catalogue and CA certificate beside them, nothing else of the build, and
// no console at all with --console off. The page itself is tested in a
// browser: test/e2e/console.test.ts.

import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Fastify from 'fastify';
import { CONSOLE_CSP, type ConsoleOptions, consoleRoutes } from '../../src/api/console.js';
import { registerErrorHandling } from '../../src/api/errors.js';
import { ConfigError, parseConfig } from '../../src/config.js';
import { startBasin, tempDir } from '../helpers.js';

const INSTALLATION: ConsoleOptions['installation'] = {
  regions: ['us-east-1', 'eu-west-1'],
  defaultRegion: 'us-east-1',
  sizes: ['shared', '500m/2GB'],
  pitrWindowMs: 3_600_000,
  driver: 'local',
};

async function consoleApp(t: import('node:test').TestContext, build = true, ca = true) {
  const dir = join(tempDir(t), 'console');
  if (build) {
    mkdirSync(join(dir, 'assets'), { recursive: true });
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>Basin console</title>');
    writeFileSync(join(dir, 'assets', 'index-AbC123.js'), 'console.log(1)');
    writeFileSync(join(dir, 'assets', 'index-AbC123.js.map'), '{}');
  }
  const caPath = join(tempDir(t), 'ca.crt');
  writeFileSync(caPath, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const app = Fastify();
  registerErrorHandling(app);
  consoleRoutes(app, { dir, installation: INSTALLATION, caCertificatePath: ca ? caPath : null });
  t.after(() => app.close());
  return app;
}

test('the page and its hashed assets carry the CSP, nosniff and their caching', async (t) => {
  const app = await consoleApp(t);
  const page = await app.inject({ url: '/' });
  assert.equal(page.statusCode, 200);
  assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(page.headers['content-security-policy'], CONSOLE_CSP);
  assert.match(CONSOLE_CSP, /^default-src 'self'; script-src 'self';/);
  assert.match(CONSOLE_CSP, /frame-ancestors 'none'/);
  assert.doesNotMatch(CONSOLE_CSP, /unsafe|\*|http/);
  assert.equal(page.headers['x-content-type-options'], 'nosniff');
  assert.equal(page.headers['x-frame-options'], 'DENY');
  assert.equal(page.headers['cache-control'], 'no-cache');
  assert.equal(page.body, '<!doctype html><title>Basin console</title>');

  const asset = await app.inject({ url: '/assets/index-AbC123.js' });
  assert.equal(asset.statusCode, 200);
  assert.equal(asset.headers['content-type'], 'text/javascript; charset=utf-8');
  assert.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.equal(asset.headers['content-security-policy'], CONSOLE_CSP);
  assert.equal(asset.body, 'console.log(1)');
});

test('nothing else of the build is served, and unknown assets are a 404 {code, message}', async (t) => {
  const app = await consoleApp(t);
  for (const url of [
    '/assets/index-AbC123.js.map',
    '/assets/nope.js',
    '/assets/../index.html',
    '/assets/%2e%2e/index.html',
    '/index.html',
  ]) {
    const res = await app.inject({ url });
    assert.equal(res.statusCode, 404, url);
    assert.equal(res.json().code, 'NOT_FOUND', url);
  }
});

test('the catalogue and the CA certificate are served beside the page', async (t) => {
  const app = await consoleApp(t);
  const cat = await app.inject({ url: '/console/installation.json' });
  assert.equal(cat.statusCode, 200);
  assert.deepEqual(cat.json(), INSTALLATION);
  const ca = await app.inject({ url: '/console/ca.crt' });
  assert.equal(ca.statusCode, 200);
  assert.equal(ca.headers['content-disposition'], 'attachment; filename="basin-ca.crt"');
  assert.match(ca.body, /^-----BEGIN CERTIFICATE-----/);

  const sim = await consoleApp(t, true, false);
  const none = await sim.inject({ url: '/console/ca.crt' });
  assert.equal(none.statusCode, 404);
  assert.equal(none.json().code, 'NOT_FOUND');
});

test('a console that was not built says so', async (t) => {
  const app = await consoleApp(t, false);
  const res = await app.inject({ url: '/' });
  assert.equal(res.statusCode, 404);
  assert.match(res.json().message, /npm run build/);
});

test('--console off: no console routes, the API as before', async (t) => {
  assert.equal(parseConfig([], {}).console, true);
  assert.equal(parseConfig(['--console', 'off'], {}).console, false);
  assert.equal(parseConfig([], { BASIN_CONSOLE: 'off' }).console, false);
  assert.throws(() => parseConfig(['--console', 'maybe'], {}), ConfigError);

  const off = await startBasin(t, { env: { BASIN_CONSOLE: 'off' } });
  for (const url of ['/', '/console/installation.json', '/console/ca.crt', '/assets/x.js']) {
    const res = await off.basin.app.inject({ url });
    assert.equal(res.statusCode, 404, url);
    assert.equal(res.json().message, `No route GET ${url}; see /v1/openapi.json.`);
  }
  const services = await off.call('GET', `/v1/projects/${off.projectId}/services`);
  assert.equal(services.status, 200);

  const on = await startBasin(t);
  const cat = await on.basin.app.inject({ url: '/console/installation.json' });
  assert.equal(cat.statusCode, 200);
  assert.equal(cat.json().driver, 'sim');
  assert.equal(cat.headers['content-security-policy'], CONSOLE_CSP);
});
