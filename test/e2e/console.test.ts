// The web console in a real browser: Debian's Chromium driven by
// playwright-core (no browser download), against `node dist/main.js` on the
// local driver, as a person would use it: sign in (a wrong key first),
// create a service, see it reach READY, copy its psql line and connect with
// it (sslmode=verify-full against the CA certificate the page downloads),
// rename it and tag it PROD, fork it (NOW: the fork holds the parent's
// rows, with a password of its own), read its logs, make and delete a VPC,
// delete it. Every page is checked with axe-core (no serious
// or critical violation) and at 390 px wide (nothing wider than the
// screen), and photographed into a folder the test prints. The browser may
// reach nothing but Basin, and the page must run without a single console
// error: a script or style the Content-Security-Policy blocked would show
// there.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { installation } from './basin-process.js';

const run = promisify(execFile);
const CHROMIUM = '/usr/bin/chromium';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const NAME = 'console-e2e';
const RENAMED = 'console-e2e-renamed';

test(
  'the console: sign in, create, READY, psql, fork, logs, delete, in Chromium',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    // Samples every second, so that the charts have some within the test.
    const b = await inst.start({ args: ['--series-interval-ms', '1000'] });
    const origin = b.url.replace(/\/v1$/, '');
    const shots = mkdtempSync(join(tmpdir(), 'basin-console-shots-'));
    const downloads = mkdtempSync(join(tmpdir(), 'basin-console-downloads-'));
    t.after(() => rmSync(downloads, { recursive: true, force: true }));
    // Kept for a person to look at when the test fails; removed when it passes.
    let passed = false;
    t.after(() => {
      if (passed) rmSync(shots, { recursive: true, force: true });
    });
    t.diagnostic(`screenshots in ${shots} (removed if the test passes)`);

    assert.ok(existsSync(CHROMIUM), `no ${CHROMIUM}: npm run setup installs Debian's chromium`);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      // Root (CI, this machine) cannot use Chromium's user-namespace sandbox.
      args: ['--no-sandbox'],
    });
    t.after(() => browser.close());
    const context = await browser.newContext({ acceptDownloads: true });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    // Nothing but Basin: every other request is refused and remembered.
    const foreign: string[] = [];
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (new URL(url).origin === origin) return route.continue();
      foreign.push(url);
      return route.abort();
    });
    const page = await context.newPage();

    // The service's page shows READY (a locator, not waitForFunction: the
    // page's CSP refuses the eval that would take); when it does not, what
    // the API says of the service and what Basin said last.
    const shownReady = (serviceId: string) =>
      page
        .locator('.facts .badge', { hasText: /^READY$/ })
        .waitFor({ timeout: 240_000 })
        .catch(async (err: Error) => {
          const now = await b.call('GET', b.servicePath(serviceId));
          throw new Error(
            `${err.message}\nGET: ${now.status} ${now.text}\nBasin said:\n${b.tail()}`,
          );
        });
    const errors: string[] = [];
    page.on('console', (m) => {
      // Chromium logs every 4xx answer; the wrong key's 401 and the deleted
      // service's 404 are answers the page handles. Anything else counts.
      const answered = /^Failed to load resource: .* status of 40[14] /.test(m.text());
      if (m.type() === 'error' && !answered) errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    let shot = 0;
    const checkPage = async (name: string) => {
      await accessible(page, name);
      await page.screenshot({
        path: join(shots, `${String(++shot).padStart(2, '0')}-${name}.png`),
        fullPage: true,
      });
    };

    // Sign in. How soon the form can be used is measured, not asserted.
    const started = performance.now();
    const first = await page.goto(`${origin}/`);
    assert.equal(first?.status(), 200);
    const csp = first?.headers()['content-security-policy'] ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(first?.headers()['x-content-type-options'], 'nosniff');
    const keyField = page.getByLabel('API key');
    await keyField.waitFor();
    const interactiveMs = Math.round(performance.now() - started);
    const domInteractive: number = await page.evaluate(
      "performance.getEntriesByType('navigation')[0].domInteractive",
    );
    t.diagnostic(
      `sign-in form usable ${interactiveMs} ms after navigation (domInteractive ${Math.round(domInteractive)} ms)`,
    );
    await checkPage('sign-in');

    await keyField.fill('bsn_not-a-key-of-this-installation');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const refused = page.getByRole('alert');
    await refused.waitFor();
    assert.match(await refused.innerText(), /^UNAUTHORIZED: \S/);
    await checkPage('sign-in-refused');

    await keyField.fill(b.bearerKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Services' }).waitFor();
    // Page code, as text: the tests are type-checked without the DOM's types.
    const stored = await page.evaluate(
      "({ session: sessionStorage.getItem('basin.apiKey'), local: localStorage.length, cookies: document.cookie })",
    );
    assert.deepEqual(stored, { session: b.bearerKey, local: 0, cookies: '' });
    await page.getByText('No services yet.').waitFor();
    await checkPage('services-empty');

    // Create, with the installation's default size and region.
    await page.getByRole('link', { name: 'Create service' }).click();
    await page.getByLabel('Name').fill(NAME);
    await page.getByLabel('Type').selectOption('POSTGRES');
    await page.locator('#size option', { hasText: '500m/2GB' }).waitFor({ state: 'attached' });
    const sizes = await page.getByLabel('Size').locator('option').allInnerTexts();
    assert.ok(sizes.includes('500m/2GB') && sizes.includes('shared'), sizes.join(', '));
    await checkPage('create');
    await page.getByRole('button', { name: 'Create service' }).click();
    await page.getByRole('heading', { name: 'Service created' }).waitFor();
    const password = await page.getByRole('textbox', { name: 'Initial password' }).inputValue();
    assert.ok(password.length >= 16, 'the initial password is shown');
    await checkPage('created');

    // The service's page follows it to READY.
    await page.getByRole('link', { name: `Open ${NAME}` }).click();
    await page.getByRole('heading', { name: NAME }).waitFor();
    const id = (await page.locator('.facts dd.mono').first().innerText()).trim();
    const listed = await b.call('GET', b.servicePath(id));
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.body.service_type, 'POSTGRES');
    await shownReady(id);
    await checkPage('service-ready');

    // Copy the psql line, download the CA next to where psql runs, connect.
    await page.getByRole('button', { name: 'Copy psql' }).click();
    const copied: string = await page.evaluate('navigator.clipboard.readText()');
    assert.equal(
      copied,
      await page.getByRole('textbox', { name: 'psql', exact: true }).inputValue(),
    );
    const download = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download CA certificate' }).click();
    const ca = await download;
    assert.equal(ca.suggestedFilename(), 'basin-ca.crt');
    await ca.saveAs(join(downloads, ca.suggestedFilename()));
    const conn = /^psql "(.+)"$/.exec(copied)?.[1];
    assert.ok(conn?.includes('sslmode=verify-full'), copied);
    const sql = async (query: string) =>
      (
        await run('psql', [conn as string, '-XAtq', '-c', query], {
          cwd: downloads,
          env: { PATH: process.env.PATH, PGPASSWORD: password, PGCONNECT_TIMEOUT: '10' },
        }).catch((err: { stderr?: string }) => {
          throw new Error(`psql failed: ${err.stderr}`);
        })
      ).stdout.trim();
    assert.equal(await sql('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()'), 't');

    // The charts read the metrics series API: the storage series has samples
    // (each range asks again: the buttons switch between them).
    const storage = page.locator('figcaption', { hasText: /^Storage: [\d.]+ MB \(latest\)$/ });
    for (let i = 0; i < 30 && (await storage.count()) === 0; i++) {
      await page.getByRole('button', { name: i % 2 ? 'Last hour' : 'Last day' }).click();
      await page.waitForTimeout(1000);
    }
    assert.equal(await storage.count(), 1, 'the storage chart shows a sampled value');
    // An error of our own, for the logs page to find.
    await assert.rejects(sql("SELECT 'console-e2e-marker'::int"), /invalid input syntax/);

    // Settings that need no restart: rename, environment; and the PITR picker's bounds.
    await page.getByLabel('New name').fill(RENAMED);
    await page.getByRole('button', { name: 'Rename', exact: true }).click();
    await page.getByRole('heading', { name: RENAMED }).waitFor();
    await page.getByRole('button', { name: 'PROD' }).click();
    await page.getByText('Environment set to PROD.').waitFor();
    const renamed = await b.call('GET', b.servicePath(id));
    assert.equal(renamed.body.name, RENAMED);
    assert.equal(renamed.body.metadata.environment, 'PROD');
    await page.getByLabel('A point in time').check();
    const picker = page.getByLabel('Point in time (your local time)');
    const [min, max] = [await picker.getAttribute('min'), await picker.getAttribute('max')];
    assert.ok(min && max && min <= max, `the recovery window ${min} … ${max}`);

    // A NOW fork, from the page: it holds what the parent held, with its own password.
    await sql("CREATE TABLE fork_marker AS SELECT 'from-the-parent' AS v");
    await page.getByLabel('Now (a copy of the running service)').check();
    await page.getByLabel('Name of the fork (optional)').fill('console-fork');
    await page.getByRole('button', { name: 'Fork service' }).click();
    const forkPassword = await page
      .getByRole('textbox', { name: "Fork's initial password" })
      .inputValue();
    assert.ok(forkPassword.length >= 16 && forkPassword !== password, 'its own password, shown');
    await checkPage('forked');
    await page.getByRole('link', { name: 'console-fork' }).click();
    await page.getByRole('heading', { name: 'console-fork' }).waitFor();
    const forkId = (await page.locator('.facts dd.mono').first().innerText()).trim();
    assert.notEqual(forkId, id);
    await shownReady(forkId);
    const forkConn = /^psql "(.+)"$/.exec(
      await page.getByRole('textbox', { name: 'psql', exact: true }).inputValue(),
    )?.[1];
    assert.ok(forkConn && forkConn !== conn, 'the fork has an endpoint of its own');
    const fromFork = await run('psql', [forkConn, '-XAtq', '-c', 'SELECT v FROM fork_marker'], {
      cwd: downloads,
      env: { PATH: process.env.PATH, PGPASSWORD: forkPassword, PGCONNECT_TIMEOUT: '10' },
    });
    assert.equal(fromFork.stdout.trim(), 'from-the-parent');
    assert.equal((await b.call('DELETE', b.servicePath(forkId))).status, 202);
    await b.waitGone(forkId);
    await page.goto(`${origin}/#/services/${id}`);
    await page.getByRole('heading', { name: RENAMED }).waitFor();

    // Logs: filtered to ERROR and the marker, followed until it shows.
    await page.getByRole('link', { name: 'Logs' }).click();
    await page.getByRole('heading', { name: 'Logs' }).waitFor();
    await page.locator('table.logs tbody tr').first().waitFor();
    await checkPage('logs');
    await page.getByLabel('Severity').selectOption('ERROR');
    await page.getByLabel('Search').fill('console-e2e-marker');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByLabel('Follow').check();
    // aria-busy: the table still shows the entries of the filters before.
    const marker = page
      .locator('table.logs:not([aria-busy="true"]) tbody tr', { hasText: 'console-e2e-marker' })
      .first();
    await marker.waitFor({ timeout: 60_000 });
    assert.match(await marker.innerText(), /ERROR/);
    assert.equal(
      await page.locator('table.logs tbody tr').filter({ hasNotText: 'ERROR' }).count(),
      0,
      'only ERROR entries under the ERROR filter',
    );
    await checkPage('logs-filtered');

    // VPCs: one made, opened and deleted.
    await page.getByRole('link', { name: 'VPCs' }).click();
    await page.getByRole('heading', { name: 'VPCs' }).waitFor();
    await page.getByLabel('Name').fill('console-vpc');
    await page.getByLabel(/^CIDR/).fill('10.42.0.0/16');
    await page.getByRole('button', { name: 'Create VPC' }).click();
    await page.getByRole('link', { name: 'console-vpc' }).click();
    await page.getByRole('heading', { name: 'VPC console-vpc' }).waitFor();
    const vpcId = (await page.locator('.facts dd.mono').first().innerText()).trim();
    await checkPage('vpc');

    // 390 px wide: every page fits the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [name, hash] of [
      ['services', '#/'],
      ['create', '#/create'],
      ['service', `#/services/${id}`],
      ['logs', `#/services/${id}/logs`],
      ['vpcs', '#/vpcs'],
      ['vpc', `#/vpcs/${vpcId}`],
    ] as const) {
      await page.goto(`${origin}/${hash}`);
      await page.locator('h1').first().waitFor();
      const width: number = await page.evaluate('document.documentElement.scrollWidth');
      assert.ok(width <= 390, `${name} is ${width} px wide at 390 px`);
      await checkPage(`narrow-${name}`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByRole('button', { name: 'Delete VPC' }).click();
    await page.getByText('No VPCs yet.').waitFor();
    assert.equal((await b.call('GET', `/projects/${b.projectId}/vpcs/${vpcId}`)).status, 404);

    // Delete, behind the name.
    await page.goto(`${origin}/#/services/${id}`);
    await page.getByRole('button', { name: 'Delete service' }).click();
    const confirm = page.getByRole('button', { name: `Delete ${RENAMED}` });
    assert.equal(await confirm.isDisabled(), true, 'not before the name is typed');
    await page.getByLabel('Service name').fill(RENAMED);
    await checkPage('delete-confirm');
    await confirm.click();
    await page.getByRole('heading', { name: 'Services' }).waitFor({ timeout: 120_000 });
    await page.getByText('No services yet.').waitFor({ timeout: 30_000 });
    await b.waitGone(id);
    await checkPage('services-after-delete');

    assert.deepEqual(foreign, [], 'no request leaves for anywhere but Basin');
    assert.deepEqual(errors, [], 'no console errors (a CSP violation would be one)');

    // Last, as they log violations: the page's policy refuses eval and inline script.
    // Playwright's predicates given as text are evaluated with eval inside the page.
    await assert.rejects(
      page.waitForFunction('window.never === true', undefined, { timeout: 10_000, polling: 100 }),
      /violates the following Content Security Policy directive/,
    );
    assert.equal(
      await page.evaluate(
        "(() => { const s = document.createElement('script'); s.textContent = 'window.inlineRan = true'; document.head.append(s); return window.inlineRan === true ? 'ran' : 'refused'; })()",
      ),
      'refused',
    );
    passed = true;
  },
);

/** axe-core on the page as it is: no serious or critical violation. */
async function accessible(page: Page, name: string): Promise<void> {
  // Evaluated by the DevTools protocol, which the page's CSP does not govern.
  await page.evaluate(AXE);
  const violations: string[] = await page.evaluate(`axe.run().then((r) =>
    r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => v.id + ' (' + v.impact + '): ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`);
  assert.deepEqual(violations, [], `axe on ${name}`);
}
