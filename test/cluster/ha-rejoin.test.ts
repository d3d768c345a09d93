// The old primary rejoins (issue 22's first test, its second half; docs/
// decisions.md, "HA across hosts"): an HA service across three hosts (two
// standbys, one synchronous) loses its primary's whole host (kill -9 of
// every process there, then its link down) while a writer commits through
// another host's endpoint; Patroni promotes the synchronous standby and
// the writes go on. Then the host comes back as a machine does: its link
// up, its agent started again as a user starts it (no join: its identity
// is in its data directory). The agent applies its node again, Patroni
// there finds the leader key held by another member and starts the old
// primary's PostgreSQL as a standby of it (pg_rewind: the template has
// checksums, Patroni `use_pg_rewind`), it streams, and the service is READY
// with both standbys streaming. From the moment the link is up, a client
// writes to the old primary's own address (its host's address and its
// node's port) over and over: not one write is accepted; once it answers,
// it answers read-only; and every acknowledged commit is on it. Last, the
// service is deleted while another host is lost: back, that host removes
// the service's frontend and node, which the delete could not reach.

import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from './cluster.js';
import { type HaService, haService, missing, writer } from './ha-service.js';

test(
  "an HA service's primary host killed and back: its node rejoins as a standby (pg_rewind), streams, never accepts a write, and the service is READY with every standby streaming",
  { timeout: 900_000 },
  async (t) => {
    const s = await haService(t, { prefix: 'hfr', net: 25 });
    await rejoin(t, s).catch(async (err: unknown) => {
      await s.diagnose();
      throw err;
    });
    await s.c.b.stop();
  },
);

async function rejoin(t: TestContext, s: HaService): Promise<void> {
  const { c, nodes } = s;
  const old = await s.primary();
  assert.ok(old, 'a primary');
  const lostHost = old.hostIndex;
  const viaHost = [1, 2, 3].find((i) => i !== lostHost) as number;
  await s.sql(old, 'create table w (i int primary key)');

  const w = writer(t, s, viaHost);
  await until(async () => w.acked.length >= 20, 60_000);
  c.killHost(lostHost);
  const before = w.acked.length;
  await until(async () => w.acked.length >= before + 20, 180_000);
  await w.stop();
  const next = await s.primary();
  assert.ok(next && next !== old, `a new primary: ${next?.name}`);
  assert.deepEqual(await missing(s, next, w.acked), [], 'acknowledged commits after the failover');

  // The host comes back. From its link's first moment a client tries to
  // write to the old primary's own node, directly: every attempt must fail.
  c.linkUp(lostHost);
  const accepted: string[] = [];
  const answers = new Set<string>();
  let probing = true;
  t.after(() => {
    probing = false;
  });
  const probe = (async () => {
    for (let k = 1; probing; k++) {
      try {
        await s.sql(old, `insert into w values (${-k}) returning i`);
        accepted.push(`insert ${-k}`);
      } catch (err) {
        const m = (err as Error).message;
        answers.add(/read-only/.test(m) ? 'read-only' : 'no connection');
      }
      await sleep(300);
    }
  })();
  c.runAgent(lostHost, { heartbeatMs: 500 });

  // The old primary answers as a standby, streaming from the new one.
  await until(async () => {
    const r = await s
      .sql(old, 'select pg_is_in_recovery(), status from pg_stat_wal_receiver')
      .catch(() => '');
    return r === 't|streaming';
  }, 300_000);
  await s.c.b.waitForStatus(s.id, 'READY', 300_000).catch(async () => assert.fail(await s.logs()));
  // Both standbys stream from the new primary, one of them synchronous.
  await until(async () => {
    const r = await s.sql(
      next,
      "select count(*) filter (where state = 'streaming'), count(*) filter (where sync_state = 'sync') from pg_stat_replication",
    );
    return r === '2|1';
  }, 120_000);
  // What was committed while it was away is on it, and it still refuses writes.
  await until(async () => (await missing(s, old, w.acked)).length === 0, 60_000);
  await assert.rejects(s.sql(old, 'insert into w values (0)'), /read-only/);
  probing = false;
  await probe;
  assert.deepEqual(accepted, [], 'the old primary accepted a write after it came back');
  assert.ok(answers.has('read-only'), [...answers].join(', '));
  // One primary among the three nodes, the new one.
  assert.equal((await s.primary())?.name, next.name);
  assert.ok(nodes.length === 3);

  // Deleted while a standby's host is lost: the delete cannot reach its
  // frontend (every database host has one) nor its node. Back, the host
  // names its frontends in its heartbeat, the control plane answers that
  // this service is gone, and the host removes both: its address refuses
  // the service's port.
  const away = [1, 2, 3].find((i) => i !== next.hostIndex) as number;
  const frontend = join(c.host(away).dataDir, 'local', 'haproxy', 'services', `${s.id}.cfg`);
  const nodeDirs = () =>
    readdirSync(join(c.host(away).dataDir, 'local', 'instances')).filter((d) =>
      d.startsWith(`${s.id}n`),
    );
  c.killHost(away);
  await until(async () => {
    const hosts = JSON.parse(await c.cli('host', 'list', '--json')) as { address: string; state: string }[]; // prettier-ignore
    return hosts.some((h) => h.address === c.address(away) && h.state === 'LOST');
  }, 60_000);
  const deleted = await c.b.call('DELETE', c.b.servicePath(s.id));
  assert.equal(deleted.status, 202, deleted.text);
  await c.b.waitGone(s.id, 180_000);
  assert.ok(existsSync(frontend) && nodeDirs().length === 1, 'what the delete could not reach');
  c.linkUp(away);
  c.runAgent(away, { heartbeatMs: 500 });
  await until(async () => !existsSync(frontend) && nodeDirs().length === 0, 120_000);
  await assert.rejects(s.sql(s.endpointAt(away), 'select 1'));
}
