// The driver contract against real PostgreSQL: one driver and one small
// service for the whole file; cleanUpDataDir removes every cluster and OS
// user it made, whatever state a failure left them in.

import { test } from 'node:test';
import { createLocalDriver } from '../../src/drivers/local/local-driver.js';
import { cleanUpDataDir, makeDataDir, testUids } from '../local/helpers.js';
import { driverContract } from './driver-contract.js';

test('the local driver keeps the driver contract', async (t) => {
  const dataDir = makeDataDir();
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
  await driverContract(t, driver);
});
