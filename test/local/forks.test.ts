// Forks on the local driver against real PostgreSQL: NOW, LAST_SNAPSHOT and
// PITR, of a running and of a stopped parent, a fork of a fork; each holds
// exactly the data of its moment, its own password, OS user, certificate,
// stanza and system identifier, and writes on either side never reach the
// other. A restore that cannot reach its target fails for good, with the
// reason; so does a fork whose staged data is not its parent's, and one
// whose parent planted links in its repository or data directory.

import assert from 'node:assert/strict';
import {
  existsSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DriverError, type BackupInfo, type ServiceSpec } from '../../src/drivers/driver.js';
import type { ForkStrategy } from '../../src/domain/types.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { readNodeState, writeNodeState } from '../../src/drivers/local/node/node-state.js';
import { backupUntilDone } from '../contract/driver-contract.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  connect,
  controlDataId,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  query,
  stanzaSystemId,
  testUids,
} from './helpers.js';

/** `text` as a regular expression that matches it alone. */
const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const notRoot = process.getuid?.() !== 0 ? 'per-service OS users need root' : false;
const PARENT_PASSWORD = 'parent-password-0123';
const FORK_PASSWORD = 'fork-password-0123';

describe('local driver: forks', { skip: notRoot }, () => {
  let dataDir: string;
  let layout: Layout;
  let driver: LocalDriver;
  let parent: ServiceSpec;
  const made: ServiceSpec[] = [];
  let snapshot: BackupInfo;
  /** Moments between the rows: [after row 1 and 2, after row 3]. */
  let between: string;

  const rows = async (spec: ServiceSpec, password = FORK_PASSWORD) =>
    (await query(spec, password, 'SELECT v FROM t ORDER BY v')).map((r) => r.v as string);

  async function forkSpec(
    from: ServiceSpec,
    strategy: ForkStrategy,
    extra: { targetTime?: string; backupLabel?: string } = {},
  ): Promise<ServiceSpec> {
    const spec = await makeSpec('POSTGRES', FORK_PASSWORD, {
      source: {
        kind: 'fork',
        parentServiceId: from.serviceId,
        strategy,
        targetTime: extra.targetTime ?? null,
        backupLabel: extra.backupLabel ?? null,
      },
    });
    made.push(spec);
    return spec;
  }

  async function fork(
    from: ServiceSpec,
    strategy: ForkStrategy,
    extra: { targetTime?: string; backupLabel?: string } = {},
  ): Promise<ServiceSpec> {
    const spec = await forkSpec(from, strategy, extra);
    await applyUntilDone(driver, spec, 120_000);
    assertOwnIdentifier(spec, from);
    return spec;
  }

  /** A fork's fails for good: its error, which must match `why`. */
  async function forkFails(
    from: ServiceSpec,
    strategy: ForkStrategy,
    why: RegExp,
    extra: { targetTime?: string; backupLabel?: string } = {},
  ): Promise<void> {
    const spec = await forkSpec(from, strategy, extra);
    await assert.rejects(applyUntilDone(driver, spec, 120_000), (err: unknown) => {
      assert.ok(err instanceof DriverError, String(err));
      assert.equal(err.retryable, false, err.message);
      assert.match(err.message, why);
      return true;
    });
    assert.equal(existsSync(layout.pgdata({ id: spec.serviceId, node: 0 })), false, 'not started');
  }

  const systemId = (spec: ServiceSpec) =>
    controlDataId(layout.pgdata({ id: spec.serviceId, node: 0 }));

  /**
   * A fork's identifier is its own (neither its parent's nor the template's),
   * recorded, and its stanza's.
   */
  function assertOwnIdentifier(f: ServiceSpec, from: ServiceSpec): void {
    const id = systemId(f);
    assert.notEqual(id, systemId(from), "not its parent's");
    assert.notEqual(id, controlDataId(layout.templatePgdata), "not the template's");
    assert.equal(readFileSync(layout.systemIdFile(f.serviceId), 'utf8').trim(), id);
    assert.equal(stanzaSystemId(layout.backupInfo(f.serviceId)), id, "its stanza's");
  }

  before(async () => {
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = createLocalDriver({ ...testUids(), dataDir, publicHost: 'db.example.test' });
    await driver.start();
    layout = new Layout(dataDir);
    parent = await makeSpec('POSTGRES', PARENT_PASSWORD);
    await applyUntilDone(driver, parent);
    await query(parent, PARENT_PASSWORD, 'CREATE TABLE t (v text)');
    await query(parent, PARENT_PASSWORD, "INSERT INTO t VALUES ('1 before the backup')");
    snapshot = await backupUntilDone(driver, parent);
    await query(parent, PARENT_PASSWORD, "INSERT INTO t VALUES ('2 after the backup')");
    // A whole second apart, on both sides of `between`.
    await sleep(1_000);
    between = new Date().toISOString();
    await sleep(1_000);
    await query(parent, PARENT_PASSWORD, "INSERT INTO t VALUES ('3 after the target')");
  });

  after(async () => {
    await Promise.all(made.map((f) => deleteUntilDone(driver, f.serviceId).catch(() => {})));
    await deleteUntilDone(driver, parent.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  test('NOW: the committed rows, not an open transaction; its own password, user and certificate', async () => {
    const open = await connect(parent, PARENT_PASSWORD);
    await open.query('BEGIN');
    await open.query("INSERT INTO t VALUES ('4 not committed at the fork')");
    try {
      const f = await fork(parent, 'NOW');
      assert.deepEqual(await rows(f), [
        '1 before the backup',
        '2 after the backup',
        '3 after the target',
      ]);
      await assert.rejects(connect(f, PARENT_PASSWORD), /password authentication failed/);
      const fPgdata = layout.pgdata({ id: f.serviceId, node: 0 });
      const pPgdata = layout.pgdata({ id: parent.serviceId, node: 0 });
      assert.notEqual(statSync(fPgdata).uid, statSync(pPgdata).uid, 'an OS user of its own');
      assert.notEqual(
        readFileSync(join(fPgdata, 'server.key'), 'utf8'),
        readFileSync(join(pPgdata, 'server.key'), 'utf8'),
        'a TLS key of its own',
      );
      assert.ok(existsSync(layout.backupInfo(f.serviceId)), 'a stanza of its own');
      // Writes never cross.
      await query(f, FORK_PASSWORD, "INSERT INTO t VALUES ('written to the fork')");
      await open.query('COMMIT');
      assert.deepEqual((await rows(f)).length, 4);
      assert.ok(!(await rows(parent, PARENT_PASSWORD)).includes('written to the fork'));
    } finally {
      await open.end().catch(() => {});
    }
  });

  test('LAST_SNAPSHOT: the rows of the backup, nothing later', async () => {
    const f = await fork(parent, 'LAST_SNAPSHOT', { backupLabel: snapshot.label });
    assert.deepEqual(await rows(f), ['1 before the backup']);
    assert.equal(existsSync(layout.forkSource(f.serviceId).repo), false, 'no copy left');
    assert.equal(existsSync(layout.forkSource(f.serviceId).conf), false);
  });

  test('PITR: exactly the rows committed before the target', async () => {
    const f = await fork(parent, 'PITR', { targetTime: between, backupLabel: snapshot.label });
    assert.deepEqual(await rows(f), ['1 before the backup', '2 after the backup']);
    // It is a primary that takes writes, archives them and backs up, under its own identifier.
    await query(f, FORK_PASSWORD, "INSERT INTO t VALUES ('x')");
    const own = await backupUntilDone(driver, f);
    assert.equal(stanzaSystemId(layout.backupInfo(f.serviceId)), systemId(f));
    const again = await fork(f, 'LAST_SNAPSHOT', { backupLabel: own.label });
    assert.deepEqual(await rows(again), ['1 before the backup', '2 after the backup', 'x']);
  });

  test("a staged copy or restore that is not its parent's is refused for good, saying why", async () => {
    // What Basin recorded of the parent, changed: the data found is then not the parent's.
    const record = layout.systemIdFile(parent.serviceId);
    const recorded = readFileSync(record, 'utf8');
    try {
      writeFileSync(record, '12345\n');
      const why = new RegExp(
        `^The fork's data is not its parent's: its system identifier is ${systemId(parent)}, ` +
          `where ${parent.serviceId}'s is 12345; the fork is not started\\.$`,
      );
      await Promise.all([
        forkFails(parent, 'NOW', why),
        forkFails(parent, 'LAST_SNAPSHOT', why, { backupLabel: snapshot.label }),
      ]);
    } finally {
      writeFileSync(record, recorded);
    }
  });

  test("links planted in the parent's repository or data directory fail the fork for good, naming them", async () => {
    const pgdata = layout.pgdata({ id: parent.serviceId, node: 0 });
    // The parent's own backups, behind a link in the middle of the path.
    const backups = join(layout.backupDirs(parent.serviceId).repo, 'backup', parent.serviceId);
    renameSync(backups, `${backups}.aside`);
    try {
      symlinkSync(`${backups}.aside`, backups);
      await forkFails(
        parent,
        'LAST_SNAPSHOT',
        new RegExp(
          `^Could not read the parent's backups: ${literal(backups)}: not a directory \\(a file, or a symbolic link: not followed\\)$`,
        ),
        { backupLabel: snapshot.label },
      );
    } finally {
      rmSync(backups, { force: true });
      renameSync(`${backups}.aside`, backups);
    }
    const evil = join(pgdata, 'base', 'evil');
    symlinkSync('/etc', evil);
    try {
      await forkFails(
        parent,
        'NOW',
        new RegExp(
          `^Could not copy the parent's data: ${literal(evil)}: a symbolic link \\(not followed\\)$`,
        ),
      );
    } finally {
      rmSync(evil);
    }
    // Put back, the parent forks again.
    await fork(parent, 'LAST_SNAPSHOT', { backupLabel: snapshot.label });
  });

  test('a fork of a fork', async () => {
    const child = made[0] as ServiceSpec;
    const grandchild = await fork(child, 'NOW');
    assert.ok((await rows(grandchild)).includes('written to the fork'));
  });

  test('a stopped parent: NOW copies its data; PITR before and after it stopped', async () => {
    await query(parent, PARENT_PASSWORD, "INSERT INTO t VALUES ('5 before the stop')");
    await sleep(1_000);
    const beforeStop = new Date().toISOString();
    await sleep(1_000);
    await query(parent, PARENT_PASSWORD, "INSERT INTO t VALUES ('6 just before the stop')");
    parent = { ...parent, running: false };
    await applyUntilDone(driver, parent);
    const afterStop = new Date().toISOString();

    // The three made side by side, as the engine would when asked for them together.
    const [now, early, late] = await Promise.all([
      fork(parent, 'NOW'),
      fork(parent, 'PITR', { targetTime: beforeStop, backupLabel: snapshot.label }),
      fork(parent, 'PITR', { targetTime: afterStop, backupLabel: snapshot.label }),
    ]);
    assert.equal((await rows(now)).at(-1), '6 just before the stop');
    assert.equal((await rows(early)).at(-1), '5 before the stop');
    assert.equal((await rows(late)).at(-1), '6 just before the stop');
    assert.equal(await driver.inspectService(parent), 'stopped', 'the parent stays stopped');
  });

  test('a restore that cannot reach its target fails for good, saying why', async () => {
    // As if the parent had crashed instead of being stopped: its last WAL
    // is not archived, and no commit in the archive comes after the target.
    const stateFile = layout.stateFile({ id: parent.serviceId, node: 0 });
    const state = await readNodeState(stateFile);
    delete state.walMarkedAt;
    await writeNodeState(stateFile, state);
    const spec = await makeSpec('POSTGRES', FORK_PASSWORD, {
      source: {
        kind: 'fork',
        parentServiceId: parent.serviceId,
        strategy: 'PITR',
        targetTime: new Date().toISOString(),
        backupLabel: snapshot.label,
      },
    });
    made.push(spec);
    await assert.rejects(applyUntilDone(driver, spec, 120_000), (err: unknown) => {
      assert.ok(err instanceof DriverError, String(err));
      assert.equal(err.retryable, false, err.message);
      assert.match(
        err.message,
        /^The fork could not be restored: .*recovery ended before configured recovery target was reached/,
      );
      return true;
    });
  });

  test('deleting the parent leaves its forks working', async () => {
    await deleteUntilDone(driver, parent.serviceId);
    const f = made[1] as ServiceSpec;
    assert.deepEqual(await rows(f), ['1 before the backup']);
  });
});
