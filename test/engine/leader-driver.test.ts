import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSimDriver } from '../../src/drivers/sim/sim-driver.js';
import { leaderDriver } from '../../src/engine/leader-driver.js';
import { NotLeaderError } from '../../src/engine/leadership.js';

test('the leader’s driver: acting calls ask the guard first; reads and watches go through', async () => {
  const sim = createSimDriver({ delayMs: 0, clock: () => 0 });
  let leads = true;
  let asked = 0;
  const driver = leaderDriver(sim, () => {
    asked++;
    return leads;
  });
  assert.equal(driver.name, 'sim');
  assert.deepEqual(driver.capabilities, sim.capabilities);
  assert.deepEqual(await driver.deleteService('s1'), await sim.deleteService('s1'));
  assert.equal(asked, 1);
  leads = false;
  await assert.rejects(driver.deleteService('s1'), NotLeaderError);
  await assert.rejects(driver.expireBackups('s1', 'label'), NotLeaderError);
  assert.equal(asked, 3);
  // Reads and registrations do not ask.
  assert.equal(driver.metrics({ kind: 'service', id: 's1' }), undefined);
  driver.watchPrimaries?.(() => undefined);
  assert.equal(asked, 3);
});
