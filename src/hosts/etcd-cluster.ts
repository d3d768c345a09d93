// The control plane's side of etcd on the hosts (docs/decisions.md, "etcd
// on the hosts"). It decides which hosts run a member and tells each host's
// agent how to start its own (memberPlan, asked by the agent); etcd itself
// keeps who is a member (`member list`), the store only what must never
// change once decided (the bootstrap: the first members and the cluster's
// token). A loop (superviseEtcd) turns RBAC on once the cluster answers, and
// replaces the member of a host lost or removed when another host can take it.

import { randomBytes } from 'node:crypto';
import { AppError } from '../domain/errors.js';
import {
  desiredMembers,
  type EtcdMemberPlan,
  etcdClientUrl,
  etcdPeerUrl,
  ETCD_ROOT_USER,
  pickMemberHosts,
} from '../domain/etcd.js';
import { type Host, hostState } from '../domain/hosts.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Store } from '../store/store.js';
import { etcdMembersCa, etcdRootIdentity } from './etcd-ca.js';
import { placeEtcdLeader } from './etcd-leader.js';
import {
  type EtcdClient,
  etcdctl,
  type EtcdMember,
  endpointStatus,
  memberList,
} from './etcdctl.js';

interface Bootstrap {
  token: string;
  members: { hostId: string; address: string }[];
}

const BOOTSTRAP = 'etcd-bootstrap';
const FORMED = 'etcd-formed';

async function bootstrap(store: Store): Promise<Bootstrap | undefined> {
  const found = await store.secrets.get(BOOTSTRAP);
  return found === undefined ? undefined : (JSON.parse(found) as Bootstrap);
}

/** The control plane as etcd's `root`, reaching every registered host's client port. */
export async function rootClient(store: Store, hosts?: readonly Host[]): Promise<EtcdClient> {
  const all = hosts ?? (await store.hosts.list());
  const boot = await bootstrap(store);
  const addresses = new Set([
    ...(boot?.members ?? []).map((m) => m.address),
    ...all.map((h) => h.address),
  ]);
  return {
    ...(await etcdRootIdentity(store)),
    ca: (await etcdMembersCa(store)).cert,
    endpoints: [...addresses].map(etcdClientUrl),
  };
}

/** The host a member runs on: by name once it started, by its peer URL before. */
function hostOf(m: EtcdMember, hosts: readonly Host[]): Host | undefined {
  return hosts.find((h) => h.id === m.name || m.peerUrls.includes(etcdPeerUrl(h.address)));
}

/**
 * How `host` starts its member; null: it runs none (or no more: it was
 * removed). Throws UNAVAILABLE when that cannot be told (etcd does not
 * answer, and the host is not one of the first members).
 */
export async function memberPlan(store: Store, host: Host): Promise<EtcdMemberPlan | null> {
  const boot = await bootstrap(store);
  if (!boot) return null;
  const bootPlan: EtcdMemberPlan = {
    name: host.id,
    initialCluster: boot.members.map((m) => `${m.hostId}=${etcdPeerUrl(m.address)}`).join(','),
    state: 'new',
    token: boot.token,
  };
  const inBoot = boot.members.some((m) => m.hostId === host.id);
  const hosts = await store.hosts.list();
  let members: EtcdMember[];
  try {
    members = await recentMemberList(store, hosts);
  } catch (err) {
    // Before the cluster forms no member answers: the first ones start from the bootstrap.
    if (inBoot && (await store.secrets.get(FORMED)) === undefined) return bootPlan;
    throw new AppError(
      'UNAVAILABLE',
      `etcd does not answer the control plane: ${(err as Error).message}`,
    );
  }
  const mine = members.find((m) => hostOf(m, hosts)?.id === host.id);
  if (!mine) return null;
  if (inBoot && (await store.secrets.get(FORMED)) === undefined) return bootPlan;
  return {
    name: host.id,
    initialCluster: members
      .map((m) => `${hostOf(m, hosts)?.id ?? m.name}=${m.peerUrls[0] ?? ''}`)
      .join(','),
    state: 'existing',
    token: boot.token,
  };
}

// Every host's agent asks now and then: one `member list` answers the
// questions of a second, not one per question.
const recent = new WeakMap<Store, { at: number; list: Promise<EtcdMember[]> }>();
async function recentMemberList(store: Store, hosts: readonly Host[]): Promise<EtcdMember[]> {
  let last = recent.get(store);
  if (last === undefined || Date.now() - last.at > 1000) {
    const list = rootClient(store, hosts).then(memberList);
    last = { at: Date.now(), list };
    recent.set(store, last);
    // A failure is not kept: the next question asks again.
    list.catch(() => {
      if (recent.get(store)?.list === list) recent.delete(store);
    });
  }
  return last.list;
}

/** What one pass of the loop keeps between passes (in this process only). */
export interface EtcdLoopState {
  authOn: boolean;
  /** When etcd's leadership was last moved (placeLeader). */
  movedAt?: number;
}

/**
 * One pass: bootstrap when enough hosts are online, then turn RBAC on, then
 * replace one member whose host is lost or gone, or add one up to the
 * desired count. Idempotent; several control-plane processes may run it.
 */
export async function reconcileEtcd(
  o: { store: Store; clock: Clock; log: Logger; lostAfterMs: number },
  state: EtcdLoopState,
): Promise<void> {
  const { store, log } = o;
  const hosts = await store.hosts.list();
  const now = o.clock();
  // Members run on database hosts: a repository host keeps to the backups.
  const online = hosts.filter(
    (h) => h.role === 'database' && hostState(h, now, o.lostAfterMs) === 'ONLINE',
  );
  const boot = await bootstrap(store);
  if (!boot) {
    const chosen = pickMemberHosts(online, [], desiredMembers(online.length));
    if (chosen.length === 0) return;
    const made: Bootstrap = {
      token: `basin-${randomBytes(8).toString('hex')}`,
      members: chosen.map((h) => ({ hostId: h.id, address: h.address })),
    };
    await store.transaction((tx) => tx.secrets.putIfAbsent(BOOTSTRAP, JSON.stringify(made)));
    log.info({ hosts: chosen.map((h) => h.name) }, 'etcd: bootstrapping members on these hosts');
    return;
  }
  const client = await rootClient(store, hosts);
  const members = await memberList(client);
  if (members.every((m) => m.started)) {
    await store.transaction((tx) => tx.secrets.putIfAbsent(FORMED, new Date(now).toISOString()));
  }
  if (!state.authOn) {
    await enableAuth(client);
    state.authOn = true;
    log.info({}, 'etcd: RBAC on (the control plane is root)');
  }
  const isOnline = (h: Host | undefined) =>
    h !== undefined && hostState(h, now, o.lostAfterMs) === 'ONLINE';
  const memberHosts = members.map((m) => hostOf(m, hosts));
  const candidates = online.filter((h) => !memberHosts.some((m) => m?.id === h.id));
  if (candidates.length === 0) return;
  const dead = members.find((m) => !isOnline(hostOf(m, hosts)));
  if (dead) {
    // A majority of the others must agree to the removal: without one it fails, and is retried.
    await etcdctl(client, ['member', 'remove', dead.id]);
    const gone = hostOf(dead, hosts);
    log.warn(
      { member: dead.id, host: gone?.name ?? dead.name },
      'etcd: removed the member of a host that is lost or gone',
    );
    const rest = memberHosts.filter((h): h is Host => h !== undefined && h !== gone);
    await addMember(o, client, candidates, rest);
    return;
  }
  if (members.length < desiredMembers(online.length) && members.every((m) => m.started)) {
    await addMember(
      o,
      client,
      candidates,
      memberHosts.filter((h): h is Host => h !== undefined),
    );
  }
}

async function addMember(
  o: { log: Logger },
  client: EtcdClient,
  candidates: readonly Host[],
  members: readonly Host[],
): Promise<void> {
  const [next] = pickMemberHosts(candidates, members, 1);
  if (!next) return;
  await etcdctl(client, ['member', 'add', next.id, `--peer-urls=${etcdPeerUrl(next.address)}`]);
  o.log.info({ host: next.name }, 'etcd: added a member on this host');
}

/** Ignores the error etcd gives when what is asked was done already. */
async function idempotent(run: Promise<unknown>): Promise<void> {
  try {
    await run;
  } catch (err) {
    if (!/already/i.test((err as Error).message)) throw err;
  }
}

/**
 * RBAC on, with the control plane as root (idempotent). Also called before
 * a service's identity is granted: until it is on, any certificate of the
 * clients CA could read every key, so none is issued before.
 */
export async function enableAuth(client: EtcdClient): Promise<void> {
  // No password: only a certificate with CN=root is root (client-cert auth).
  await idempotent(etcdctl(client, ['user', 'add', ETCD_ROOT_USER, '--no-password']));
  await idempotent(etcdctl(client, ['user', 'grant-role', ETCD_ROOT_USER, 'root']));
  await idempotent(etcdctl(client, ['auth', 'enable']));
}

/**
 * Moves etcd's leadership off the hosts of Patroni's primaries when it can
 * (etcd-leader.ts); nothing before the cluster formed and RBAC is on.
 */
/**
 * The least time between two moves of etcd's leadership. Where the
 * primaries are is read from Patroni's keys, which a service's own user can
 * write (its Patroni's etcd credentials are readable by it): a tenant
 * flipping its member's address could otherwise make etcd elect a leader
 * every few seconds, a pause of every service's writes to etcd each time.
 */
const MOVE_EVERY_MS = 30_000;

async function placeLeader(o: { store: Store; log: Logger }, state: EtcdLoopState): Promise<void> {
  if (!state.authOn || (await o.store.secrets.get(FORMED)) === undefined) return;
  if (state.movedAt !== undefined && Date.now() - state.movedAt < MOVE_EVERY_MS) return;
  const client = await rootClient(o.store);
  if ((await placeEtcdLeader(o, client, await memberList(client))) !== undefined) {
    state.movedAt = Date.now();
  }
}

/**
 * Runs reconcileEtcd every `intervalMs` in the background, and looks at
 * where etcd's leader is every `leaderEveryMs`; their failures logged once
 * each.
 */
export function superviseEtcd(o: {
  store: Store;
  clock: Clock;
  log: Logger;
  lostAfterMs: number;
  intervalMs?: number;
  leaderEveryMs?: number;
}): { close(): Promise<void> } {
  const state: EtcdLoopState = { authOn: false };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let lastError = '';
  let lastLeaderError = '';
  let leaderAt = 0;
  const pass = async () => {
    try {
      await reconcileEtcd(o, state);
      lastError = '';
    } catch (err) {
      const message = (err as Error).message;
      if (message !== lastError) o.log.warn({ err: message }, 'etcd: a pass did not complete');
      lastError = message;
    }
    if (Date.now() - leaderAt >= (o.leaderEveryMs ?? 5000)) {
      leaderAt = Date.now();
      try {
        await placeLeader(o, state);
        lastLeaderError = '';
      } catch (err) {
        const message = (err as Error).message;
        if (message !== lastLeaderError) {
          o.log.warn({ err: message }, "etcd: could not look at or move etcd's leader");
        }
        lastLeaderError = message;
      }
    }
    if (!stopped) timer = setTimeout(() => (running = pass()), o.intervalMs ?? 2000);
  };
  running = pass();
  return {
    async close() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

export interface EtcdHealth {
  members: {
    hostId: string | null;
    id: string;
    endpoint: string;
    started: boolean;
    healthy: boolean;
    leader: boolean;
  }[];
  /** A majority of the members answer. */
  quorum: boolean;
}

/** Each member's health and who leads; null when there is no cluster (yet) or it does not answer. */
export async function etcdHealth(store: Store): Promise<EtcdHealth | null> {
  if (!(await bootstrap(store))) return null;
  const hosts = await store.hosts.list();
  const client = await rootClient(store, hosts);
  let members: EtcdMember[];
  try {
    members = await memberList(client);
  } catch {
    return { members: [], quorum: false };
  }
  const urls = members.map(
    (m) => m.clientUrls[0] ?? etcdClientUrl(hostOf(m, hosts)?.address ?? ''),
  );
  const status = await endpointStatus(client, urls);
  const shown = members.map((m, i) => ({
    hostId: hostOf(m, hosts)?.id ?? null,
    id: m.id,
    endpoint: urls[i] ?? '',
    started: m.started,
    healthy: status[i]?.healthy ?? false,
    leader: status[i]?.leader ?? false,
  }));
  return { members: shown, quorum: shown.filter((m) => m.healthy).length * 2 > members.length };
}
