// Basin's own log entries with the local driver: merged with PostgreSQL's
// real log lines, newest first, and shown alone for a service whose
// provisioning failed before it had a cluster.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DriverError, type ServiceSpec } from '../../src/drivers/driver.js';
import { LocalDriver } from '../../src/drivers/local/local-driver.js';
import type { Progress } from '../../src/domain/progress.js';
import { serviceNetwork } from '../e2e/basin-process.js';
import { claimPortBlock } from '../harness/port-block.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';
import { cleanUpDataDir, makeDataDir } from './helpers.js';

/** The local driver, failing the first applies of the next service created after `failNew` is set. */
class FlakyLocal extends LocalDriver {
  failNew: { retryable: boolean; message: string; times: number } | undefined;
  private readonly failing = new Map<
    string,
    { retryable: boolean; message: string; times: number }
  >();

  override async applyService(spec: ServiceSpec): Promise<Progress> {
    if (this.failNew && !this.failing.has(spec.serviceId)) {
      this.failing.set(spec.serviceId, this.failNew);
      this.failNew = undefined;
    }
    const f = this.failing.get(spec.serviceId);
    if (f && f.times > 0) {
      f.times--;
      throw new DriverError(f.message, f.retryable);
    }
    return super.applyService(spec);
  }
}

const url = (b: TestBasin, id = '') => `/v1/projects/${b.projectId}/services${id ? `/${id}` : ''}`;

async function create(b: TestBasin, name: string): Promise<string> {
  const res = await b.call('POST', url(b), {
    name,
    addons: [],
    cpu_millis: 'shared',
    memory_gbs: 'shared',
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body.service_id;
}

const status = (b: TestBasin, id: string, want: string) =>
  eventually(
    async () => (await b.call('GET', url(b, id))).body.status === want,
    `${id} ${want}`,
    120_000,
  );

test(
  "local driver: Basin's entries beside PostgreSQL's own, and alone before a cluster exists",
  { timeout: 300_000 },
  async (t) => {
    const dataDir = makeDataDir();
    // Ports and a service network of its own: another test's installation
    // may run beside it (its veths hold addresses of the default block).
    const block = await claimPortBlock();
    t.after(() => block.release());
    const driver = new FlakyLocal({
      dataDir,
      publicHost: 'localhost',
      serviceNetwork: serviceNetwork(block.claimed),
    });
    const b = await startBasin(t, {
      dataDir,
      env: { BASIN_DRIVER: 'local', BASIN_PORT_RANGE: block.portRange },
      options: { driver, engine: { retry: { baseMs: 20, capMs: 100, failAfter: 5 } } },
    });
    t.after(() => cleanUpDataDir(dataDir));

    // Fails for good before any cluster exists: the logs hold Basin's entry alone.
    const reason = 'the template cluster is damaged';
    driver.failNew = { retryable: false, message: reason, times: 1 };
    const never = await create(b, 'never');
    await status(b, never, 'UNSTABLE');
    const alone = await b.call('GET', `${url(b, never)}/logs`);
    assert.equal(alone.status, 200, JSON.stringify(alone.body));
    assert.deepEqual(
      alone.body.entries.map((e: { severity: string; message: string }) => [e.severity, e.message]),
      [['ERROR', `basin: provisioning failed: ${reason}`]],
    );
    assert.equal(alone.body.lastCursor, undefined);

    // Fails twice, then works: PostgreSQL's lines and Basin's, merged newest first.
    driver.failNew = { retryable: true, message: 'port briefly busy', times: 2 };
    const flaky = await create(b, 'flaky');
    await status(b, flaky, 'READY');
    const page = await eventually(
      async () => {
        const res = await b.call('GET', `${url(b, flaky)}/logs`);
        return (
          res.body.entries.some((e: { message: string }) => !e.message.startsWith('basin:')) &&
          res.body
        );
      },
      'PostgreSQL has written its log',
      30_000,
    );
    const entries: { timestamp: string; severity: string; message: string }[] = page.entries;
    for (let i = 1; i < entries.length; i++) {
      assert.ok(
        Date.parse(entries[i - 1]!.timestamp) >= Date.parse(entries[i]!.timestamp),
        'newest first',
      );
    }
    const ours = entries.filter((e) => e.message.startsWith('basin:'));
    assert.deepEqual(
      ours.map((e) => e.severity),
      ['LOG', 'WARNING', 'WARNING'],
    );
    assert.equal(ours[0]?.message, 'basin: provisioning succeeded after 2 failed attempts');
    assert.match(
      ours[2]?.message ?? '',
      /^basin: provisioning failed \(attempt 1\), retrying in \d+ ms: port briefly busy$/,
    );
    assert.ok(
      entries.some((e) => /ready to accept connections/.test(e.message)),
      "PostgreSQL's own start-up line is there",
    );
    // The filters hold across both: Basin's warnings only, then PostgreSQL's lines only.
    const warnings = await b.call('GET', `${url(b, flaky)}/logs?severities=WARNING&source=basin`);
    assert.deepEqual(
      warnings.body.entries.map((e: { message: string }) => e.message.slice(0, 42)),
      ['basin: provisioning failed (attempt 2), re', 'basin: provisioning failed (attempt 1), re'],
    );
    const ready = await b.call('GET', `${url(b, flaky)}/logs?search=ready%20to%20accept`);
    assert.ok(ready.body.entries.length > 0);
    assert.ok(
      ready.body.entries.every((e: { message: string }) => !e.message.startsWith('basin:')),
    );

    for (const id of [never, flaky]) {
      assert.equal((await b.call('DELETE', url(b, id))).status, 202);
    }
    for (const id of [never, flaky]) {
      await eventually(
        async () => (await b.call('GET', url(b, id))).status === 404,
        'gone',
        60_000,
      );
    }
  },
);
