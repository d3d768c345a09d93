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
  hostState,
  nodePlacements,
  nodeResourceId,
  type Placement,
  takesNodes,
} from '../../domain/hosts.js';
import { DONE, type Progress, wait } from '../../domain/progress.js';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import {
  type AdmittedReplicaSet,
  DriverError,
  type Health,
  patroniNodeId,
  type ReplicaNodeSpec,
  type ReplicaSetSpec,
  type ServiceSpec,
} from '../driver.js';
import { chooseReplicaHosts, reservation } from './placement.js';

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
  clock: Clock;
  log: Logger;
}

/** A node's slot and application_name on its primary (as local/converge/replica-set.ts names them). */
const slotOf = (setId: string, index: number) => `rs_${setId}_${index}`;

/** A set's placement rows, by node index. */
export function replicaRows(placements: readonly Placement[], setId: string): Placement[] {
  return nodePlacements(placements, setId).filter((p) => p.resourceId !== setId);
}

const rowIndex = (setId: string, p: Placement) =>
  Number(p.resourceId.slice(`${setId}:node`.length));

export class ReplicaSets {
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
    // 3. Its endpoint on every online database host.
    const servers = [...placed].map(([index, host]) => ({
      index,
      host: host.address,
      port: spec.nodePorts[index] as number,
    }));
    const endpoints = await Promise.allSettled(
      this.online(hosts)
        .filter((h) => h.role === 'database')
        .map((h) => this.o.call(h, 'applyReplicaSetEndpoint', [spec, servers])),
    );
    const refused = endpoints.find((r) => r.status === 'rejected');
    if (refused) throw refused.reason;
    const waiting = results
      .map((r) => (r as PromiseFulfilledResult<Progress>).value)
      .filter((p): p is Extract<Progress, { done: false }> => !p.done);
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
    for (const h of this.online(hosts).filter((x) => x.role === 'database')) {
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

  private online(hosts: readonly Host[]): Host[] {
    const now = this.o.clock();
    return hosts.filter((h) => takesNodes(h, now, this.o.lostAfterMs));
  }

  private lost(host: Host): boolean {
    return hostState(host, this.o.clock(), this.o.lostAfterMs) === 'LOST';
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
