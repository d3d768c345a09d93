// Failover and switchover as the engine runs them (engine/failover.ts), on
// the sim driver through the API: a READY service with a synchronous HA
// replica whose primary dies is UNSTABLE, records its standby as the
// primary, says each step in its logs and is READY again; a switchover
// moves the primary back; nodes are recorded state throughout.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { primaryOf } from '../../src/domain/service-nodes.js';
import type { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import { switchover } from '../../src/engine/failover.js';
import { systemClock } from '../../src/lib/clock.js';
import { eventually, startBasin } from '../helpers.js';
import { serviceUrl, servicesUrl, waitForStatus } from './service-helpers.js';

test('a dead primary fails over to its synchronous standby; a switchover moves it back', async (t) => {
  const b = await startBasin(t, {
    env: { BASIN_SIM_DELAY_MS: '50', BASIN_RECONCILE_INTERVAL_MS: '100' },
  });
  const created = await b.call('POST', servicesUrl(b), { name: 'ha', replica_count: 1 });
  assert.equal(created.status, 202);
  const id: string = created.body.service_id;
  await waitForStatus(b, id, 'READY');
  assert.equal(
    (await b.call('POST', `${serviceUrl(b, id)}/setHA`, { sync_replica_count: 1 })).status,
    202,
  );
  await waitForStatus(b, id, 'READY');
  await b.basin.engine.idle();
  const before = await b.basin.store.services.get(id);
  assert.deepEqual(
    before?.nodes?.map((n) => [n.index, n.role, n.observed?.actsAs]),
    [
      [0, 'primary', 'primary'],
      [1, 'standby', 'standby'],
    ],
  );

  assert.ok((b.basin.driver as SimDriver).killPrimary(id));
  await eventually(async () => {
    const svc = await b.basin.store.services.get(id);
    return svc && primaryOf(svc).index === 1 && svc.status === 'READY';
  }, 'node1 recorded as the primary, READY again');
  const logs = (await b.call('GET', `${serviceUrl(b, id)}/logs?source=basin`)).body
    .logs as string[];
  for (const step of [
    /basin: the primary node0 stopped; failing over/,
    /basin: the primary node0 is down; it is fenced/,
    /basin: promoting node1, the most advanced synchronous standby/,
    /basin: READY again: node1 is the primary/,
  ]) {
    assert.ok(
      logs.some((l) => step.test(l)),
      `${step}: ${logs.join('\n')}`,
    );
  }

  // `node` counts from the primary, whichever node it is now.
  assert.equal((await b.call('GET', `${serviceUrl(b, id)}/logs?node=1`)).status, 200);
  assert.equal((await b.call('GET', `${serviceUrl(b, id)}/logs?node=2`)).status, 400);

  const deps = { store: b.basin.store, driver: b.basin.driver, clock: systemClock } as Parameters<
    typeof switchover
  >[0];
  assert.equal(await switchover(deps, id, 1), false, 'node1 is the primary already');
  assert.equal(await switchover(deps, id, 0), true);
  b.basin.engine.kick();
  await eventually(async () => {
    const svc = await b.basin.store.services.get(id);
    return svc && primaryOf(svc).index === 0 && svc.status === 'READY';
  }, 'node0 the primary again');
  await b.basin.engine.idle();
  const after = await b.basin.store.services.get(id);
  assert.deepEqual(
    after?.nodes?.map((n) => [n.index, n.role]),
    [
      [0, 'primary'],
      [1, 'standby'],
    ],
  );
});

test('a hung primary: each unanswered check is logged, then it is fenced and failed over', async (t) => {
  const b = await startBasin(t, {
    env: { BASIN_SIM_DELAY_MS: '50', BASIN_RECONCILE_INTERVAL_MS: '100' },
  });
  const created = await b.call('POST', servicesUrl(b), { name: 'ha', replica_count: 1 });
  assert.equal(created.status, 202);
  const id: string = created.body.service_id;
  await waitForStatus(b, id, 'READY');
  await b.basin.engine.idle();

  assert.ok((b.basin.driver as SimDriver).hangPrimary(id));
  await eventually(async () => {
    const svc = await b.basin.store.services.get(id);
    return svc && primaryOf(svc).index === 1 && svc.status === 'READY';
  }, 'node1 recorded as the primary, READY again');
  const logs = (await b.call('GET', `${serviceUrl(b, id)}/logs?source=basin`)).body
    .logs as string[];
  // Newest first: the steps in the order they happened, read backwards.
  const steps = [
    /basin: the primary node0 did not answer a health check within 1\.5 s \(1 in a row; at 3 it is taken for hung/,
    /basin: the primary node0 did not answer a health check within 1\.5 s \(2 in a row/,
    /basin: the primary node0 runs but did not answer 3 health checks in a row \(1\.5 s each\); it is taken for hung: fenced/,
    /basin: the primary node0 is down; it is fenced/,
    /basin: promoting node1, an asynchronous standby/,
    /basin: READY again: node1 is the primary/,
  ];
  const at = steps.map((step) => logs.findIndex((l) => step.test(l)));
  assert.ok(
    at.every((i) => i >= 0),
    `${JSON.stringify(at)}: ${logs.join('\n')}`,
  );
  assert.deepEqual(
    [...at].sort((x, y) => y - x),
    at,
    `in order: ${logs.join('\n')}`,
  );
});
