import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Host, hostState, nodeResourceId, type Placement } from '../../domain/hosts.js';
import { DONE } from '../../domain/progress.js';
import { patroniNodeId, type PatroniNodeView, type ServiceSpec } from '../driver.js';
import {
  apiPortOf,
  firstToStart,
  HaNodes,
  type HaNodesOptions,
  PATRONI_TIMING,
} from './ha-nodes.js';
import { silentLogger } from '../../lib/logger.js';
import { HostsDriver } from './hosts-driver.js';

const nodes = (...ports: number[]) =>
  ports.map((port, index) => ({ index, role: index === 0 ? 'primary' : 'standby', port }) as const);

test("a node's REST API listens on the next node's port: each node's two ports are distinct and the service's own", () => {
  const spec = { nodes: nodes(40002, 40003, 40004) };
  assert.deepEqual(
    [0, 1, 2].map((i) => apiPortOf(spec, i)),
    [40003, 40004, 40002],
  );
  // Never a node's own PostgreSQL port, whatever the order they are listed in.
  const shuffled = { nodes: [...nodes(5, 6, 7)].reverse() };
  for (const n of shuffled.nodes) assert.notEqual(apiPortOf(shuffled, n.index), n.port);
  assert.throws(() => apiPortOf({ nodes: nodes(5) }, 0), /not a node of an HA service/);
  assert.throws(() => apiPortOf(spec, 7), /not a node of an HA service/);
});

test("Patroni's timing across hosts: a loop and two retries within the TTL; a primary's stop over before the next loop can demote again", () => {
  const t = PATRONI_TIMING;
  assert.ok(t.loopWait + 2 * t.retryTimeout <= t.ttl);
  // Fast shutdown cut short after primaryStopTimeout, then an immediate
  // one given as long: both within loop_wait, the shortest a next loop
  // comes (Patroni 3.0.2 demotes again from it if the first has not ended).
  assert.ok(t.primaryStopTimeout > 0 && 2 * t.primaryStopTimeout <= t.loopWait);
});

test("a node's resource on its host is never another resource's id, nor another node's", () => {
  const ids = [0, 1, 2].map((i) => patroniNodeId('abcdefghij', i));
  assert.deepEqual(ids, ['abcdefghijn0', 'abcdefghijn1', 'abcdefghijn2']);
  // Resource ids are 10 characters (lib/ids.ts); the local driver's ids are [a-z0-9]{1,32}.
  for (const id of ids) assert.match(id, /^[a-z0-9]{11,32}$/);
});

test('on hosts, a service is under Patroni from its creation or never: setHA may not cross zero replicas', () => {
  const d = new HostsDriver({
    hosts: async () => [],
    placements: {
      list: async () => [],
      get: async () => undefined,
      put: async () => {},
      remove: async () => {},
    },
    identity: async () => ({ cert: '', key: '', ca: '' }),
    lostAfterMs: 15_000,
    clock: () => 0,
    log: silentLogger,
    serviceSpec: async () => undefined,
    forksBeingMade: async () => [],
  });
  assert.equal(d.capabilities.haReplicas, true);
  assert.equal(d.haChangeRefusal(2, 1), undefined);
  assert.equal(d.haChangeRefusal(1, 2), undefined);
  assert.equal(d.haChangeRefusal(0, 0), undefined);
  assert.match(d.haChangeRefusal(0, 2) ?? '', /at its creation only/);
  assert.match(d.haChangeRefusal(2, 0) ?? '', /keeps at least one replica/);
  // The pooler of an HA service across hosts runs on its nodes' hosts: nothing refuses it.
  assert.equal(d.capabilities.pooler, true);
});

/**
 * A fake installation of three hosts, one node each, answering the driver
 * calls HaNodes makes as the nodes' agents would, from a cluster state that
 * the restarts, switchovers and stops change.
 */
function fakeCluster(o: { others?: Partial<Host>[] } = {}) {
  const id = 'abcdefghij';
  const hosts = [0, 1, 2, ...(o.others ?? []).map((_, k) => 3 + k)].map(
    (i) =>
      ({
        id: `h${i}`,
        role: 'database',
        name: `h${i}`,
        address: `10.0.0.${i + 1}`,
        agentPort: 9444,
        zone: `z${i}`,
        capacity: { cpus: 2, memoryBytes: 8 * 2 ** 30, diskBytes: 2 ** 40 },
        usage: null,
        certSha256: '',
        joinedAt: '',
        heartbeatAt: 1000,
        ...o.others?.[i - 3],
      }) as unknown as Host,
  );
  const placements: Placement[] = [0, 1, 2].map((i) => ({
    resourceId: nodeResourceId(id, i),
    hostId: `h${i}`,
    cpuMillis: 500,
    memoryMb: 2048,
  }));
  const state = {
    leader: 0,
    sync: 2,
    stale: [['shared_buffers'], ['shared_buffers'], ['shared_buffers']] as string[][],
    patroni: [true, true, true],
    /** How each node's PostgreSQL last stopped (its control file), while its Patroni does not run. */
    stopped: [undefined, undefined, undefined] as (PatroniNodeView['stopped'] | undefined)[],
    /** Nodes started whose Patroni has not yet taken (or found) the leader key. */
    booting: new Set<number>(),
    /** Whether each standby's WAL receiver streams from the leader (Patroni says `streaming` regardless). */
    streams: [true, true, true],
  };
  const calls: string[] = [];
  const notes: string[] = [];
  /** The hosts each endpoint call went to, `apply h3` or `delete h3`. */
  const endpoints: string[] = [];
  /** Each node's delete, `<its local id> on h1`. */
  const nodeDeletes: string[] = [];
  // As node i's agent reads it: the leader's own node adds its WAL senders.
  const cluster = (i: number) => ({
    members: [0, 1, 2]
      .filter((i) => state.patroni[i])
      .map((i) => ({
        name: `node${i}`,
        role: i === state.leader && !state.booting.has(i) ? 'leader' : i === state.sync ? 'sync_standby' : 'replica', // prettier-ignore
        state: state.booting.has(i) ? 'starting' : i === state.leader ? 'running' : 'streaming',
        lagBytes: 0,
      })),
    ...(state.patroni[state.leader] && !state.booting.has(state.leader)
      ? { leader: `node${state.leader}` }
      : {}),
    paused: false,
    ...(i === state.leader
      ? {
          replication: [0, 1, 2]
            .filter((k) => k !== state.leader && state.patroni[k] && state.streams[k])
            .map((k) => ({
              name: `node${k}`,
              state: 'streaming',
              syncState: k === state.sync ? 'sync' : 'async',
            })),
        }
      : {}),
  });
  const options: HaNodesOptions = {
    hosts: async () => hosts,
    placements: { list: async () => placements, put: async () => {}, remove: async () => {} },
    etcdQuorum: async () => true,
    call: async (host, method, args) => {
      const i = Number(host.id.slice(1));
      switch (method) {
        case 'applyPatroniNode':
          if (!state.patroni[i]) {
            calls.push(`start node${i}`);
            [state.patroni[i], state.stopped[i]] = [true, undefined];
            state.booting.add(i);
          }
          return DONE;
        case 'applyPatroniEndpoint':
          endpoints.push(`apply ${host.id}`);
          return DONE;
        case 'deleteService':
          if (args[0] === id) endpoints.push(`delete ${host.id}`);
          else nodeDeletes.push(`${String(args[0])} on ${host.id}`);
          return DONE;
        case 'inspectPatroniNode':
          if (!state.patroni[i])
            return { patroni: false, cluster: null, stopped: state.stopped[i] };
          return { patroni: true, cluster: cluster(i) };
        case 'stalePatroniSettings':
          return state.stale[i];
        case 'restartPatroniNode':
          calls.push(`restart node${i}`);
          state.stale[i] = [];
          return DONE;
        case 'switchoverPatroni': {
          calls.push(`switchover node${i} to ${String(args[2])}`);
          const to = Number(String(args[2]).slice(4));
          [state.leader, state.sync] = [to, state.leader];
          return DONE;
        }
        case 'stopPatroniNode':
          calls.push(`stop node${i}`);
          state.patroni[i] = false;
          // The last stopped (the leader) has the newest checkpoint, as a primary.
          state.stopped[i] = {
            shutDown: i === state.leader ? 'primary' : 'standby',
            checkpoint: i === state.leader ? '400' : '300',
            timeline: 2,
          };
          return DONE;
        default:
          throw new Error(`unexpected call ${method}`);
      }
    },
    lostAfterMs: 15_000,
    lost: (h) => hostState(h, 2000, 15_000) === 'LOST',
    clock: () => 2000,
    log: silentLogger,
    notify: (_target, note) => notes.push(note.message),
  };
  const ha = new HaNodes(options);
  const spec = {
    serviceId: id,
    running: true,
    size: { shared: false, cpuMillis: 500, memoryGbs: 2 },
    ha: { replicaCount: 2, syncReplicaCount: 1 },
    pooler: { enabled: false, port: null },
    nodes: nodes(40002, 40003, 40004),
  } as unknown as ServiceSpec;
  const converge = async (s: ServiceSpec) => {
    for (let k = 0; k < 20; k++) if ((await ha.apply(s)).done) return;
    assert.fail(`no convergence: ${calls.join('; ')}`);
  };
  // The same installation seen by a control plane started anew (nothing in memory).
  const fresh = () => new HaNodes(options);
  return { ha, spec, state, hosts, calls, notes, endpoints, nodeDeletes, converge, fresh };
}

test('a resize that takes a restart: the standbys restarted one at a time, then a switchover to the synchronous standby, the old primary last', async () => {
  const f = fakeCluster();
  await f.converge(f.spec);
  assert.deepEqual(f.calls, [
    'restart node1',
    'restart node2',
    'switchover node0 to node2',
    'restart node0',
  ]);
  assert.ok(f.notes.some((n) => /basin: restarting node1, a standby, .*shared_buffers/.test(n)));
  assert.ok(f.notes.some((n) => n.startsWith('basin: switchover: the primary node0 needs a restart')), f.notes.join('\n')); // prettier-ignore
  // Nothing stale: nothing asked.
  f.calls.length = 0;
  await f.converge(f.spec);
  assert.deepEqual(f.calls, []);
});

test('a rolling restart goes on from what the nodes run: resumed with one standby done, it does not restart it again', async () => {
  const f = fakeCluster();
  f.state.stale[1] = [];
  await f.converge(f.spec);
  assert.deepEqual(f.calls, ['restart node2', 'switchover node0 to node2', 'restart node0']);
});

test('stopped: the standbys first, the leader last', async () => {
  const f = fakeCluster();
  f.state.stale = [[], [], []];
  await f.converge({ ...f.spec, running: false });
  assert.deepEqual(f.calls, ['stop node1', 'stop node2', 'stop node0']);
  assert.equal(await f.ha.inspect({ ...f.spec, running: false }), 'stopped');
  assert.ok(f.notes.includes('basin: stopping node1, node2 (standbys), then the leader'));
});

test('started after a stop: the node that stopped as the primary starts alone, the others once it leads, by a control plane started anew too', async () => {
  const f = fakeCluster();
  f.state.stale = [[], [], []];
  [f.state.leader, f.state.sync] = [1, 2];
  await f.converge({ ...f.spec, running: false });
  assert.deepEqual(f.calls, ['stop node0', 'stop node2', 'stop node1']);
  f.calls.length = 0;
  const ha = f.fresh();
  const first = await ha.apply(f.spec);
  assert.deepEqual(f.calls, ['start node1']);
  assert.equal(first.done, false);
  assert.match(first.done ? '' : first.reason, /node0 starts once node1, the primary when the service stopped, leads/); // prettier-ignore
  // Its Patroni runs, not leading yet: the others still wait.
  await ha.apply(f.spec);
  assert.deepEqual(f.calls, ['start node1']);
  f.state.booting.clear();
  await ha.apply(f.spec);
  assert.deepEqual(f.calls, ['start node1', 'start node0', 'start node2']);
  assert.ok(f.notes.some((n) => n.startsWith('basin: starting node1 first, alone')), f.notes.join('\n')); // prettier-ignore
});

test('which node starts first after a stop: the newest checkpoint, when a primary stopped there; otherwise every node', () => {
  const stopped = (
    shutDown: 'primary' | 'standby' | 'other',
    checkpoint: string,
    timeline = 2,
  ) => ({
    patroni: false,
    cluster: null,
    stopped: { shutDown, checkpoint, timeline },
  });
  const [a, b, c] = [0, 1, 2];
  // The leader stopped last, after its standbys.
  assert.equal(firstToStart([{ index: a, view: stopped('standby', '300') }, { index: b, view: stopped('primary', '400') }, { index: c, view: stopped('standby', '300') }]), b); // prettier-ignore
  // Its host lost (no view): Patroni picks among the others, started together.
  assert.equal(firstToStart([{ index: a, view: stopped('standby', '300') }, { index: b }, { index: c, view: stopped('standby', '300') }]), undefined); // prettier-ignore
  // A crash (no clean shutdown): every node.
  assert.equal(firstToStart([{ index: a, view: stopped('other', '400') }, { index: b, view: stopped('standby', '300') }]), undefined); // prettier-ignore
  // An old primary, stopped before a failover, is not the newest: a standby of the new timeline is.
  assert.equal(firstToStart([{ index: a, view: stopped('primary', '900', 2) }, { index: b, view: stopped('standby', '500', 3) }]), undefined); // prettier-ignore
  // LSNs past 2^53 compare as the 64-bit numbers they are.
  assert.equal(firstToStart([{ index: a, view: stopped('standby', '18446744073709551000') }, { index: b, view: stopped('primary', '18446744073709551001') }]), b); // prettier-ignore
  // Started alone and running, not leading yet: the others wait for it, not for another.
  const up = { patroni: true, cluster: { members: [{ name: 'node1', role: 'replica' as const, state: 'starting' }], paused: false } }; // prettier-ignore
  assert.equal(firstToStart([{ index: a, view: stopped('standby', '300') }, { index: b, view: up }], b), b); // prettier-ignore
  assert.equal(firstToStart([{ index: a, view: stopped('standby', '300') }, { index: b, view: up }]), undefined); // prettier-ignore
  // It leads: every node.
  const leads = { patroni: true, cluster: { members: [{ name: 'node1', role: 'leader' as const, state: 'running' }], leader: 'node1', paused: false } }; // prettier-ignore
  assert.equal(firstToStart([{ index: a, view: stopped('standby', '300') }, { index: b, view: leads }], b), undefined); // prettier-ignore
});

test('a standby Patroni calls running but that does not stream from the leader: UNSTABLE, no restart while so, READY once it streams again', async () => {
  const f = fakeCluster();
  f.state.stale = [[], [], []];
  await f.converge(f.spec);
  assert.equal(await f.ha.inspect(f.spec), 'running');
  f.state.streams[2] = false; // the synchronous standby's connection to the leader is cut
  assert.equal(await f.ha.inspect(f.spec), 'failed');
  assert.ok(
    f.notes.includes('basin: degraded: 1 of 2 standbys stream (node2 not streaming)'),
    f.notes.join('\n'),
  );
  // A rolling restart waits for the cluster to be whole again.
  f.state.stale = [[], ['shared_buffers'], []];
  const p = await f.ha.apply(f.spec);
  assert.equal(p.done, false);
  assert.deepEqual(f.calls, []);
  f.state.streams[2] = true;
  f.state.stale = [[], [], []];
  assert.equal(await f.ha.inspect(f.spec), 'running');
});

test("every database host's endpoint, a drained one too, is applied and deleted; a lost host's and a repository host's are not", async () => {
  const f = fakeCluster({
    others: [
      { name: 'drained', draining: true },
      { name: 'lost', heartbeatAt: -100_000 },
      { name: 'repository', role: 'repository' },
    ],
  });
  f.state.stale = [[], [], []];
  await f.converge(f.spec);
  assert.deepEqual([...new Set(f.endpoints)].sort(), ['apply h0', 'apply h1', 'apply h2', 'apply h3']); // prettier-ignore
  f.endpoints.length = 0;
  assert.equal((await f.ha.delete(f.spec.serviceId)).done, true);
  assert.deepEqual(f.endpoints.sort(), ['delete h0', 'delete h1', 'delete h2', 'delete h3']);
});

test("a delete does not wait for a lost host's node: the others and every reachable endpoint go, then the rows", async () => {
  const f = fakeCluster();
  f.state.stale = [[], [], []];
  await f.converge(f.spec);
  f.endpoints.length = 0;
  (f.hosts[1] as { heartbeatAt: number }).heartbeatAt = -100_000; // node1's host lost
  assert.equal((await f.ha.delete(f.spec.serviceId)).done, true);
  assert.deepEqual(f.nodeDeletes.sort(), [`${f.spec.serviceId}n0 on h0`, `${f.spec.serviceId}n2 on h2`]); // prettier-ignore
  assert.deepEqual(f.endpoints.sort(), ['delete h0', 'delete h2']);
});
