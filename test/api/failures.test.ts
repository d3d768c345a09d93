// Failures seen through the API: a service whose provisioning fails ends
// UNSTABLE with the reason in its logs, the engine stops calling the driver,
// and a user's request is what tries again; retries are written into the
// logs without flooding them; delete always works.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DriverError, type ReplicaSetSpec, type ServiceSpec } from '../../src/drivers/driver.js';
import { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import type { Progress } from '../../src/domain/progress.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';
import {
  createService,
  readyService,
  serviceUrl,
  waitForStatus,
  waitGone,
} from './service-helpers.js';

interface Failure {
  retryable: boolean;
  message: string;
  /** Fails this many times, then works; always when absent. */
  times?: number;
}

/**
 * The sim, with failures on demand: the next service or replica set first
 * applied after `failNew` is set gets that failure. Counts the driver calls.
 */
class FailingSim extends SimDriver {
  failNew: Failure | undefined;
  readonly failing = new Map<string, Failure>();
  readonly applied = new Map<string, number>();
  readonly inspected = new Map<string, number>();

  constructor() {
    super({ delayMs: 0 });
  }

  override async applyService(spec: ServiceSpec): Promise<Progress> {
    this.fail(spec.serviceId);
    return super.applyService(spec);
  }

  override async applyReplicaSet(spec: ReplicaSetSpec): Promise<Progress> {
    this.fail(spec.replicaSetId);
    return super.applyReplicaSet(spec);
  }

  override async inspectService(spec: ServiceSpec) {
    this.inspected.set(spec.serviceId, (this.inspected.get(spec.serviceId) ?? 0) + 1);
    return super.inspectService(spec);
  }

  calls(id: string): number {
    return this.applied.get(id) ?? 0;
  }

  private fail(id: string): void {
    const n = this.calls(id) + 1;
    this.applied.set(id, n);
    if (n === 1 && this.failNew) {
      this.failing.set(id, this.failNew);
      this.failNew = undefined;
    }
    const f = this.failing.get(id);
    if (f && (f.times === undefined || n <= f.times)) throw new DriverError(f.message, f.retryable);
  }
}

const logsUrl = (b: TestBasin, id: string, query = '') =>
  `${serviceUrl(b, id)}/logs${query ? `?${query}` : ''}`;

async function logs(b: TestBasin, id: string, query = ''): Promise<any[]> {
  const res = await b.call('GET', logsUrl(b, id, query));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.entries;
}

const basinEntries = async (b: TestBasin, id: string) =>
  (await logs(b, id, 'source=basin')).map((e) => [e.severity, e.message]);

/** Waits for `rounds` more reconcile rounds, seen as inspections of a READY service. */
async function reconcileRounds(b: TestBasin, driver: FailingSim, readyId: string, rounds: number) {
  const start = driver.inspected.get(readyId) ?? 0;
  await eventually(
    async () => (driver.inspected.get(readyId) ?? 0) >= start + rounds,
    `${rounds} reconcile rounds`,
  );
}

test('a create that fails for good: UNSTABLE, the reason in its logs, no more driver calls; start tries again', async (t) => {
  const driver = new FailingSim();
  const b = await startBasin(t, {
    env: { BASIN_RECONCILE_INTERVAL_MS: '100' },
    options: { driver },
  });
  const healthy = await readyService(b, { name: 'healthy' });
  const reason = 'initdb: could not create directory "pgdata": No space left on device';
  driver.failNew = { retryable: false, message: reason };
  const { service_id: id } = await createService(b, { name: 'doomed' });
  await waitForStatus(b, id, 'UNSTABLE');

  // Newest first: Basin's entry, then the database's own (the sim's synthetic history).
  const entries = await logs(b, id);
  assert.deepEqual(entries[0], {
    timestamp: entries[0].timestamp,
    severity: 'ERROR',
    message: `basin: provisioning failed: ${reason}`,
    source: 'basin',
  });
  assert.ok(entries.length > 1, 'merged with the driver entries');
  assert.ok(entries.slice(1).every((e) => e.source === 'database'));
  assert.ok(Date.now() - Date.parse(entries[0].timestamp) < 60_000);
  // Every filter applies to Basin's entries too.
  assert.deepEqual(await basinEntries(b, id), [['ERROR', `basin: provisioning failed: ${reason}`]]);
  const errors = await logs(b, id, 'severities=ERROR&search=no%20space&search=BASIN');
  assert.deepEqual(
    errors.map((e) => e.message),
    [`basin: provisioning failed: ${reason}`],
  );
  assert.deepEqual(await logs(b, id, 'severities=WARNING&source=basin'), []);
  const after = encodeURIComponent(entries[0].timestamp);
  assert.deepEqual(await logs(b, id, `since=${after}&source=basin`), []);
  assert.equal((await logs(b, id, `until=${after}&source=basin`)).length, 0);

  // The engine leaves it alone: reconcile rounds go by, the driver is not called again.
  await reconcileRounds(b, driver, healthy.id, 3);
  assert.equal(driver.calls(id), 1);
  assert.deepEqual(await b.basin.store.operations.listPending(), []);
  assert.equal((await b.call('GET', serviceUrl(b, id))).body.status, 'UNSTABLE');

  // The user tries again: start is accepted from UNSTABLE.
  driver.failing.delete(id);
  const start = await b.call('POST', `${serviceUrl(b, id)}/start`);
  assert.equal(start.status, 202, JSON.stringify(start.body));
  assert.equal(start.body.status, 'RESUMING');
  await waitForStatus(b, id, 'READY');
  assert.equal(driver.calls(id), 2);
  // The failure stays readable in the history.
  assert.deepEqual(await basinEntries(b, id), [['ERROR', `basin: provisioning failed: ${reason}`]]);
});

test('a failed service can always be deleted, and its entries go with it', async (t) => {
  const driver = new FailingSim();
  const b = await startBasin(t, { options: { driver } });
  driver.failNew = { retryable: false, message: 'the template is damaged' };
  const { service_id: id } = await createService(b, { name: 'doomed' });
  await waitForStatus(b, id, 'UNSTABLE');
  assert.equal((await b.call('DELETE', serviceUrl(b, id))).status, 202);
  await waitGone(b, id);
  const left = await b.basin.store.events.list('service', id, {
    node: 0,
    severities: [],
    search: [],
    limit: 10,
  });
  assert.deepEqual(left, []);
});

test('retryable failures: retried with backoff, written into the logs without flooding, READY once it works', async (t) => {
  const driver = new FailingSim();
  const b = await startBasin(t, {
    options: { driver, engine: { retry: { baseMs: 5, capMs: 40, failAfter: 3 } } },
  });
  const message = 'could not bind to port 16001: address already in use';
  driver.failNew = { retryable: true, message, times: 6 };
  const { service_id: id } = await createService(b, { name: 'flaky' });
  await waitForStatus(b, id, 'READY');
  assert.equal(driver.calls(id), 7);
  const retry = (n: number) =>
    new RegExp(`^basin: provisioning failed \\(attempt ${n}\\), retrying in \\d+ ms: ${message}$`);
  const written = await basinEntries(b, id);
  assert.deepEqual(
    written.map(([severity]) => severity),
    ['LOG', 'ERROR', 'ERROR', 'WARNING', 'WARNING'],
  );
  assert.equal(written[0]?.[1], 'basin: provisioning succeeded after 6 failed attempts');
  // Attempts 1, 2, 3 (it was marked UNSTABLE then) and 4 (a doubling); not 5 or 6.
  [4, 3, 2, 1].forEach((n, i) => assert.match(written[i + 1]?.[1], retry(n)));
});

test('a replica set whose creation fails for good: error, the reason in its logs; resize tries again', async (t) => {
  const driver = new FailingSim();
  const b = await startBasin(t, { options: { driver } });
  const svc = await readyService(b, { name: 'primary' });
  driver.failNew = { retryable: false, message: 'no replication slot left' };
  const sets = `${serviceUrl(b, svc.id)}/replicaSets`;
  const rs = await b.call('POST', sets, { name: 'r', nodes: 1, cpu_millis: 1000, memory_gbs: 4 });
  assert.equal(rs.status, 202, JSON.stringify(rs.body));
  const status = async () =>
    (await b.call('GET', sets)).body.find((r: { id: string }) => r.id === rs.body.id)?.status;
  await eventually(async () => (await status()) === 'error', 'replica set error');
  // Read as a service, it is UNSTABLE, and its logs say why.
  assert.equal((await b.call('GET', serviceUrl(b, rs.body.id))).body.status, 'UNSTABLE');
  // The creation's failure; maybe also that of the converge its service's
  // converge queues once READY (a set in error follows its service too).
  const entries = await basinEntries(b, rs.body.id);
  assert.deepEqual(entries.at(-1), ['ERROR', 'basin: creating failed: no replication slot left']);
  for (const e of entries) {
    assert.match(e[1], /^basin: (creating|repairing) failed: no replication slot left$/);
  }
  driver.failing.delete(rs.body.id);
  const resize = await b.call('POST', `${sets}/${rs.body.id}/resize`, {
    cpu_millis: '2000',
    memory_gbs: '8',
  });
  assert.equal(resize.status, 202, JSON.stringify(resize.body));
  await eventually(async () => (await status()) === 'active', 'replica set active');
});
