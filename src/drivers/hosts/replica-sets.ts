// Read replica sets across hosts (docs/decisions.md, "Read replica sets
// across hosts"): the control plane places a set's nodes on database hosts
// other than its service's (placement.ts chooseReplicaHosts, one placement
// row per node, `<set>:node<i>`), and drives each host's local driver
// (local/converge/remote-replica.ts):
//
//   1. the primary's host admits the set (admitReplicaSet: the set's host
//      addresses for its pg_hba, the replication role and the set's slots)
//      and answers the role's password; the service is then converged
//      there (its pg_hba admits them);
//   2. each node's host runs its node (`<set>n<i>` there), a hot standby
//      copied and streaming over TLS from the primary's host address;
//   3. every online database host's HAProxy serves the set's port,
//      leastconn over the nodes at their hosts' addresses.
//
// A set of an HA service (its nodes under Patroni) differs in three
// things: its nodes stream through the service's endpoint on their own
// host (HAProxy leads to whichever node Patroni made the leader, so the
// set follows a failover), as the replication role with the password the
// control plane derives for the service (service-secrets.ts), without
// slots of their own (Patroni owns its cluster's); every node's Patroni
// pg_hba admits the set's hosts (HaNodes' readersOf: the service is
// converged again after the set is placed, and after it is deleted).

import {
  type Host,
  nodePlacements,
  nodeResourceId,
  type Placement,
  takesNodes,
} from '../../domain/hosts.js';
import type { Target } from '../../domain/logs.js';
import { DONE, type Progress, type ProgressNote, wait } from '../../domain/progress.js';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import {
  type AdmittedReplicaSet,
  DriverError,
  type Health,
  patroniNodeId,
  type ReplicaNodeSpec,
  type ReplicaSetServer,
  type ReplicaSetSpec,
  type ServiceSpec,
} from '../driver.js';
import { chooseReplicaHosts, reservation, roomLeft } from './placement.js';

export interface ReplicaSetsOptions {
  hosts(): Promise<Host[]>;
  placements: {
    list(): Promise<Placement[]>;
    put(p: Placement): Promise<void>;
    remove(resourceId: string): Promise<void>;
  };
  /** One driver call on a host's agent (hosts-driver.ts). */
  call(host: Host, method: string, args: unknown[]): Promise<unknown>;
  /** An HA service's replication role's password (derived in the control plane). */
  replicationSecret(serviceId: string): Promise<string>;
  /** The service converged on its host as the engine would (hosts-driver.ts applyService). */
  applyService(spec: ServiceSpec): Promise<Progress>;
  /** The service a set streams from, and its spec (for a delete, given the set's id only). */
  serviceOf(replicaSetId: string): Promise<ServiceSpec | undefined>;
  lostAfterMs: number;
  /** Whether a host is lost, as the driver judges it (hosts-driver.ts lost). */
  lost(host: Host): boolean;
  clock: Clock;
  log: Logger;
  /** An entry in the set's logs (Basin's own, as its operations' notes). */
  notify?(target: Target, note: ProgressNote): void;
}

/**
 * How long a node moving off a drained host keeps running once no
 * endpoint leads to it: a session that HAProxy led there just before
 * (connecting, or a short query) ends first, not cut by the node's stop.
 * A longer session is cut (its client reconnects through the endpoint).
 */
const HAND_OFF_GRACE_MS = 5_000;

/** A node's slot and application_name on its primary (as local/converge/replica-set.ts names them). */
const slotOf = (setId: string, index: number) => `rs_${setId}_${index}`;

/** A set's placement rows, by node index. */
export function replicaRows(placements: readonly Placement[], setId: string): Placement[] {
  return nodePlacements(placements, setId).filter((p) => p.resourceId !== setId);
}

const rowIndex = (setId: string, p: Placement) =>
  Number(p.resourceId.slice(`${setId}:node`.length));

export class ReplicaSets {
  /** When a moving node's endpoints stopped leading to it (`<set>:<index>`): its grace starts. */
  private readonly handedOff = new Map<string, number>();
  /** Each set's last "no room to move off a drained host", said once in its logs. */
  private readonly stuck = new Map<string, string>();

  constructor(private readonly o: ReplicaSetsOptions) {}

  /** Why a set of `nodes` nodes of `size` cannot be placed now (a 503's message), or undefined. */
  async refusal(
    service: { serviceId: string },
    need: { cpuMillis: number; memoryMb: number },
    nodes: number,
  ): Promise<string | undefined> {
    const hosts = await this.o.hosts();
    const placements = await this.o.placements.list();
    const avoid = this.serviceHosts(service.serviceId, hosts, placements);
    if (avoid.length === 0) return undefined; // not placed yet: its apply says
    if (chooseReplicaHosts(this.online(hosts), placements, need, nodes, avoid)) return undefined;
    const others = this.online(hosts).filter(
      (h) => h.role === 'database' && !avoid.some((a) => a.id === h.id),
    ).length;
    return (
      `a read replica set's nodes go to database hosts other than its service's, and ` +
      (others === 0
        ? 'no other database host is online'
        : `the ${others} other online database host(s) have no room for ${nodes} node(s) of ${need.cpuMillis} millis and ${need.memoryMb} MB`) +
      ': add a host, choose a smaller size or fewer nodes.'
    );
  }

  /**
   * Why the set `setId` cannot take `need` (a resize) where its nodes are:
   * a host of its nodes without room for them at the new size beside what
   * else it holds (the set's own rows counted at the new size). Undefined
   * when they fit, or when the size grows in neither CPU nor memory.
   */
  async resizeRefusal(
    setId: string,
    need: { cpuMillis: number; memoryMb: number },
  ): Promise<string | undefined> {
    return resizeShortfall(await this.o.hosts(), await this.o.placements.list(), setId, need);
  }

  /** The host addresses of the nodes of `setIds` (an HA service's readers, for its pg_hba). */
  async readers(setIds: readonly string[]): Promise<string[]> {
    if (setIds.length === 0) return [];
    const hosts = await this.o.hosts();
    const placements = await this.o.placements.list();
    const ids = setIds.flatMap((id) => replicaRows(placements, id).map((p) => p.hostId));
    return [...new Set(ids)]
      .map((id) => hosts.find((h) => h.id === id)?.address)
      .filter((a): a is string => a !== undefined)
      .sort();
  }

  /** One step of the set towards its spec on its hosts. */
  async apply(spec: ReplicaSetSpec, primaryHost: Host): Promise<Progress> {
    if (spec.nodePorts.length !== spec.nodes) {
      throw new DriverError(`Read replica set ${spec.replicaSetId} has no ports for its nodes.`, false); // prettier-ignore
    }
    const ha = spec.primary.nodes.length > 1;
    // A node on a drained host moves first (its old copy removed), one at a time.
    const moving = await this.moveOffDraining(spec);
    if (moving !== undefined && typeof moving !== 'string') return moving;
    const placed = await this.place(spec, primaryHost);
    const hosts = await this.o.hosts();
    // 1. The primary admits the set's hosts, then is converged (its
    // pg_hba; an HA service's: every node's Patroni, from the rows above).
    let secret: string;
    if (ha) {
      secret = await this.o.replicationSecret(spec.serviceId);
    } else {
      const admitted = (await this.o.call(primaryHost, 'admitReplicaSet', [
        spec.primary,
        {
          replicaSetId: spec.replicaSetId,
          slots: spec.nodePorts.map((_, i) => slotOf(spec.replicaSetId, i)),
          addresses: [...new Set([...placed.values()].map((h) => h.address))],
        },
      ])) as AdmittedReplicaSet;
      if (!admitted.done) return admitted;
      secret = admitted.secret;
    }
    // An HA service's waits on a lost host's node only (the others got
    // their pg_hba in the same call): the set goes on.
    const converged = await this.o.applyService(spec.primary);
    if (!converged.done && !ha) return converged;
    // 2. Each node on its host, streaming from the primary's host address
    // (an HA service's: its endpoint on the node's own host).
    const names = [...new Set(hosts.filter((h) => h.role === 'database').map((h) => h.address))];
    const primaryPort =
      spec.primary.nodes.find((n) => n.role === 'primary')?.port ?? spec.primary.port;
    const pooler = setPoolers(spec, placed);
    const results = await Promise.allSettled(
      [...placed].map(async ([index, host]) => {
        if (this.lost(host)) return wait(2000, `node${index}'s host ${host.name} is lost`);
        const node: ReplicaNodeSpec = {
          set: spec,
          index,
          source: ha
            ? { host: host.address, port: spec.primary.port }
            : { host: primaryHost.address, port: primaryPort },
          secret,
          names,
          ...(ha ? { noSlot: true } : {}),
          ...pooler(index),
        };
        return (await this.o.call(host, 'applyReplicaNode', [
          patroniNodeId(spec.replicaSetId, index),
          node,
        ])) as Progress;
      }),
    );
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const progress = results.map((r) => (r as PromiseFulfilledResult<Progress>).value);
    // A node moved off a drained host runs on its new one: an ordinary row again.
    const indexes = [...placed.keys()];
    await this.settleMoved(
      spec.replicaSetId,
      (index) => progress[indexes.indexOf(index)]?.done === true,
    );
    // 3. Its endpoint on every reachable database host.
    await this.endpoint(spec, hosts);
    const waiting = progress.filter((p): p is Extract<Progress, { done: false }> => !p.done);
    if (typeof moving === 'string') waiting.push({ done: false, retryAfterMs: 10_000, reason: moving }); // prettier-ignore
    // Another node still on a drained host moves next, in this converge
    // (nothing else would run the set's apply again: its nodes all run).
    const left = typeof moving === 'string' ? undefined : this.leftOnDrained(spec, hosts, await this.o.placements.list()); // prettier-ignore
    if (left) waiting.push({ done: false, retryAfterMs: 500, reason: left });
    if (waiting.length === 0) return DONE;
    return wait(
      Math.min(...waiting.map((p) => p.retryAfterMs)),
      waiting.map((p) => p.reason).join('; '),
    );
  }

  /** 'running' when every node runs and streams (a lost host's node: 'failed'); 'missing' unplaced. */
  async inspect(spec: ReplicaSetSpec, primaryHost: Host | undefined): Promise<Health> {
    const hosts = await this.o.hosts();
    const rows = replicaRows(await this.o.placements.list(), spec.replicaSetId);
    if (rows.length === 0) return 'missing';
    if (rows.length < spec.nodes || !primaryHost) return 'failed';
    const names = [...new Set(hosts.filter((h) => h.role === 'database').map((h) => h.address))];
    const placedOn = new Map(
      rows.flatMap((p) => {
        const host = hosts.find((h) => h.id === p.hostId);
        return host ? [[rowIndex(spec.replicaSetId, p), host] as [number, Host]] : [];
      }),
    );
    const pooler = setPoolers(spec, placedOn);
    const healths = await Promise.all(
      rows.map(async (p) => {
        const host = hosts.find((h) => h.id === p.hostId);
        if (!host || this.lost(host)) return 'failed' as Health;
        const index = rowIndex(spec.replicaSetId, p);
        const node: ReplicaNodeSpec = {
          set: spec,
          index,
          source: { host: primaryHost.address, port: spec.primary.port },
          secret: '',
          names,
          ...pooler(index),
        };
        return (await this.o
          .call(host, 'inspectReplicaNode', [patroniNodeId(spec.replicaSetId, index), node])
          .catch(() => 'failed')) as Health;
      }),
    );
    if (healths.every((h) => h === 'running')) return 'running';
    return healths.every((h) => h === 'missing') ? 'missing' : 'failed';
  }

  /**
   * Its nodes deleted on their hosts, then its slots and addresses on its
   * primary's, then its endpoint on every online database host, then its
   * rows, then its service converged (its pg_hba without the set's hosts).
   * A lost host's node is a wait: it would stream again if it came back.
   */
  async delete(setId: string, primaryHost: () => Promise<Host | undefined>): Promise<Progress> {
    const hosts = await this.o.hosts();
    const rows = replicaRows(await this.o.placements.list(), setId);
    for (const p of rows) {
      const host = hosts.find((h) => h.id === p.hostId);
      if (!host) continue;
      if (this.lost(host)) {
        throw new DriverError(`Host ${host.name} (${host.address}) is lost: it has not reported.`, true); // prettier-ignore
      }
      const progress = (await this.o.call(host, 'deleteService', [
        patroniNodeId(setId, rowIndex(setId, p)),
      ])) as Progress;
      if (!progress.done) return progress;
    }
    const service = await this.o.serviceOf(setId);
    const primary = service && (await primaryHost());
    const ha = service !== undefined && service.nodes.length > 1;
    if (service && !ha && primary && !this.lost(primary)) {
      const released = (await this.o.call(primary, 'releaseReplicaSet', [
        service,
        setId,
      ])) as Progress;
      if (!released.done) return released;
    }
    for (const h of this.reachable(hosts)) {
      const p = (await this.o.call(h, 'deleteService', [setId])) as Progress;
      if (!p.done) return p;
    }
    for (const p of rows) await this.o.placements.remove(p.resourceId);
    // Its pg_hba no longer admits the set's hosts (an HA service's: read
    // from the rows just removed). A delete resumed after this point
    // finds no rows and converges it again.
    // An HA service's converge updates the Patroni of every node it
    // reaches in the one call, and waits on a lost host's (whose node gets
    // it at the service's converge once back): that wait is not the set's.
    if (service && primary && (ha || !this.lost(primary))) {
      const converged = await this.o.applyService(service);
      if (!converged.done && !ha) return converged;
    }
    return DONE;
  }

  /** The host of each node of the set (by index), placing those not yet placed. */
  private async place(spec: ReplicaSetSpec, primaryHost: Host): Promise<Map<number, Host>> {
    const hosts = await this.o.hosts();
    const placements = await this.o.placements.list();
    const held = reservation(spec.size);
    const out = new Map<number, Host>();
    // A resize that raced its refusal (commands/replica-sets.ts) fails
    // before any row holds the new size.
    const short = resizeShortfall(hosts, placements, spec.replicaSetId, held);
    if (short) throw new DriverError(`Cannot resize the read replica set: ${short}`, false);
    for (const p of replicaRows(placements, spec.replicaSetId)) {
      const index = rowIndex(spec.replicaSetId, p);
      const host = hosts.find((h) => h.id === p.hostId);
      if (!host) {
        throw new DriverError(
          `Node ${index} of read replica set ${spec.replicaSetId} was placed on host ${p.hostId}, which is no longer registered.`,
          false,
        );
      }
      if (index >= spec.nodes) continue;
      // A resize holds the new size on its host from now on.
      if (p.cpuMillis !== held.cpuMillis || p.memoryMb !== held.memoryMb) {
        await this.o.placements.put({ ...p, ...held });
      }
      out.set(index, host);
    }
    const missing = Array.from({ length: spec.nodes }, (_, i) => i).filter((i) => !out.has(i));
    if (missing.length === 0) return out;
    const avoid = this.serviceHosts(spec.serviceId, hosts, placements);
    const chosen = chooseReplicaHosts(
      this.online(hosts),
      placements,
      held,
      missing.length,
      avoid.length > 0 ? avoid : [primaryHost],
      [...out.values()],
    );
    if (!chosen) {
      const why =
        (await this.refusal({ serviceId: spec.serviceId }, held, missing.length)) ??
        'no other database host has room for its nodes';
      throw new DriverError(`Cannot place the read replica set's nodes: ${why}`, false);
    }
    for (const [k, index] of missing.entries()) {
      const host = chosen[k] as Host;
      await this.o.placements.put({
        resourceId: nodeResourceIdOf(spec.replicaSetId, index),
        hostId: host.id,
        ...held,
      });
      out.set(index, host);
      this.o.log.info(
        { replicaSet: spec.replicaSetId, node: index, host: host.name },
        'read replica node placed',
      );
    }
    return out;
  }

  /**
   * A node of the set on a drained host (`basin host drain`) moves to
   * another database host than its service's, chosen as its placement
   * was, one node at a time: its row names the new host, marked with the
   * host it left; its copy there is deleted (it frees its slot on the
   * primary, which the new node takes over) before the new one is copied
   * from the primary by this apply, and the mark goes once that one runs
   * (settleMoved). The set's other nodes serve meanwhile. A wait while the
   * old copy goes; the reason (a string) when no host has room for it: it
   * stays where it is, serving, and the set's apply goes on and says so.
   * Decided from the rows alone, so a restart of the control plane resumes.
   */
  private async moveOffDraining(spec: ReplicaSetSpec): Promise<Progress | string | undefined> {
    const setId = spec.replicaSetId;
    const hosts = await this.o.hosts();
    const all = await this.o.placements.list();
    const rows = replicaRows(all, setId).filter((p) => rowIndex(setId, p) < spec.nodes);
    const hostOf = (id: string | undefined) => hosts.find((h) => h.id === id);
    const moved = rows.filter((r) => r.movedFrom !== undefined);
    for (const p of moved) {
      const old = hostOf(p.movedFrom);
      const index = rowIndex(setId, p);
      // A lost host's copy goes when it reports again (agent/stale-services.ts).
      if (!old || this.lost(old)) continue;
      // The endpoints no longer lead to it (again, after a restart of the
      // control plane); sessions already led there get a grace to end
      // before its server stops, which would cut them.
      const key = `${setId}:${index}`;
      const since = this.handedOff.get(key);
      if (since === undefined) {
        await this.endpoint(spec, hosts);
        this.handedOff.set(key, this.o.clock());
        return wait(HAND_OFF_GRACE_MS, `node${index}'s sessions on host ${old.name} to end`);
      }
      const left = since + HAND_OFF_GRACE_MS - this.o.clock();
      if (left > 0) return wait(left, `node${index}'s sessions on host ${old.name} to end`);
      const removed = (await this.o.call(old, 'deleteService', [
        patroniNodeId(setId, index),
      ])) as Progress;
      if (!removed.done) {
        return { ...removed, reason: `removing node${index} from host ${old.name}` };
      }
      this.o.log.info({ replicaSet: setId, node: index, host: old.name }, "a moving read replica node's old copy is removed"); // prettier-ignore
    }
    if (moved.length > 0) return undefined;
    const row = rows.find((r) => hostOf(r.hostId)?.draining === true);
    if (!row) return undefined;
    const index = rowIndex(setId, row);
    const from = hostOf(row.hostId) as Host;
    const held = reservation(spec.size);
    const others = rows.filter((r) => r !== row);
    const to = chooseReplicaHosts(
      this.online(hosts),
      all.filter((p) => p.resourceId !== row.resourceId),
      held,
      1,
      this.serviceHosts(spec.serviceId, hosts, all),
      others.map((r) => hostOf(r.hostId)).filter((h): h is Host => h !== undefined),
    )?.[0];
    const target: Target = { kind: 'replicaSet', id: setId };
    if (!to) {
      const why = `host ${from.name} is being drained, and no database host other than the service's has room for node${index} of this read replica set (${held.cpuMillis} millis, ${held.memoryMb} MB): it stays there, serving, until a host with room joins`;
      if (this.stuck.get(setId) !== why) {
        this.stuck.set(setId, why);
        this.o.notify?.(target, { severity: 'WARNING', message: `basin: ${why}` });
      }
      return why;
    }
    this.stuck.delete(setId);
    this.o.notify?.(target, {
      severity: 'LOG',
      message: `basin: host ${from.name} (${from.address}) is being drained: node${index} of this read replica set moves to host ${to.name} (${to.address}), copied there from the primary; its other nodes serve meanwhile`,
    });
    await this.o.placements.put({ ...row, hostId: to.id, movedFrom: from.id });
    this.o.log.info({ replicaSet: setId, node: index, from: from.name, to: to.name }, 'read replica node moves off a drained host'); // prettier-ignore
    // No new connection goes to it (nor to its new place before it runs),
    // then its copy there goes.
    return this.moveOffDraining(spec);
  }

  /**
   * The set's endpoint on every reachable database host: HAProxy over its
   * placed nodes at their hosts' addresses, a node still moving off a
   * drained host (its row marked) disabled.
   */
  private async endpoint(spec: ReplicaSetSpec, hosts: readonly Host[]): Promise<void> {
    const rows = replicaRows(await this.o.placements.list(), spec.replicaSetId);
    const servers: ReplicaSetServer[] = rows.flatMap((p) => {
      const index = rowIndex(spec.replicaSetId, p);
      const host = hosts.find((h) => h.id === p.hostId);
      const port = spec.nodePorts[index];
      if (!host || port === undefined || index >= spec.nodes) return [];
      return [{ index, host: host.address, port, enabled: p.movedFrom === undefined }];
    });
    const endpoints = await Promise.allSettled(
      this.reachable(hosts).map((h) => this.o.call(h, 'applyReplicaSetEndpoint', [spec, servers])),
    );
    const refused = endpoints.find((r) => r.status === 'rejected');
    if (refused) throw refused.reason;
  }

  /** Which node of the set is still on a drained host, not moving yet (a wait's reason), if any. */
  private leftOnDrained(
    spec: ReplicaSetSpec,
    hosts: readonly Host[],
    placements: readonly Placement[],
  ): string | undefined {
    const setId = spec.replicaSetId;
    for (const p of replicaRows(placements, setId)) {
      const host = hosts.find((h) => h.id === p.hostId);
      if (p.movedFrom !== undefined || rowIndex(setId, p) >= spec.nodes || !host?.draining)
        continue;
      return `node${rowIndex(setId, p)} to move off host ${host.name}, which is being drained`;
    }
    return undefined;
  }

  /** The moved rows whose node runs on its new host: the mark with the host they left goes. */
  private async settleMoved(setId: string, runs: (index: number) => boolean): Promise<void> {
    for (const p of replicaRows(await this.o.placements.list(), setId)) {
      if (p.movedFrom === undefined || !runs(rowIndex(setId, p))) continue;
      this.handedOff.delete(`${setId}:${rowIndex(setId, p)}`);
      const { movedFrom: _, ...settled } = p;
      await this.o.placements.put(settled);
      this.o.log.info({ replicaSet: setId, node: rowIndex(setId, p) }, 'read replica node moved');
    }
  }

  /** The hosts of a service's nodes (its own row, and an HA service's node rows). */
  private serviceHosts(
    serviceId: string,
    hosts: readonly Host[],
    placements: readonly Placement[],
  ): Host[] {
    return nodePlacements(placements, serviceId)
      .map((p) => hosts.find((h) => h.id === p.hostId))
      .filter((h): h is Host => h !== undefined);
  }

  /**
   * The database hosts that serve the set's endpoint: every one not lost,
   * a drained one too (its address keeps working for clients until the
   * host is removed).
   */
  private reachable(hosts: readonly Host[]): Host[] {
    return hosts.filter((h) => h.role === 'database' && !this.lost(h));
  }

  private online(hosts: readonly Host[]): Host[] {
    const now = this.o.clock();
    return hosts.filter((h) => takesNodes(h, now, this.o.lostAfterMs));
  }

  private lost(host: Host): boolean {
    return this.o.lost(host);
  }
}

/** A set node's row: `<set>:node<i>`, node 0's too (a set has no row of its own). */
const nodeResourceIdOf = (setId: string, index: number) =>
  index === 0 ? `${setId}:node0` : nodeResourceId(setId, index);

/**
 * Which nodes run their host's pooler of the set (docs/decisions.md, "Read
 * replica sets across hosts": the pooler): while it is enabled, on each
 * host of its nodes the node of the lowest index there (nodes may share a
 * host, and the pooler's port leads into one namespace), each told how
 * many poolers the set has (its hosts), to take that share of its pools.
 */
export function setPoolers(
  spec: Pick<ReplicaSetSpec, 'pooler'>,
  placed: ReadonlyMap<number, Pick<Host, 'id'>>,
): (index: number) => { pooler?: { poolers: number } } {
  if (!spec.pooler.enabled || spec.pooler.port === null) return () => ({});
  const first = new Map<string, number>();
  for (const [index, host] of placed) {
    const had = first.get(host.id);
    if (had === undefined || index < had) first.set(host.id, index);
  }
  const runners = new Set(first.values());
  return (index) => (runners.has(index) ? { pooler: { poolers: first.size } } : {});
}

/**
 * Why the nodes of set `setId` do not fit at `need` on their hosts (the
 * set's rows counted at the new size, each host's other placements as
 * they are), or undefined: also when the size grows in neither CPU nor
 * memory (a smaller size always fits where a larger one ran), or a host
 * is not known (its operation says what became of it).
 */
export function resizeShortfall(
  hosts: readonly Host[],
  placements: readonly Placement[],
  setId: string,
  need: { cpuMillis: number; memoryMb: number },
): string | undefined {
  const rows = replicaRows(placements, setId);
  const grows = rows.some((p) => need.cpuMillis > p.cpuMillis || need.memoryMb > p.memoryMb);
  if (!grows) return undefined;
  const resized = placements.map((p) => (rows.includes(p) ? { ...p, ...need } : p));
  for (const host of hosts) {
    const mine = rows.filter((p) => p.hostId === host.id);
    if (mine.length === 0) continue;
    const left = roomLeft(host, resized);
    if (left.cpuMillis >= 0 && left.memoryMb >= 0) continue;
    const before = roomLeft(host, placements);
    const nodes = mine.map((p) => `node${rowIndex(setId, p)}`).join(', ');
    return (
      `host ${host.name}, which runs its ${nodes}, has ${Math.max(0, before.cpuMillis)} millis and ${Math.max(0, before.memoryMb)} MB free, ` +
      `and ${mine.length} node(s) of ${need.cpuMillis} millis and ${need.memoryMb} MB need ` +
      `${mine.reduce((n, p) => n + need.cpuMillis - p.cpuMillis, 0)} millis and ${mine.reduce((n, p) => n + need.memoryMb - p.memoryMb, 0)} MB more: choose a smaller size, or make room on that host.`
    );
  }
  return undefined;
}
