import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type ClusterState,
  type PatroniMemberState,
  patroniChanges,
  patroniVerdict,
} from './patroni-cluster.js';

const m = (name: string, role: PatroniMemberState['role'], state: string, timeline = 1) => ({
  name,
  role,
  state,
  timeline,
});
const cluster = (leader: string | undefined, ...members: PatroniMemberState[]): ClusterState => ({
  members,
  ...(leader ? { leader } : {}),
  paused: false,
});
const ask = { standbys: 2, sync: 1 };
/** The cluster as read on its leader's node: with the leader's WAL senders (GET /patroni). */
const senders = (c: ClusterState, ...w: [string, string, string][]): ClusterState => ({
  ...c,
  replication: w.map(([name, state, syncState]) => ({ name, state, syncState })),
});

test('READY when a leader runs and every standby asked for streams, as many synchronous as asked', () => {
  const healthy = senders(
    cluster(
      'node0',
      m('node0', 'leader', 'running'),
      m('node1', 'sync_standby', 'streaming'),
      m('node2', 'replica', 'running'), // Patroni 3.0's word for a replica that runs
    ),
    ['node1', 'streaming', 'sync'],
    ['node2', 'streaming', 'async'],
  );
  assert.deepEqual(patroniVerdict(healthy, ask), { health: 'running' });
});

test('UNSTABLE, saying what is missing: no answer, no leader, a standby gone, no synchronous one', () => {
  assert.match(patroniVerdict(undefined, ask).reason ?? '', /no node's Patroni answers/);
  const leaderless = cluster(undefined, m('node1', 'replica', 'running'));
  assert.deepEqual(patroniVerdict(leaderless, ask).health, 'failed');
  assert.match(patroniVerdict(leaderless, ask).reason ?? '', /no leader.*etcd has no quorum/);
  const oneLost = senders(
    cluster(
      'node1',
      m('node1', 'leader', 'running', 2),
      m('node2', 'sync_standby', 'streaming', 2),
    ),
    ['node2', 'streaming', 'sync'],
  );
  assert.match(patroniVerdict(oneLost, ask).reason ?? '', /degraded: 1 of 2 standbys stream/);
  assert.deepEqual(patroniVerdict(oneLost, { standbys: 1, sync: 1 }), { health: 'running' });
  const rebuilding = senders(
    cluster(
      'node1',
      m('node1', 'leader', 'running', 2),
      m('node0', 'replica', 'starting', 1),
      m('node2', 'replica', 'streaming', 2),
    ),
    ['node2', 'streaming', 'async'],
  );
  assert.match(
    patroniVerdict(rebuilding, ask).reason ?? '',
    /1 of 2 standbys stream \(node0 not streaming\)/,
  );
  assert.match(
    patroniVerdict(rebuilding, { standbys: 1, sync: 1 }).reason ?? '',
    /0 of 1 synchronous standbys/,
  );
  const stopped = cluster('node0', m('node0', 'leader', 'stopped'));
  assert.match(patroniVerdict(stopped, { standbys: 0, sync: 0 }).reason ?? '', /node0 is stopped/);
  assert.match(patroniVerdict({ ...stopped, paused: true }, ask).reason ?? '', /paused/);
});

test("a standby Patroni calls running counts only when the leader's WAL senders say it streams", () => {
  // Patroni 3.0.2 says `running` of both, and names node1 synchronous
  // (its /sync key), while node1's WAL receiver cannot reach the leader.
  const members = cluster(
    'node0',
    m('node0', 'leader', 'running'),
    m('node1', 'sync_standby', 'running'),
    m('node2', 'replica', 'running'),
  );
  const cut = senders(members, ['node2', 'streaming', 'async']);
  assert.deepEqual(patroniVerdict(cut, ask), {
    health: 'failed',
    reason: 'degraded: 1 of 2 standbys stream (node1 not streaming)',
  });
  // Catching up is not streaming yet.
  const catchup = senders(members, ['node1', 'catchup', 'sync'], ['node2', 'streaming', 'async']);
  assert.match(patroniVerdict(catchup, ask).reason ?? '', /node1 not streaming/);
  // Both stream, but the leader's PostgreSQL waits for none of them: not synchronous.
  const noneSync = senders(
    members,
    ['node1', 'streaming', 'potential'],
    ['node2', 'streaming', 'async'],
  );
  assert.match(patroniVerdict(noneSync, ask).reason ?? '', /0 of 1 synchronous standbys/);
  // A WAL sender to someone not a member (a read replica set's node) is no standby.
  const reader = senders(members, ['node2', 'streaming', 'sync'], ['rs0', 'streaming', 'async']);
  assert.match(patroniVerdict(reader, ask).reason ?? '', /1 of 2 standbys stream \(node1/);
  // Read elsewhere than on the leader's node: nobody is known to stream.
  assert.match(
    patroniVerdict(members, ask).reason ?? '',
    /the leader node0's replication cannot be read/,
  );
  assert.deepEqual(
    patroniVerdict(
      senders(members, ['node1', 'streaming', 'quorum'], ['node2', 'streaming', 'quorum']),
      ask,
    ),
    { health: 'running' },
  );
});

test("Patroni's failover is told as Basin's own entry, once: the new leader, its timeline, the old one's fate", () => {
  const before = cluster(
    'node0',
    m('node0', 'leader', 'running'),
    m('node1', 'sync_standby', 'streaming'),
    m('node2', 'replica', 'streaming'),
  );
  const after = cluster(
    'node1',
    m('node1', 'leader', 'running', 2),
    m('node2', 'sync_standby', 'streaming', 2),
  );
  // Told once per timeline, however many readings see it (driver-notes.ts looks first).
  const once = { ever: ['patroni: ', '(timeline 2)'] };
  assert.deepEqual(patroniChanges(before, after), [
    {
      severity: 'WARNING',
      message: 'patroni: failover: node1 was promoted (timeline 2); the primary node0 is gone',
      once,
    },
  ]);
  // Each node named with its host, when the caller knows it.
  const hosts: Record<string, string> = { node0: 'h1, 10.0.0.1', node1: 'h2, 10.0.0.2' };
  assert.deepEqual(
    patroniChanges(before, after, undefined, (n) => hosts[n]),
    [
      {
        severity: 'WARNING',
        message:
          'patroni: failover: node1 (on h2, 10.0.0.2) was promoted (timeline 2); the primary node0 (on h1, 10.0.0.1) is gone',
        once,
      },
    ],
  );
  assert.deepEqual(patroniChanges(after, after), []);
  // The old primary back, rewound, as a replica: it joins.
  const rejoined = cluster(
    'node1',
    m('node1', 'leader', 'running', 2),
    m('node2', 'sync_standby', 'streaming', 2),
    m('node0', 'replica', 'streaming', 2),
  );
  assert.deepEqual(patroniChanges(after, rejoined), [
    { severity: 'LOG', message: 'patroni: node0 joined as a replica' },
  ]);
});

test('a switchover, a first leader, a leader lost and a member gone are told apart', () => {
  const a = cluster('node0', m('node0', 'leader', 'running'), m('node1', 'sync_standby', 'streaming')); // prettier-ignore
  const b = cluster('node1', m('node1', 'leader', 'running', 2), m('node0', 'sync_standby', 'streaming', 2)); // prettier-ignore
  assert.match(patroniChanges(a, b)[0]?.message ?? '', /switchover: node1 is the primary \(timeline 2\), node0 follows it/); // prettier-ignore
  assert.match(patroniChanges(cluster(undefined), a)[0]?.message ?? '', /node0 leads/);
  assert.equal(patroniChanges(cluster(undefined), a).length, 2); // and node1 joined
  const none = cluster(undefined, m('node1', 'replica', 'running'));
  assert.deepEqual(patroniChanges(a, none)[0]?.severity, 'ERROR');
  const gone = cluster('node0', m('node0', 'leader', 'running'));
  assert.deepEqual(patroniChanges(a, gone), [
    { severity: 'WARNING', message: 'patroni: node1 left the cluster' },
  ]);
  assert.deepEqual(patroniChanges(undefined, a), []);
});

test('a switchover Basin asked for is told as one while the old primary still restarts; unasked, it is a failover', () => {
  const a = cluster('node0', m('node0', 'leader', 'running'), m('node1', 'sync_standby', 'streaming')); // prettier-ignore
  const b = cluster('node1', m('node1', 'leader', 'running', 2), m('node0', 'replica', 'stopped', 1)); // prettier-ignore
  assert.match(patroniChanges(a, b)[0]?.message ?? '', /failover: node1 was promoted/);
  const asked = { from: 'node0', to: 'node1' };
  assert.match(patroniChanges(a, b, asked)[0]?.message ?? '', /switchover: node1 is the primary \(timeline 2\), node0 follows it/); // prettier-ignore
  // Another leader than the one asked for: Patroni decided otherwise.
  assert.match(patroniChanges(a, b, { from: 'node0', to: 'node2' })[0]?.message ?? '', /failover/);
});
