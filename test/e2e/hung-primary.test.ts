// A primary that runs but does not answer, through Basin as shipped (`node
// dist/main.js`, the local driver, real PostgreSQL and HAProxy): every
// process of it is stopped (SIGSTOP: alive, silent), so nothing dies for
// the watch to see. Basin's periodic checks find it silent several times
// in a row, fence it (kill it whole) and fail over to the synchronous
// standby: the service is READY again on the same endpoint, a writer's
// acknowledged rows are all there, the service's logs tell each step, and
// the stopped processes, continued (SIGCONT), are gone: the old primary
// never accepts a write again, and it rejoins as a standby.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';
import {
  basinLogs,
  clusterPids,
  explain,
  isLive,
  runningNodes,
  superuser,
  syncHaService,
  writer,
} from './ha-nodes.js';

test(
  'a hung primary (every process stopped) is found by health checks, fenced and failed over',
  { timeout: 600_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const ids: string[] = [];
    try {
      const { id, password, port } = await syncHaService(b, 'hung', ids);

      const [old] = runningNodes(layout, id);
      assert.ok(old && old.index === 0);
      assert.equal(await superuser(old, 'SELECT pg_is_in_recovery()'), 'f');
      const w = writer(port, password);
      t.after(() => w.stop());
      await b.waitFor(async () => w.acked.length > 20, 'the writer to commit');

      // Every process of the primary stops: alive, and silent.
      const stopped = clusterPids(layout.pgdata({ id, node: 0 }));
      assert.ok(stopped.includes(old.pid), 'the postmaster is among them');
      for (const pid of stopped) process.kill(pid, 'SIGSTOP');
      t.after(() => {
        for (const pid of stopped) {
          try {
            process.kill(pid, 'SIGCONT');
          } catch {
            // gone
          }
        }
      });
      const stoppedAt = w.acked.length;
      await b.waitFor(
        async () => w.acked.length > stoppedAt + 20,
        'writes through the same endpoint after the primary hung',
        90_000,
      );
      await b.waitForStatus(id, 'READY', 120_000);
      await w.stop();
      const rows = new Set(
        (await psql(conninfo(port), password, 'SELECT i FROM w')).split('\n').map(Number),
      );
      assert.deepEqual(
        w.acked.filter((i) => !rows.has(i)),
        [],
        'every acknowledged commit is there',
      );

      // The steps, in the service's logs.
      const entries = await basinLogs(b, id);
      const said = (re: RegExp) =>
        assert.ok(
          entries.some((l) => re.test(l)),
          entries.join('\n'),
        );
      said(/basin: the primary node0 did not answer a health check within 1\.5 s \(1 in a row/);
      said(
        /basin: the primary node0 runs but did not answer 3 health checks in a row .* taken for hung/,
      );
      said(/basin: promoting node1, the most advanced synchronous standby/);
      said(/basin: READY again: node1 is the primary/);

      // Fenced: the stopped processes were killed; continued, none runs.
      for (const pid of stopped) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // already gone
        }
      }
      assert.deepEqual(
        stopped.filter((pid) => isLive(pid)),
        [],
        'nothing of the old primary runs',
      );

      // The old primary rejoins as a standby, which refuses writes.
      const rejoined = await b.waitFor(async () => {
        const now = runningNodes(layout, id);
        const zero = now.find((n) => n.index === 0);
        if (now.length !== 2 || !zero) return undefined;
        return (await superuser(zero, 'SELECT pg_is_in_recovery()').catch(() => '')) === 't'
          ? zero
          : undefined;
      }, 'the old primary to rejoin as a standby');
      await assert.rejects(
        psql(conninfo(rejoined.port), password, 'INSERT INTO w VALUES (-1)'),
        /read-only transaction/,
      );
      const one = runningNodes(layout, id).find((n) => n.index === 1);
      assert.ok(one);
      assert.equal(await superuser(one, 'SELECT pg_is_in_recovery()'), 'f');
      await psql(conninfo(port), password, 'INSERT INTO w VALUES (-2)');
    } catch (err) {
      console.error(await explain(b, ids));
      throw err;
    }
  },
);
