// etcd losing members under an HA service across hosts (issue 22's last
// test; docs/decisions.md, "HA across hosts", etcd losing its majority),
// and the status of a service whose standby does not stream (the verdict
// reads the leader's WAL senders, not Patroni's `running`).
//
// Three hosts, each running an etcd member; an HA service with two
// standbys, one synchronous; a writer committing through a standby's
// host's endpoint. A member is stopped by cutting its traffic (its ports
// refused in its host's namespace: as a dead process, but one its agent
// does not start again, which a kill -9 would be within a second):
//   - one member (a standby's host's): nothing changes. `basin host`
//     lists it UNHEALTHY, etcd keeps its quorum, the writes go on past
//     Patroni's leader TTL on the same primary, the service stays READY,
//     no failover in its logs.
//   - a second (the other standby's host's): etcd has no majority. With
//     Patroni's failsafe mode (Basin's setting) the primary reaches every
//     member's REST API and keeps running as the leader: writes go on
//     past two TTLs on the same primary (without it, the primary would
//     demote within retry_timeout and no one could be elected: writes
//     would stop until etcd had a quorum again).
//   - both back: etcd whole, the service READY, the same primary.
// Then the synchronous standby's replication is cut (its host forwards
// nothing between it and the primary's PostgreSQL port) while its
// Patroni, its PostgreSQL and its REST API run: Patroni names the other
// standby synchronous and the writes go on, but the service is UNSTABLE
// with "1 of 2 standbys stream", as on one host with a standby down;
// back to READY once it streams again. Every acknowledged commit is on
// every node at the end.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { until } from './cluster.js';
import { type HaNode, type HaService, haService, missing, writer } from './ha-service.js';

/** Patroni's leader TTL in the installation (ha-nodes.ts PATRONI_TIMING), in ms. */
const TTL_MS = 15_000;

interface EtcdView {
  quorum: boolean;
  members: { endpoint: string; healthy: boolean }[];
}

test(
  'etcd loses one member: nothing changes; loses its majority: the primary keeps serving writes (failsafe mode); back: READY. A standby that does not stream makes the service UNSTABLE',
  { timeout: 1_200_000 },
  async (t) => {
    const s = await haService(t, { prefix: 'etq', net: 23 });
    await quorum(t, s).catch(async (err: unknown) => {
      await s.diagnose();
      throw err;
    });
    await s.c.b.stop();
  },
);

async function quorum(t: TestContext, s: HaService): Promise<void> {
  const { c, id } = s;
  const { b, cli } = c;
  const cuts = new Set<string>();
  t.after(() => {
    for (const cmd of cuts) execFileSync('bash', ['-c', `${cmd} 2>/dev/null || true`]);
  });
  /**
   * Refuses host i's etcd ports to and from other machines (its peers' and
   * its clients'), in its namespace. Not on loopback: etcd 3.4's JSON
   * gateway, which Patroni speaks to, is a gRPC client of its own member's
   * port; refused there, it backs off (up to 2 min in gRPC) and keeps
   * answering "connection refused" long after the member is reachable
   * again, which a member cut off by the network never sees.
   */
  const cutEtcd = (i: number) => {
    nft(i, [
      'table inet etqetcd {',
      '  chain in { type filter hook input priority -200; iif != lo tcp dport { 2379, 2380 } reject with tcp reset; }', // prettier-ignore
      '  chain out { type filter hook output priority -200; oif != lo tcp dport 2380 reject with tcp reset; }', // prettier-ignore
      '}',
    ]);
    cuts.add(`ip netns exec ${c.namespace(i)} nft delete table inet etqetcd`);
  };
  const healEtcd = (i: number) => {
    const cmd = `ip netns exec ${c.namespace(i)} nft delete table inet etqetcd`;
    execFileSync('bash', ['-c', cmd]);
    cuts.delete(cmd);
  };
  const nft = (i: number, lines: string[]) =>
    execFileSync('ip', ['netns', 'exec', c.namespace(i), 'nft', '-f', '-'], {
      input: lines.join('\n'),
    });
  const etcd = async () => JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
  const memberOf = (e: EtcdView, i: number) =>
    e.members.find((m) => m.endpoint.includes(`//${c.address(i)}:`));
  const listed = async () =>
    JSON.parse(await cli('host', 'list', '--json')) as {
      address: string;
      etcd: { healthy: boolean } | null;
    }[];
  const status = async () => (await b.call('GET', b.servicePath(id))).body.status as string;
  const failovers = async () => (await s.logs()).match(/patroni: (failover|switchover)/g) ?? [];
  /** The node's Patroni log (its host's instances directory). */
  const patroniLog = (n: HaNode) => {
    const instances = join(c.host(n.hostIndex).dataDir, 'local', 'instances');
    const d = readdirSync(instances).find((x) => x.startsWith(`${id}n`)) as string;
    const file = join(instances, d, 'patroni', 'patroni.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  };

  const p = await s.primary();
  assert.ok(p, 'a primary');
  const [a, z] = [1, 2, 3].filter((i) => i !== p.hostIndex) as [number, number];
  await s.sql(p, 'create table w (i int primary key)');
  const w = writer(t, s, a);
  await until(async () => w.acked.length >= 20, 60_000);
  const failoversBefore = (await failovers()).length;
  // Writes acknowledged since `since` (performance.now()), and by whom.
  const ackedSince = (since: number) => w.acks.filter((x) => x.at > since);

  // 1. One member stops (a standby's host's): etcd keeps its quorum.
  cutEtcd(a);
  const cutOne = performance.now();
  await until(async () => {
    const e = await etcd();
    return e.quorum && memberOf(e, a)?.healthy === false;
  }, 120_000);
  const hosts = await listed();
  assert.equal(hosts.find((h) => h.address === c.address(a))?.etcd?.healthy, false, JSON.stringify(hosts)); // prettier-ignore
  assert.ok(
    hosts.filter((h) => h.address !== c.address(a)).every((h) => h.etcd?.healthy === true),
    JSON.stringify(hosts),
  );
  assert.match(await cli('host', 'etcd'), /2 of 3 members healthy, quorum/);
  // Nothing changes for the service, for longer than Patroni's leader TTL.
  await until(async () => ackedSince(cutOne + TTL_MS + 5000).length >= 5, 120_000);
  assert.ok(
    ackedSince(cutOne).every((x) => x.server === p.inner),
    'every write since the member stopped was taken by the same primary',
  );
  assert.equal((await s.primary())?.name, p.name);
  assert.equal(await status(), 'READY');
  assert.equal((await failovers()).length, failoversBefore, await s.logs());

  // 2. A second member stops: etcd has no majority.
  cutEtcd(z);
  const cutTwo = performance.now();
  await until(async () => !(await etcd()).quorum, 120_000);
  // (The member left answers, but without a leader none counts as healthy.)
  assert.match(await cli('host', 'etcd'), /NO QUORUM/);
  // The primary keeps serving writes for two TTLs and more: Patroni's
  // failsafe mode (it reaches both standbys' REST APIs). Without it the
  // primary demotes once it cannot renew its key (retry_timeout) and no
  // one can take it: this wait would never end.
  await until(async () => ackedSince(cutTwo + 2 * TTL_MS + 5000).length >= 5, 180_000).catch(() => {
    const last = w.acks.at(-1)?.at ?? 0;
    assert.fail(`writes stopped without etcd's quorum: the last commit ${((last - cutTwo) / 1000).toFixed(1)} s after it was lost`); // prettier-ignore
  });
  const during = ackedSince(cutTwo);
  assert.ok(
    during.every((x) => x.server === p.inner),
    'every write without a quorum was taken by the same primary',
  );
  assert.equal((await s.primary())?.name, p.name);
  assert.match(patroniLog(p), /continue to run as a leader because failsafe mode is enabled/);
  // The longest pause between two commits from the quorum's loss on (a
  // figure, not an assertion).
  const gaps = during.map((x, k) => x.at - (k === 0 ? cutTwo : (during[k - 1]?.at ?? cutTwo)));
  const statusWithout = await status();
  console.log(
    `without etcd's quorum: ${during.length} commits in ${((performance.now() - cutTwo) / 1000).toFixed(1)} s, longest pause ${(Math.max(...gaps) / 1000).toFixed(2)} s; the service ${statusWithout}`,
  );

  // 3. Both back: etcd whole, the service READY, nothing failed over.
  healEtcd(a);
  healEtcd(z);
  await until(async () => {
    const e = await etcd();
    return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
  }, 180_000);
  await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await s.logs()));
  assert.equal((await s.primary())?.name, p.name);
  assert.equal((await failovers()).length, failoversBefore, await s.logs());
  const healed = performance.now();
  await until(async () => ackedSince(healed).length >= 20, 60_000);

  // 4. The synchronous standby's replication cut, everything else running.
  const sync = await s.sql(p, "select application_name from pg_stat_replication where sync_state = 'sync'"); // prettier-ignore
  const cutNode = s.nodes.find((n) => n.name === sync);
  assert.ok(cutNode, `a synchronous standby: ${sync}`);
  const ci = cutNode.hostIndex;
  nft(ci, [
    'table inet etqrepl {',
    `  chain forward_cut { type filter hook forward priority -200; ip daddr ${p.host} tcp dport ${p.port} reject with tcp reset; ip saddr ${p.host} tcp sport ${p.port} reject with tcp reset; }`, // prettier-ignore
    '}',
  ]);
  const healRepl = `ip netns exec ${c.namespace(ci)} nft delete table inet etqrepl`;
  cuts.add(healRepl);
  // It runs (in recovery, answering), and no longer streams from the primary.
  await until(async () => {
    const r = await s.sql(p, `select count(*) from pg_stat_replication where application_name = '${cutNode.name}' and state = 'streaming'`); // prettier-ignore
    return r === '0';
  }, 120_000);
  assert.equal(await s.sql(cutNode, 'select pg_is_in_recovery()'), 't');
  await b.waitForStatus(id, 'UNSTABLE', 120_000);
  assert.match(
    await s.logs(),
    new RegExp(`degraded: 1 of 2 standbys stream \\(${cutNode.name} not streaming\\)`),
  );
  // Patroni named the other standby synchronous: the writes go on.
  const replCut = performance.now();
  await until(async () => ackedSince(replCut).length >= 20, 120_000);
  execFileSync('bash', ['-c', healRepl]);
  cuts.delete(healRepl);
  await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await s.logs()));
  await until(async () => {
    const r = await s.sql(
      p,
      "select count(*) filter (where state = 'streaming'), count(*) filter (where sync_state = 'sync') from pg_stat_replication",
    );
    return r === '2|1';
  }, 120_000);

  // Every acknowledged commit, on every node; one primary, the same.
  await w.stop();
  assert.ok(w.acked.length > 0);
  for (const n of s.nodes) {
    await until(async () => (await missing(s, n, w.acked)).length === 0, 120_000);
  }
  assert.equal((await s.primary())?.name, p.name);
}
