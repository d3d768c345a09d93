// The behaviour every driver owes the engine, run against each driver
// (driver.sim.test.ts, driver.local.test.ts): the engine must not be able to
// tell them apart except by speed.

import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { type Driver, type ServiceSpec } from '../../src/drivers/driver.js';
import { DONE } from '../../src/domain/progress.js';
import { InvalidCursorError } from '../../src/lib/cursor.js';
import { resourceId } from '../../src/lib/ids.js';
import { scramVerifier } from '../../src/lib/secrets.js';

export interface ContractSubject {
  driver: Driver;
  port(): Promise<number>;
}

export function serviceSpec(port: number, overrides: Partial<ServiceSpec> = {}): ServiceSpec {
  return {
    serviceId: resourceId(),
    projectId: 'p000000000',
    type: 'POSTGRES',
    vector: false,
    size: { shared: true, cpuMillis: 0, memoryGbs: 0 },
    environment: 'DEV',
    running: true,
    port,
    passwordVerifier: scramVerifier('contract-password'),
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
    ha: { replicaCount: 0, syncReplicaCount: 0 },
    source: { kind: 'empty' },
    createdAt: new Date().toISOString(),
    ...overrides,
  };
}

/** Calls `step` until it reports done, honouring its retry hints. */
export async function converge(
  step: () => Promise<{ done: boolean; retryAfterMs?: number }>,
  timeoutMs = 60_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const p = await step();
    if (p.done) return;
    if (Date.now() > deadline) throw new Error('driver did not converge in time');
    await new Promise((r) => setTimeout(r, Math.min(p.retryAfterMs ?? 50, 500)));
  }
}

export async function lifecycleContract(t: TestContext, s: ContractSubject): Promise<void> {
  const spec = serviceSpec(await s.port());
  await converge(() => s.driver.applyService(spec));
  assert.equal(await s.driver.inspectService(spec), 'running');
  assert.deepEqual(
    await s.driver.applyService(spec),
    DONE,
    'applying the same spec again is done at once',
  );

  const stopped = { ...spec, running: false };
  await converge(() => s.driver.applyService(stopped));
  assert.equal(await s.driver.inspectService(stopped), 'stopped');

  await converge(() => s.driver.applyService(spec));
  assert.equal(await s.driver.inspectService(spec), 'running');

  await t.test('logs are newest first and page with an opaque cursor', async () => {
    const target = { kind: 'service' as const, id: spec.serviceId };
    const page = await s.driver.readLogs(target, { severities: [], search: [], limit: 5 });
    assert.ok(page.entries.length > 0, 'a running service has logs');
    assert.ok(page.entries.length <= 5);
    for (let i = 1; i < page.entries.length; i++) {
      assert.ok(
        (page.entries[i - 1] as { timestamp: string }).timestamp >=
          (page.entries[i] as { timestamp: string }).timestamp,
      );
    }
    for (const e of page.entries) {
      assert.ok(!Number.isNaN(Date.parse(e.timestamp)));
      assert.match(e.severity, /^[A-Z0-9]+$/);
    }
    await assert.rejects(
      s.driver.readLogs(target, { severities: [], search: [], limit: 5, cursor: 'garbage' }),
      InvalidCursorError,
    );
  });

  await converge(() => s.driver.deleteService(spec.serviceId));
  assert.equal(await s.driver.inspectService(spec), 'missing');
  assert.deepEqual(await s.driver.deleteService(spec.serviceId), DONE, 'deleting twice is fine');
}
