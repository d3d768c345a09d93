// The console's services table with 1,000 services (issue 24: usable with
// 1,000): a sim installation, as the table does not depend on the driver,
// filled through the API; in Chromium the table shows 50 rows a page, pages
// on, and filters to one. How long the first page of the table took to show
// is printed, not asserted.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import { installation } from './basin-process.js';

const COUNT = 1000;
const CHROMIUM = '/usr/bin/chromium';

test(
  'the services table with 1,000 services: pages of 50, paging, filter',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t, {
      driver: 'sim',
      env: { BASIN_SIM_DELAY_MS: '0', BASIN_RATE_LIMIT_WRITES: '0' },
      // The sim's endpoints are only numbers (it binds nothing): room for 1,000.
      args: ['--port-range', '1024-65535'],
    });
    const b = await inst.start();
    const origin = b.url.replace(/\/v1$/, '');
    const names = Array.from({ length: COUNT }, (_, i) => `svc-${String(i).padStart(4, '0')}`);
    for (let i = 0; i < names.length; i += 50) {
      await Promise.all(
        names.slice(i, i + 50).map(async (name) => {
          const res = await b.call('POST', b.servicePath(), { name, addons: [] });
          assert.equal(res.status, 202, res.text);
        }),
      );
    }

    assert.ok(existsSync(CHROMIUM), `no ${CHROMIUM}: npm run setup installs Debian's chromium`);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox'],
    });
    t.after(() => browser.close());
    const page = await browser.newPage();
    await page.goto(`${origin}/`);
    await page.getByLabel('API key').fill(b.bearerKey);
    const started = performance.now();
    await page.getByRole('button', { name: 'Sign in' }).click();
    const pager = page.getByText(/^Page \d+ of \d+ \(\d+ services\)$/);
    await pager.waitFor();
    t.diagnostic(
      `the first page of ${COUNT} services shown ${Math.round(performance.now() - started)} ms after Sign in`,
    );
    assert.equal(await pager.innerText(), `Page 1 of 20 (${COUNT} services)`);
    const rows = page.locator('table tbody tr');
    assert.equal(await rows.count(), 50);
    // The API lists in its own order (the creates ran 50 at a time): compare sets.
    const namesShown = async () => (await rows.locator('td:first-child').allInnerTexts()).sort();
    const first = await namesShown();
    assert.equal(new Set(first).size, 50);

    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText(`Page 2 of 20 (${COUNT} services)`).waitFor();
    const second = await namesShown();
    assert.equal(second.filter((n) => !first.includes(n)).length, 50, 'page 2 is 50 others');

    await page.getByLabel('Filter by name or id').fill('svc-0999');
    await page.getByText('Page 1 of 1 (1 services)').waitFor();
    assert.equal(await rows.count(), 1);
    assert.equal(await rows.first().locator('td').first().innerText(), 'svc-0999');
  },
);
