import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSimDriver } from '../../src/drivers/sim/sim-driver.js';
import { driverContract } from './driver-contract.js';

test('the sim driver keeps the driver contract', async (t) => {
  const driver = createSimDriver({ delayMs: 20 });
  await driver.start();
  t.after(() => driver.close());
  await driverContract(t, driver, {
    killPrimary: async (spec) => assert.ok(driver.killPrimary(spec.serviceId)),
  });
});
