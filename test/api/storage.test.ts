// Storage allowances as the API shows them (docs/decisions.md, Storage
// allowances), with the sim driver made to say what the local driver's
// storage watch says: the `storage` field beside the spec's, and, below the
// host's disk reserve, a 503 for what would put new data on it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Target } from '../../src/domain/logs.js';
import type { Metrics } from '../../src/domain/types.js';
import { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import { eventually, startBasin } from '../helpers.js';
import {
  assertError,
  createService,
  getService,
  readyService,
  servicesUrl,
  serviceUrl,
} from './service-helpers.js';

const MB = 1024 * 1024;

/** The sim, with a disk and a storage level the test sets. */
class DiskSim extends SimDriver {
  low = false;
  level: Metrics['storageLevel'] = 'readOnly';

  constructor() {
    super({ delayMs: 0 });
  }

  disk() {
    return { free: 900 * MB, reserve: 1024 * MB, low: this.low };
  }

  override metrics(target: Target): Metrics | undefined {
    const m = super.metrics(target);
    return m && { ...m, storageMb: 210.4, storageAllowanceMb: 200, storageLevel: this.level };
  }
}

test('the storage field: the allowance and the level, as the API spells it', async (t) => {
  const driver = new DiskSim();
  const b = await startBasin(t, { options: { driver } });
  const { id } = await readyService(b);
  const read = async () => (await getService(b, id)) as Record<string, any>;
  const body = await eventually(async () => {
    const seen = await read();
    return seen.metrics ? seen : undefined;
  }, 'the metrics');
  assert.deepEqual(body.storage, { allowance_mb: 200, state: 'read_only' });
  assert.equal(body.metrics.storage_mb, 210);
  driver.level = 'recovery';
  assert.equal((await read()).storage.state, 'recovery');
  driver.level = 'stopped';
  assert.equal((await read()).storage.state, 'stopped');
  driver.level = 'ok';
  assert.equal((await read()).storage.state, 'ok');
});

test('below the reserve: new services, forks and read replica sets answer 503, with why', async (t) => {
  const driver = new DiskSim();
  const b = await startBasin(t, { options: { driver } });
  const { id } = await readyService(b);
  driver.low = true;
  const why =
    /The host's disk has 900 MB free, below the 1024 MB it keeps in reserve: Basin makes no new/;
  assertError(await b.call('POST', servicesUrl(b), { name: 'x' }), 503, 'UNAVAILABLE', why);
  assertError(
    await b.call('POST', `${serviceUrl(b, id)}/forkService`, { fork_strategy: 'NOW' }),
    503,
    'UNAVAILABLE',
    /no new forks/,
  );
  assertError(
    await b.call('POST', `${serviceUrl(b, id)}/replicaSets`, {
      name: 'r',
      nodes: 1,
      cpu_millis: 500,
      memory_gbs: 2,
    }),
    503,
    'UNAVAILABLE',
    /no new read replica sets/,
  );
  // What is there goes on: a read, a stop.
  assert.equal((await b.call('GET', serviceUrl(b, id))).status, 200);
  assert.equal((await b.call('POST', `${serviceUrl(b, id)}/stop`)).status, 202);
  driver.low = false;
  await createService(b, { name: 'y' });
});
