// A host's frontends of services deleted while it could not be told
// (src/agent/stale-services.ts gone): removed through the driver, as a
// delete would, unless the control plane called about the service after
// the heartbeat it answered was sent.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { localEndpoints, StaleServices } from '../../src/agent/stale-services.js';
import type { Driver } from '../../src/drivers/driver.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { DONE } from '../../src/domain/progress.js';
import { silentLogger } from '../../src/lib/logger.js';
import { until } from '../cluster/cluster.js';

test('frontends the control plane says are gone are removed; one called about since the heartbeat is kept', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stale-frontends-'));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const layout = new Layout(dataDir);
  mkdirSync(layout.haproxyServicesDir, { recursive: true });
  for (const id of ['gone000001', 'gone000002', 'kept000001', 'stats']) {
    writeFileSync(join(layout.haproxyServicesDir, `${id}.cfg`), '');
  }
  writeFileSync(join(layout.haproxyServicesDir, 'README'), '');
  assert.deepEqual((await localEndpoints(layout)).sort(), ['gone000001', 'gone000002', 'kept000001', 'stats']); // prettier-ignore

  const deleted: string[] = [];
  const driver = {
    deleteService: async (id: string) => {
      deleted.push(id);
      return DONE;
    },
  } as unknown as Driver;
  const stale = new StaleServices({ dataDir, uidRange: { min: 1, max: 2 }, log: silentLogger });
  stale.useDriver(driver);
  t.after(() => stale.close());

  const sentAt = Date.now() - 1000;
  stale.called('gone000002'); // a call after the heartbeat was sent: its answer may be stale
  // Named by the answer but not a frontend here (another host's): nothing.
  const removed = await stale.gone(['gone000001', 'gone000002', 'elsewhere1'], sentAt);
  assert.deepEqual(removed, ['gone000001']);
  await until(async () => deleted.length === 1, 10_000);
  assert.deepEqual(deleted, ['gone000001']);
});
