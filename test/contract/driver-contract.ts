// The behaviour every driver owes the engine, run against each driver
// (driver.sim.test.ts, driver.local.test.ts): the engine must not be able to
// tell them apart except by speed and by what they claim in `capabilities`.
// The cases follow the claims: a claimed capability must work, and one not
// claimed must be refused up front with a permanent DriverError (the engine
// fails the operation instead of retrying it), leaving nothing behind.
// What a driver reports of a resource it has never seen is its own business:
// the local driver finds no files ('missing'), the sim, which keeps nothing
// across restarts, adopts it as running.

import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import {
  type BackupInfo,
  DriverError,
  type Driver,
  type ReplicaSetSpec,
  type ServiceSpec,
} from '../../src/drivers/driver.js';
import type { Target } from '../../src/domain/logs.js';
import { DONE, type Progress } from '../../src/domain/progress.js';
import type { Capabilities } from '../../src/domain/types.js';
import { InvalidCursorError } from '../../src/lib/cursor.js';
import { resourceId } from '../../src/lib/ids.js';
import { freePort, makeSpec, SMALL } from '../local/helpers.js';

const PASSWORD = 'contract-password-0123';

/**
 * Calls `step` until it reports done, honouring its retry hints; a
 * retryable DriverError is tried again, as the engine does.
 */
export async function converge(step: () => Promise<Progress>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let p: Progress;
    try {
      p = await step();
    } catch (err) {
      if (!(err instanceof DriverError && err.retryable) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
      continue;
    }
    if (p.done) return;
    if (Date.now() > deadline) throw new Error(`driver did not converge in time: ${p.reason}`);
    await new Promise((r) => setTimeout(r, Math.min(p.retryAfterMs, 500)));
  }
}

/** Calls backupService as the engine does until the backup is done. */
export async function backupUntilDone(
  driver: Driver,
  spec: ServiceSpec,
  since = Date.now(),
): Promise<BackupInfo> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const p = await driver.backupService(spec, since);
    if (p.done) return p.backup;
    if (Date.now() > deadline) throw new Error(`the backup did not complete: ${p.reason}`);
    await new Promise((r) => setTimeout(r, Math.min(p.retryAfterMs, 200)));
  }
}

/** Polls `fn` until it returns something other than undefined. */
async function eventually<T>(
  fn: () => T | undefined,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Whether `err` is a DriverError the engine must not retry. */
const permanent = (err: unknown) => {
  assert.ok(err instanceof DriverError, String(err));
  assert.equal(err.retryable, false, err.message);
  return true;
};

async function replicaSetSpec(parent: ServiceSpec): Promise<ReplicaSetSpec> {
  return {
    replicaSetId: resourceId(),
    serviceId: parent.serviceId,
    primary: parent,
    nodePorts: [await freePort(), await freePort()],
    projectId: parent.projectId,
    nodes: 2,
    size: parent.size,
    environment: parent.environment,
    port: await freePort(),
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
  };
}

/** Reads a page of `target`'s logs and checks the page's shape; returns it. */
async function logsPage(driver: Driver, target: Target, node = 0) {
  const page = await driver.readLogs(target, { severities: [], search: [], limit: 5, node });
  assert.ok(page.entries.length > 0, 'a running node has logs');
  assert.ok(page.entries.length <= 5);
  for (let i = 1; i < page.entries.length; i++) {
    assert.ok(page.entries[i - 1]!.timestamp >= page.entries[i]!.timestamp, 'newest first');
  }
  for (const e of page.entries) {
    assert.ok(!Number.isNaN(Date.parse(e.timestamp)));
    assert.match(e.severity, /^[A-Z0-9]+$/);
    assert.equal(typeof e.message, 'string');
    // A driver reads the database's lines only; Basin's own entries are the merge's.
    assert.equal(e.source, 'database');
  }
  return page;
}

/** What a contract test can do to a driver's databases from outside, as a crash would. */
export interface ContractHooks {
  /** Kills the recorded primary of `spec` (kill -9 of its postmaster, or the sim's hook). */
  killPrimary(spec: ServiceSpec): Promise<void>;
}

/** Runs the whole contract against `driver`, started; its cases follow driver.capabilities. */
export async function driverContract(
  t: TestContext,
  driver: Driver,
  hooks?: ContractHooks,
): Promise<void> {
  const spec = await makeSpec('POSTGRES', PASSWORD);
  const target: Target = { kind: 'service', id: spec.serviceId };

  await t.test(
    'a service is created, and applying the same spec again is done at once',
    async () => {
      await converge(() => driver.applyService(spec));
      assert.equal(await driver.inspectService(spec), 'running');
      assert.deepEqual(await driver.applyService(spec), DONE);
    },
  );

  await t.test('stop and start', async () => {
    const stopped = { ...spec, running: false };
    await converge(() => driver.applyService(stopped));
    assert.equal(await driver.inspectService(stopped), 'stopped');
    await converge(() => driver.applyService(spec));
    assert.equal(await driver.inspectService(spec), 'running');
  });

  await t.test('a new size and a new password are applied', async () => {
    const changed = {
      ...spec,
      size: SMALL,
      passwordVerifier: (await makeSpec('POSTGRES', 'another-password-0123')).passwordVerifier,
    };
    await converge(() => driver.applyService(changed));
    assert.equal(await driver.inspectService(changed), 'running');
    assert.deepEqual(await driver.applyService(changed), DONE);
  });

  await t.test("a VPC's blocks are admitted, then the public ones again", async () => {
    const inVpc = { ...spec, allowedCidrs: ['10.0.0.0/16', '10.50.0.0/16'] };
    await converge(() => driver.applyService(inVpc));
    assert.equal(await driver.inspectService(inVpc), 'running');
    assert.deepEqual(await driver.applyService(inVpc), DONE);
    await converge(() => driver.applyService(spec));
    assert.equal(await driver.inspectService(spec), 'running');
  });

  await t.test('a full backup is reported once complete; asked again, the same one', async () => {
    const since = Date.now();
    const backup = await backupUntilDone(driver, spec, since);
    assert.match(backup.label, /^\d{8}-\d{6}F/);
    assert.ok(Date.parse(backup.startedAt) >= Math.floor(since / 1000) * 1000);
    assert.ok(Date.parse(backup.stoppedAt) >= Date.parse(backup.startedAt));
    assert.deepEqual(await driver.backupService(spec, since), { done: true, backup });
    // Expiring up to the only backup keeps it; an unknown label changes nothing.
    await driver.expireBackups(spec.serviceId, backup.label);
    await driver.expireBackups(spec.serviceId, '20000101-000000F');
    assert.deepEqual(await driver.backupService(spec, since), { done: true, backup });
  });

  await t.test('a stopped service is not backed up: a retryable error', async () => {
    const stopped = { ...spec, running: false };
    await converge(() => driver.applyService(stopped));
    await assert.rejects(driver.backupService(stopped, Date.now() + 60_000), (err: unknown) => {
      assert.ok(err instanceof DriverError, String(err));
      assert.equal(err.retryable, true);
      return true;
    });
    await converge(() => driver.applyService(spec));
  });

  await t.test('logs are newest first and page with an opaque cursor', async () => {
    await logsPage(driver, target);
    await assert.rejects(
      driver.readLogs(target, { severities: [], search: [], limit: 5, cursor: 'garbage' }),
      InvalidCursorError,
    );
  });

  await t.test('a read of logs whose client has gone rejects with an AbortError', async () => {
    const signal = AbortSignal.abort();
    await assert.rejects(
      driver.readLogs(target, { severities: [], search: [], limit: 5, signal }),
      {
        name: 'AbortError',
      },
    );
  });

  await t.test('metrics of a running service appear; an unknown one has none', async () => {
    const m = await eventually(() => driver.metrics(target), 'metrics');
    for (const v of [m.memoryMb, m.milliCpu, m.storageMb]) assert.ok(Number.isFinite(v) && v >= 0);
    assert.ok(m.storageMb > 0, 'a database takes space');
    assert.equal(driver.metrics({ kind: 'service', id: resourceId() }), undefined);
  });

  for (const capability of Object.keys(driver.capabilities) as (keyof Capabilities)[]) {
    const claimed = driver.capabilities[capability];
    const cases = claimed ? CLAIMED : REFUSED;
    await t.test(
      `${capability}: ${claimed ? 'claimed, and it works' : 'not claimed, and refused'}`,
      () => cases[capability](driver, spec),
    );
  }

  if (hooks && driver.capabilities.haReplicas) {
    await t.test(
      'switchover and failover: the recorded primary changes, the old one follows; a killed primary is reported and fenced',
      () => failover(driver, spec, hooks),
    );
  }

  await t.test(
    'delete removes the service; deleting it again, or an unknown one, is done',
    async () => {
      await converge(() => driver.deleteService(spec.serviceId));
      assert.equal(await driver.inspectService(spec), 'missing');
      assert.deepEqual(await driver.deleteService(spec.serviceId), DONE);
      assert.deepEqual(await driver.deleteService(resourceId()), DONE);
    },
  );
}

/** The moves of a failover, as the engine makes them (engine/failover.ts). */
async function failover(driver: Driver, running: ServiceSpec, hooks: ContractHooks) {
  const [a, b] = [await freePort(), await freePort()];
  const ha: ServiceSpec = {
    ...running,
    ha: { replicaCount: 1, syncReplicaCount: 1 },
    nodes: [
      { index: 0, role: 'primary', port: a },
      { index: 1, role: 'standby', port: b },
    ],
  };
  await converge(() => driver.applyService(ha));
  const promoted: ServiceSpec = {
    ...ha,
    nodes: [
      { index: 0, role: 'standby', port: a },
      { index: 1, role: 'primary', port: b },
    ],
  };
  const roles = async (s: ServiceSpec) =>
    (await driver.observeService?.(s))?.map((n) => [n.index, n.ready, n.actsAs]);
  // A switchover (engine/failover.ts, switchover): node 1 recorded as the
  // primary while node 0 still runs; and back.
  await converge(() => driver.applyService(promoted));
  assert.equal(await driver.inspectService(promoted), 'running');
  if (driver.observeService) {
    assert.deepEqual(await roles(promoted), [
      [0, true, 'standby'],
      [1, true, 'primary'],
    ]);
  }
  await converge(() => driver.applyService(ha));
  if (driver.observeService) {
    assert.deepEqual(await roles(ha), [
      [0, true, 'primary'],
      [1, true, 'standby'],
    ]);
  }
  const downs: string[] = [];
  driver.watchPrimaries?.((id) => downs.push(id));
  await sleep(600); // the watch has seen the primary run
  assert.deepEqual(await driver.prepareFailover?.(ha), { dead: false });
  await hooks.killPrimary(ha);
  if (driver.watchPrimaries) {
    await eventually(
      () => (downs.includes(running.serviceId) ? true : undefined),
      'the watch to report the dead primary',
      10_000,
    );
  }
  assert.equal(await driver.inspectService(ha), 'failed');
  const view = await driver.prepareFailover?.(ha);
  assert.ok(view?.dead, 'the primary is reported dead');
  assert.deepEqual(
    view.standbys.map((s) => [s.index, typeof s.lsn]),
    [[1, 'string']],
  );
  await converge(() => driver.applyService(promoted));
  assert.equal(await driver.inspectService(promoted), 'running');
  assert.deepEqual(await driver.prepareFailover?.(promoted), { dead: false });
  if (driver.observeService) {
    assert.deepEqual(await roles(promoted), [
      [0, true, 'standby'],
      [1, true, 'primary'],
    ]);
  }
  // Back to one node: the new primary, on the service's port.
  const single: ServiceSpec = {
    ...running,
    nodes: [{ index: 1, role: 'primary', port: running.port }],
  };
  await converge(() => driver.applyService(single));
  assert.equal(await driver.inspectService(single), 'running');
}

type Case = (driver: Driver, running: ServiceSpec) => Promise<void>;
type ForkSource = Extract<ServiceSpec['source'], { kind: 'fork' }>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a driver that claims a capability must do with it (`running` is a running service). */
const CLAIMED: Record<keyof Capabilities, Case> = {
  async forks(driver, running) {
    const forkOf = (parent: ServiceSpec, source: Partial<ForkSource>) =>
      makeSpec('POSTGRES', PASSWORD, {
        source: {
          kind: 'fork',
          parentServiceId: parent.serviceId,
          strategy: 'NOW',
          targetTime: null,
          backupLabel: null,
          ...source,
        },
      });
    const backup = await backupUntilDone(driver, running);
    while (Date.now() <= Date.parse(backup.stoppedAt)) await sleep(50);
    // The forks of one parent are made side by side, as the engine would
    // make them when they are asked for together.
    const made = async (forks: ServiceSpec[]) => {
      await Promise.all(
        forks.map(async (fork) => {
          await converge(() => driver.applyService(fork), 120_000);
          const { strategy } = fork.source as ForkSource;
          assert.equal(await driver.inspectService(fork), 'running', strategy);
        }),
      );
      return forks;
    };
    const beforeStop = new Date().toISOString();
    const forks = await made([
      await forkOf(running, { strategy: 'NOW' }),
      await forkOf(running, { strategy: 'LAST_SNAPSHOT', backupLabel: backup.label }),
      await forkOf(running, {
        strategy: 'PITR',
        backupLabel: backup.label,
        targetTime: beforeStop,
      }),
    ]);
    // A stopped parent forks three ways too: NOW from its data, the others
    // from its backups, PITR to a moment before it stopped and to one after.
    const stopped = { ...running, running: false };
    await converge(() => driver.applyService(stopped));
    const afterStop = new Date().toISOString();
    forks.push(
      ...(await made([
        await forkOf(stopped, { strategy: 'NOW' }),
        await forkOf(stopped, { strategy: 'LAST_SNAPSHOT', backupLabel: backup.label }),
        await forkOf(stopped, {
          strategy: 'PITR',
          backupLabel: backup.label,
          targetTime: beforeStop,
        }),
        await forkOf(stopped, {
          strategy: 'PITR',
          backupLabel: backup.label,
          targetTime: afterStop,
        }),
      ])),
    );
    assert.equal(await driver.inspectService(stopped), 'stopped', 'the parent is untouched');
    await converge(() => driver.applyService(running));
    await Promise.all(forks.map((f) => converge(() => driver.deleteService(f.serviceId))));
    assert.equal(await driver.inspectService(running), 'running', 'the parent is untouched');
    // What cannot be forked fails for good: a parent that does not exist, a backup it does not have.
    const orphan = await makeSpec('POSTGRES', PASSWORD, {
      source: {
        kind: 'fork',
        parentServiceId: resourceId(),
        strategy: 'NOW',
        targetTime: null,
        backupLabel: null,
      },
    });
    const gone = await forkOf(running, {
      strategy: 'LAST_SNAPSHOT',
      backupLabel: '20000101-000000F',
    });
    // Nor a moment before the chosen backup ended: no restore of it reaches that.
    const early = await forkOf(running, {
      strategy: 'PITR',
      backupLabel: backup.label,
      targetTime: new Date(Date.parse(backup.startedAt) - 60_000).toISOString(),
    });
    await Promise.all([
      assert.rejects(
        converge(() => driver.applyService(orphan)),
        permanent,
      ),
      assert.rejects(
        converge(() => driver.applyService(gone)),
        permanent,
      ),
      assert.rejects(
        converge(() => driver.applyService(early), 120_000),
        permanent,
      ),
    ]);
    await Promise.all(
      [orphan, gone, early].map((f) => converge(() => driver.deleteService(f.serviceId))),
    );
  },
  async haReplicas(driver, running) {
    const ha: ServiceSpec = {
      ...running,
      ha: { replicaCount: 1, syncReplicaCount: 1 },
      nodes: [
        { index: 0, role: 'primary', port: await freePort() },
        { index: 1, role: 'standby', port: await freePort() },
      ],
    };
    await converge(() => driver.applyService(ha));
    assert.equal(await driver.inspectService(ha), 'running');
    if (driver.observeService) {
      const seen = await driver.observeService(ha);
      assert.deepEqual(
        seen.map((n) => [n.index, n.ready, n.actsAs]),
        [
          [0, true, 'primary'],
          [1, true, 'standby'],
        ],
      );
    }
    await logsPage(driver, { kind: 'service', id: running.serviceId }, 1);
    // Back to one node, on the service's port: the standby goes.
    await converge(() => driver.applyService(running));
    assert.equal(await driver.inspectService(running), 'running');
  },
  async pooler(driver, running) {
    const pooled = { ...running, pooler: { enabled: true, port: await freePort() } };
    await converge(() => driver.applyService(pooled));
    assert.equal(await driver.inspectService(pooled), 'running');
    assert.deepEqual(await driver.applyService(pooled), DONE);
    // Its access rules, its password and its service's stop and start follow the spec.
    const changed = {
      ...pooled,
      allowedCidrs: ['10.0.0.0/16'],
      passwordVerifier: (await makeSpec('POSTGRES', 'pooled-password-0123')).passwordVerifier,
    };
    await converge(() => driver.applyService(changed));
    assert.equal(await driver.inspectService(changed), 'running');
    const stopped = { ...changed, running: false };
    await converge(() => driver.applyService(stopped));
    assert.equal(await driver.inspectService(stopped), 'stopped');
    await converge(() => driver.applyService(changed));
    assert.equal(await driver.inspectService(changed), 'running');
    // Disabled (its port kept, as the store keeps it).
    const disabled = { ...running, pooler: { enabled: false, port: pooled.pooler.port } };
    await converge(() => driver.applyService(disabled));
    assert.equal(await driver.inspectService(disabled), 'running');
    await converge(() => driver.applyService(running));
  },
  async replicaSets(driver, running) {
    const rs = await replicaSetSpec(running);
    await converge(() => driver.applyReplicaSet(rs));
    assert.equal(await driver.inspectReplicaSet(rs), 'running');
    await logsPage(driver, { kind: 'replicaSet', id: rs.replicaSetId });
    await converge(() => driver.deleteReplicaSet(rs.replicaSetId));
    assert.equal(await driver.inspectReplicaSet(rs), 'missing');
  },
  async replicaSetPooler(driver, running) {
    const rs = {
      ...(await replicaSetSpec(running)),
      pooler: { enabled: true, port: await freePort() },
    };
    await converge(() => driver.applyReplicaSet(rs));
    assert.equal(await driver.inspectReplicaSet(rs), 'running');
    assert.deepEqual(await driver.applyReplicaSet(rs), DONE);
    // Its access rules and its service's password follow the spec.
    const changed = {
      ...rs,
      allowedCidrs: ['10.0.0.0/16'],
      primary: {
        ...rs.primary,
        passwordVerifier: (await makeSpec('POSTGRES', 'pooled-password-0123')).passwordVerifier,
      },
    };
    await converge(() => driver.applyReplicaSet(changed));
    assert.equal(await driver.inspectReplicaSet(changed), 'running');
    // Disabled (its port kept), then enabled again.
    const disabled = { ...changed, pooler: { enabled: false, port: rs.pooler.port } };
    await converge(() => driver.applyReplicaSet(disabled));
    assert.equal(await driver.inspectReplicaSet(disabled), 'running');
    await converge(() => driver.applyReplicaSet(changed));
    assert.equal(await driver.inspectReplicaSet(changed), 'running');
    await converge(() => driver.deleteReplicaSet(rs.replicaSetId));
    assert.equal(await driver.inspectReplicaSet(rs), 'missing');
  },
};

/** What a driver that does not claim a capability must do when asked for it anyway. */
const REFUSED: Record<keyof Capabilities, Case> = {
  async forks(driver, running) {
    const fork = await makeSpec('POSTGRES', PASSWORD, {
      source: {
        kind: 'fork',
        parentServiceId: running.serviceId,
        strategy: 'NOW',
        targetTime: null,
        backupLabel: null,
      },
    });
    await assert.rejects(driver.applyService(fork), permanent);
    assert.deepEqual(
      await driver.deleteService(fork.serviceId),
      DONE,
      'there is nothing to remove',
    );
  },
  async haReplicas(driver, running) {
    await assert.rejects(
      driver.applyService({ ...running, ha: { replicaCount: 1, syncReplicaCount: 0 } }),
      permanent,
    );
    assert.equal(await driver.inspectService(running), 'running', 'the service is untouched');
  },
  async pooler(driver, running) {
    await assert.rejects(
      driver.applyService({ ...running, pooler: { enabled: true, port: await freePort() } }),
      permanent,
    );
    assert.equal(await driver.inspectService(running), 'running', 'the service is untouched');
  },
  async replicaSets(driver, running) {
    const rs = await replicaSetSpec(running);
    await assert.rejects(driver.applyReplicaSet(rs), permanent);
    assert.deepEqual(
      await driver.deleteReplicaSet(rs.replicaSetId),
      DONE,
      'there is nothing to remove',
    );
  },
  async replicaSetPooler(driver, running) {
    const rs = {
      ...(await replicaSetSpec(running)),
      pooler: { enabled: true, port: await freePort() },
    };
    await assert.rejects(driver.applyReplicaSet(rs), permanent);
    assert.deepEqual(
      await driver.deleteReplicaSet(rs.replicaSetId),
      DONE,
      'there is nothing to remove',
    );
  },
};
