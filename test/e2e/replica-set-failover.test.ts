// A read replica set's nodes through a failover that leaves them ahead of
// the new primary, through Basin as shipped (`node dist/main.js`, the local
// driver, real PostgreSQL and HAProxy). The set streams asynchronously, so
// it can get WAL the promoted standby never got; here that is made certain:
// the primary's walsender to its synchronous standby is stopped (SIGSTOP),
// a row is committed (its commit waits for the standby, unacknowledged,
// while the set already replays it), and the primary is killed (-9). The
// standby is promoted where it was, behind the set, whose nodes cannot
// follow it as they are: Basin rewinds them one at a time while the other
// keeps serving. Afterwards every node of the set, on its own port, reads
// rows written to the new primary after the failover, and none reads the
// row the new primary never had.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import { conninfo, pgClient, psql } from './clients.js';
import {
  activeReplicaSet,
  basinLogs,
  explain,
  isLive,
  replicaSetActive,
  runningNodes,
  superuser,
  superuserTsdb,
  syncHaService,
} from './ha-nodes.js';

/** Samples whether some node of the set runs, until stopped: was there a moment when none did? */
function watchSomeNodeRuns(layout: Layout, rsId: string, nodes: number) {
  let samples = 0;
  let noneRan = 0;
  let stop = false;
  const done = (async () => {
    while (!stop) {
      const up = runningNodes(layout, rsId).filter((n) => n.index < nodes && isLive(n.pid));
      samples++;
      if (up.length === 0) noneRan++;
      await sleep(20);
    }
  })();
  return {
    async stop() {
      stop = true;
      await done;
      return { samples, noneRan };
    },
  };
}

test(
  'a read replica set ahead of the promoted standby is rewound node by node and follows the new primary',
  { timeout: 600_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const ids: string[] = [];
    try {
      const { id, password, port } = await syncHaService(
        b,
        'primary',
        ids,
        "CREATE TABLE r (v text); INSERT INTO r VALUES ('a')",
      );

      const { id: rsId, port: rsPort } = await activeReplicaSet(b, id, 'reporting', ids);
      const members = runningNodes(layout, rsId);
      assert.equal(members.length, 2);
      for (const n of members) {
        await b.waitFor(
          async () => (await superuserTsdb(n, 'SELECT count(*) FROM r')) === '1',
          `replica node ${n.index} to read the first row`,
        );
      }

      // The primary's walsender to its synchronous standby stops: a commit
      // now waits (unacknowledged), while the set gets and replays it.
      const [primary, standby] = runningNodes(layout, id) as [
        ReturnType<typeof runningNodes>[0],
        ReturnType<typeof runningNodes>[0],
      ];
      assert.equal(await superuser(primary, 'SELECT pg_is_in_recovery()'), 'f');
      const walsender = Number(
        await superuser(
          primary,
          "SELECT pid FROM pg_stat_replication WHERE application_name = 'node1'",
        ),
      );
      assert.ok(walsender > 0, 'the standby streams');
      process.kill(walsender, 'SIGSTOP');
      const phantom = await pgClient(port, password);
      const waiting = phantom.query("INSERT INTO r VALUES ('phantom')").then(
        () => 'acknowledged',
        () => 'failed',
      );
      for (const n of members) {
        await b.waitFor(
          async () =>
            (await superuserTsdb(n, "SELECT count(*) FROM r WHERE v = 'phantom'")) === '1',
          `replica node ${n.index} to replay the unacknowledged row`,
        );
      }
      assert.equal(
        await superuserTsdb(standby, "SELECT count(*) FROM r WHERE v = 'phantom'"),
        '0',
        'the synchronous standby never got it',
      );

      // kill -9: the standby is promoted behind the set's nodes.
      const before = new Map(members.map((n) => [n.index, n.pid]));
      const serving = watchSomeNodeRuns(layout, rsId, 2);
      t.after(() => serving.stop());
      process.kill(primary.pid, 'SIGKILL');
      assert.equal(
        await waiting,
        'failed',
        'the row waiting for its standby was never acknowledged',
      );
      await phantom.end().catch(() => {});
      await b.waitFor(
        async () =>
          psql(conninfo(port), password, "INSERT INTO r VALUES ('after')").then(
            () => true,
            () => false,
          ),
        'a write through the service endpoint after the failover',
        60_000,
      );
      await b.waitForStatus(id, 'READY', 120_000);

      // Every node of the set, on its own port, reads the new primary's rows
      // (and not the one it never had); so does the set's endpoint.
      let seen = '';
      await b.waitFor(
        async () => {
          const now = runningNodes(layout, rsId);
          const got = await Promise.all(
            now.map((n) =>
              psql(
                conninfo(n.port),
                password,
                'SELECT string_agg(v, $$,$$ ORDER BY v) FROM r',
              ).catch((err: Error) => err.message),
            ),
          );
          seen = JSON.stringify(got);
          return got.length === 2 && got.every((g) => g === 'a,after');
        },
        () => `every node of the set to read 'a,after' (they read ${seen})`,
        180_000,
      );
      await replicaSetActive(b, id, rsId);
      const { samples, noneRan } = await serving.stop();
      assert.ok(samples > 10, `the set's nodes were sampled (${samples})`);
      assert.equal(noneRan, 0, 'one node of the set ran at every moment of the repair');
      assert.equal(
        await psql(conninfo(rsPort), password, 'SELECT string_agg(v, $$,$$ ORDER BY v) FROM r'),
        'a,after',
      );
      for (const n of runningNodes(layout, rsId)) {
        assert.notEqual(n.pid, before.get(n.index), `node ${n.index} was restarted to be rewound`);
        assert.equal(await superuser(n, 'SELECT pg_is_in_recovery()'), 't');
      }
      const entries = await basinLogs(b, rsId);
      for (const node of ['node0', 'node1']) {
        assert.ok(
          entries.some((l) =>
            new RegExp(`basin: ${node} cannot follow the primary on timeline 2: .*past`).test(l),
          ),
          entries.join('\n'),
        );
        assert.ok(
          entries.some((l) =>
            new RegExp(`basin: ${node} was rewound onto the primary's timeline 2`).test(l),
          ),
          entries.join('\n'),
        );
      }
      // Later writes reach every node of the set.
      await psql(conninfo(port), password, "INSERT INTO r VALUES ('later')");
      for (const n of runningNodes(layout, rsId)) {
        await b.waitFor(
          async () =>
            (await psql(conninfo(n.port), password, "SELECT count(*) FROM r WHERE v = 'later'")) ===
            '1',
          `node ${n.index} of the set to read a later row`,
        );
      }
    } catch (err) {
      console.error(await explain(b, ids));
      throw err;
    }
  },
);
