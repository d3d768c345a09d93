// Basin killed (-9) in the middle of a failover, through Basin as shipped
// (`node dist/main.js`, the local driver, real PostgreSQL and HAProxy),
// then started again on the same data directory: it finishes the failover.
// Three times, at three moments: as soon as the service shows UNSTABLE
// (the primary was just killed; the promotion may or may not be recorded),
// while pg_rewind turns the old primary into a standby (its files half
// rewound: they must be rebuilt, never rewound again), and as soon as the
// promotion is recorded (the standby not yet, or just, promoted). Each time the
// service ends READY with exactly one primary, every acknowledged row is
// there, writes go through the same endpoint, and the old primary rejoins
// as a standby.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout } from '../../src/drivers/local/layout.js';
import type { BasinProcess } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';
import { explain, isLive, runningNodes, superuser, syncHaService, writer } from './ha-nodes.js';

/** The pid of a pg_rewind whose target is under `dir`, if one runs. */
function pgRewindOf(dir: string): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (/(^|\/)pg_rewind$/.test(argv[0] ?? '') && argv.some((a) => a.startsWith(dir))) {
        return Number(name);
      }
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}

test(
  'Basin killed in the middle of a failover finishes it after a restart',
  { timeout: 600_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    let b: BasinProcess = await inst.start();
    const layout = new Layout(inst.dataDir);
    const ids: string[] = [];
    try {
      const { id, password, port } = await syncHaService(b, 'ha', ids);

      let rounds = 0;
      /** READY, one primary, every acknowledged row, a write, the old primary a standby again. */
      const settled = async (w: ReturnType<typeof writer>, oldPrimary: number) => {
        await b.waitForStatus(id, 'READY', 180_000);
        await w.stop();
        const nodes = await b.waitFor(async () => {
          const now = runningNodes(layout, id);
          return now.length === 2 ? now : undefined;
        }, 'both nodes to run');
        const roles = await Promise.all(
          nodes.map((n) => superuser(n, 'SELECT pg_is_in_recovery()')),
        );
        assert.deepEqual(
          roles.filter((r) => r === 'f').length,
          1,
          `exactly one primary: ${JSON.stringify(roles)}`,
        );
        const primary = nodes[roles.indexOf('f')];
        assert.ok(primary && primary.index !== oldPrimary, 'the old primary is not the primary');
        const rows = new Set(
          (await psql(conninfo(port), password, 'SELECT i FROM w')).split('\n').map(Number),
        );
        assert.deepEqual(
          w.acked.filter((i) => !rows.has(i)),
          [],
          'every acknowledged commit is there',
        );
        await psql(conninfo(port), password, `INSERT INTO w VALUES (${-++rounds})`);
        return primary;
      };

      // 1. Killed as soon as the service is UNSTABLE.
      let w = writer(port, password);
      t.after(() => w.stop());
      await b.waitFor(async () => w.acked.length > 20, 'the writer to commit');
      const [first] = runningNodes(layout, id);
      assert.ok(first && first.index === 0);
      process.kill(first.pid, 'SIGKILL');
      await b.waitFor(
        async () => (await b.call('GET', b.servicePath(id))).body.status === 'UNSTABLE',
        'the service to be UNSTABLE',
        30_000,
      );
      await b.kill();
      b = await inst.start();
      const second = await settled(w, 0);

      // 2. Killed while pg_rewind turns the old primary into a standby.
      w = writer(port, password, 1_000_000);
      await b.waitFor(async () => w.acked.length > 20, 'the writer to commit');
      process.kill(second.pid, 'SIGKILL');
      const target = layout.nodeDir({ id, node: second.index });
      const rewinding = await b.waitFor(
        async () => {
          const pid = pgRewindOf(target);
          if (pid === undefined) await sleep(5);
          return pid;
        },
        'pg_rewind of the old primary',
        60_000,
      );
      await b.kill();
      // Killed by the kernel when Basin died (PR_SET_PDEATHSIG), not by the test.
      for (let i = 0; i < 500 && isLive(rewinding); i++) await sleep(10);
      assert.ok(!isLive(rewinding), 'pg_rewind died with Basin');
      b = await inst.start();
      const third = await settled(w, second.index);
      const logs = async () => {
        const res = await b.call('GET', `${b.servicePath(id)}/logs?source=basin`);
        assert.equal(res.status, 200, res.text);
        return res.body.logs as string[];
      };
      const entries = await logs();
      assert.ok(
        entries.some((l) =>
          new RegExp(`basin: the rewind of node${second.index} was interrupted .* rebuilt`).test(l),
        ),
        entries.join('\n'),
      );

      // 3. Killed as soon as the promotion is recorded (before or while the standby is promoted).
      w = writer(port, password, 2_000_000);
      await b.waitFor(async () => w.acked.length > 20, 'the writer to commit');
      const promotions = entries.filter((l) => /basin: promoting node/.test(l)).length;
      process.kill(third.pid, 'SIGKILL');
      await b.waitFor(
        async () =>
          (await logs()).filter((l) => /basin: promoting node/.test(l)).length > promotions,
        'the promotion to be recorded',
        30_000,
      );
      await b.kill();
      b = await inst.start();
      await settled(w, third.index);
    } catch (err) {
      console.error(await explain(b, ids));
      throw err;
    }
  },
);
