// The driver contract against real PostgreSQL: one driver and one small
// service for the whole file; cleanUpDataDir removes every cluster and OS
// user it made, whatever state a failure left them in.

import { readFileSync, realpathSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver } from '../../src/drivers/local/local-driver.js';
import { cleanUpDataDir, makeDataDir, testUids } from '../local/helpers.js';
import { driverContract } from './driver-contract.js';

test('the local driver keeps the driver contract', async (t) => {
  const dataDir = makeDataDir({ sharedTemplate: true });
  const driver = createLocalDriver({
    ...testUids(),
    dataDir,
    publicHost: 'db.example.test',
    metricsIntervalMs: 100,
  });
  t.after(async () => {
    await driver.close();
    await cleanUpDataDir(dataDir);
  });
  await driver.start();
  await driverContract(t, driver, {
    // kill -9 of the recorded primary's postmaster.
    killPrimary: async (spec) => {
      const primary = spec.nodes.find((n) => n.role === 'primary')!;
      const layout = new Layout(realpathSync(dataDir));
      const pgdata = layout.pgdata({ id: spec.serviceId, node: primary.index });
      process.kill(
        Number(readFileSync(`${pgdata}/postmaster.pid`, 'utf8').split('\n')[0]),
        'SIGKILL',
      );
    },
  });
});
