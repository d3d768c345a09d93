// The nodes of an HA service across hosts (docs/decisions.md, "HA across
// hosts"): each on a host of its own (placement.ts chooseHosts, one
// placement row per node), each under its own Patroni, run by its host's
// local driver (applyPatroniNode). The control plane decides where, and
// tells every node's host the members; it never calls Patroni and never
// decides which node leads. It reads the cluster through the nodes' hosts
// (inspectPatroniNode: each host's agent reads its own node's REST API)
// and makes of it the service's health and Basin's own log entries
// (domain/patroni-cluster.ts).
//
// Ports: node i's PostgreSQL listens on its own port (spec.nodes, the
// installation's port allocation); its REST API on the port of the node
// after it (by index, the last on the first's). Ports are the
// installation's, one owner each, and the nodes of a service are never on
// one host, so another node's port is free on this node's host and taken
// by nothing else: no port of its own to allocate, nothing to remember.

import {
  type Host,
  nodePlacements,
  nodeResourceId,
  type Placement,
  takesNodes,
} from '../../domain/hosts.js';
import {
  type ClusterState,
  patroniChanges,
  type PatroniLogEvent,
  patroniVerdict,
  streamingStandbys,
} from '../../domain/patroni-cluster.js';
import { DONE, type Progress, type ProgressNote, wait } from '../../domain/progress.js';
import type { Target } from '../../domain/logs.js';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import {
  DriverError,
  type Health,
  type ObservedNode,
  type PatroniNodeMember,
  patroniNodeId,
  type PatroniNodeView,
  type ServiceSpec,
} from '../driver.js';
import { chooseHosts, haPlacementRefusal, reservation } from './placement.js';

/** How long a node's reading of the cluster may take before it is given up (views). */
const READ_MS = 5_000;

/** How often one node is restarted for the same settings before a rolling restart gives up. */
const MAX_RESTARTS = 3;

/**
 * Patroni's timing for every service across hosts: the leader key's TTL,
 * the loop, the retries (loop_wait + 2 × retry_timeout ≤ ttl, Patroni's
 * rule, met exactly). A host lost costs the leader key's remaining life
 * (ttl less 0-2 loops since its last renewal), the standby's 2 s check of
 * the dead member's REST API (Patroni's, fixed in ha.py), the promotion and
 * ~1.5 s to the first commit: 10 s keeps that under issue 22's 15 s (15 s
 * measured 18-19 s). Not shorter: a primary's Patroni that cannot renew its
 * key for `ttl` on a loaded host is demoted (docs/decisions.md, "HA across
 * hosts", Patroni's timing).
 *
 * And a primary's stop, in synchronous mode, cut short after 1 s (fast
 * shutdown, then immediate, then SIGKILL): a primary cut off from its
 * standbys cannot finish a fast shutdown (its WAL senders wait for the
 * standbys' replies until wal_sender_timeout, 60 s), and Patroni 3.0.2,
 * still unable to reach etcd a loop later (loop_wait, 2 s, at the least),
 * demotes again beside the first demotion; the two then start two
 * postmasters (docs/decisions.md, "HA across hosts", a partition). Strict
 * synchronous mode acknowledged nothing a synchronous standby has not.
 */
export const PATRONI_TIMING = { ttl: 10, loopWait: 2, retryTimeout: 4, primaryStopTimeout: 1 };

/**
 * How long the others wait, at a start after a stop, for the node started
 * alone to lead before they are started all the same (Patroni picks).
 */
const START_ALONE_MS = 120_000;

export interface HaNodesOptions {
  hosts(): Promise<Host[]>;
  placements: {
    list(): Promise<Placement[]>;
    put(p: Placement): Promise<void>;
    remove(resourceId: string): Promise<void>;
  };
  /** Whether a majority of etcd's members answers (none without a cluster). */
  etcdQuorum(): Promise<boolean>;
  /** After its last node is deleted, before its rows go: what the control plane holds for it (its etcd user). */
  forgetService?(serviceId: string): Promise<void>;
  /** One driver call on a host's agent (hosts-driver.ts). */
  call(host: Host, method: string, args: unknown[]): Promise<unknown>;
  /** The host addresses of the service's read replica sets' nodes (replica-sets.ts): admitted for replication. */
  readersOf?(serviceId: string): Promise<string[]>;
  lostAfterMs: number;
  /** Whether a host is lost, as the driver judges it (hosts-driver.ts lost). */
  lost(host: Host): boolean;
  clock: Clock;
  log: Logger;
  notify(target: Target, note: ProgressNote): void;
}

/** A host as Basin's entries name it: `h2, 10.0.0.2`. */
const hostNamed = (host: Host) => `${host.name}, ${host.address}`;

/** A node's REST API port: the next node's PostgreSQL port (see above). */
export function apiPortOf(spec: Pick<ServiceSpec, 'nodes'>, index: number): number {
  const nodes = [...spec.nodes].sort((a, b) => a.index - b.index);
  const at = nodes.findIndex((n) => n.index === index);
  const next = nodes[(at + 1) % nodes.length];
  if (at < 0 || !next || nodes.length < 2) {
    throw new DriverError(`Node ${index} is not a node of an HA service.`, false);
  }
  return next.port;
}

export class HaNodes {
  /** Each service's last reading of its cluster, and the reason it was last not as asked. */
  private last = new Map<
    string,
    { cluster?: ClusterState; reason?: string; leaderless?: boolean }
  >();

  /** The last switchover this process asked of each service's Patroni: told as one, not a failover. */
  private handovers = new Map<string, { from: string; to: string }>();
  /** Each node's (`<serviceId>/<index>`) newest Patroni log event told: the next reading asks from it on. */
  private logSince = new Map<string, number>();
  /** How often this process restarted a node for the same stale settings (a guard against a loop). */
  private restarts = new Map<string, number>();
  /** The last of Basin's own entries said of each service's restarts and stops (said once). */
  private said = new Map<string, string>();
  /** The node of each service started alone after a stop (firstToStart), and since when. */
  private starting = new Map<string, { index: number; since: number }>();

  constructor(private readonly o: HaNodesOptions) {}

  /** Why an HA service of `nodes` nodes of `size` cannot be placed now, for a 503; undefined when it can. */
  async refusal(
    need: { cpuMillis: number; memoryMb: number },
    nodes: number,
    serviceId?: string,
  ): Promise<string | undefined> {
    const hosts = await this.o.hosts();
    const placements = await this.o.placements.list();
    const taken = serviceId === undefined ? [] : this.placedHosts(serviceId, hosts, placements);
    return haPlacementRefusal({
      online: this.online(hosts),
      placements,
      need,
      nodes,
      taken: taken.filter((h): h is Host => h !== undefined),
      etcdQuorum: await this.o.etcdQuorum(),
    });
  }

  /** The host of each node of `spec` (by index), placing those not yet placed. */
  async place(spec: ServiceSpec): Promise<Map<number, Host>> {
    const hosts = await this.o.hosts();
    const placements = await this.o.placements.list();
    const held = reservation(spec.size);
    const out = new Map<number, Host>();
    const missing: number[] = [];
    for (const n of spec.nodes) {
      const id = nodeResourceId(spec.serviceId, n.index);
      const p = placements.find((x) => x.resourceId === id);
      if (!p) {
        missing.push(n.index);
        continue;
      }
      const host = hosts.find((h) => h.id === p.hostId);
      if (!host) {
        throw new DriverError(
          `Node ${n.index} of service ${spec.serviceId} was placed on host ${p.hostId}, which is no longer registered.`,
          false,
        );
      }
      if (p.cpuMillis !== held.cpuMillis || p.memoryMb !== held.memoryMb) {
        await this.o.placements.put({ ...p, ...held });
      }
      out.set(n.index, host);
    }
    if (missing.length === 0) return out;
    const chosen = chooseHosts(this.online(hosts), placements, held, missing.length, [
      ...out.values(),
    ]);
    if (!chosen) {
      const why =
        (await this.refusal(held, spec.nodes.length, spec.serviceId)) ??
        'not enough database hosts have room for its nodes';
      throw new DriverError(`Cannot place the service's nodes: ${why}`, false);
    }
    for (const [k, index] of missing.entries()) {
      const host = chosen[k] as Host;
      await this.o.placements.put({
        resourceId: nodeResourceId(spec.serviceId, index),
        hostId: host.id,
        ...held,
      });
      out.set(index, host);
      this.o.log.info({ service: spec.serviceId, node: index, host: host.name }, 'node placed');
    }
    return out;
  }

  /** One step of every node towards the spec, each on its host; done once every node's Patroni runs. */
  async apply(spec: ServiceSpec): Promise<Progress> {
    const placed = await this.place(spec);
    if (!spec.running) return this.stop(spec, placed);
    const moving = await this.moveOffDraining(spec);
    if (moving) return moving;
    const members = this.members(spec, placed);
    const hosts = await this.o.hosts();
    // Every database host's address: HAProxy on each may route to any node.
    const names = [
      ...new Set([
        ...members.map((m) => m.address),
        ...hosts.filter((h) => h.role === 'database').map((h) => h.address),
      ]),
    ];
    const readers = (await this.o.readersOf?.(spec.serviceId)) ?? [];
    const first = await this.firstAlone(spec);
    const results = await Promise.allSettled(
      members.map(async (m) => {
        const host = placed.get(m.index) as Host;
        // A lost host's node waits for it; the others are applied meanwhile,
        // and Patroni keeps the service writing without it.
        if (this.lost(host)) return wait(2000, `node${m.index}'s host ${host.name} is lost`);
        if (first !== undefined && m.index !== first) {
          return wait(1000, `node${m.index} starts once node${first}, the primary when the service stopped, leads`); // prettier-ignore
        }
        return (await this.o.call(host, 'applyPatroniNode', [
          spec,
          {
            index: m.index,
            members,
            names,
            allowlist: [],
            timing: PATRONI_TIMING,
            ...(readers.length > 0 ? { readers } : {}),
          },
        ])) as Progress;
      }),
    );
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    // Every database host's endpoint, a node there or not, a drained one
    // too: a client may use any host's address, and a drained host's keeps
    // leading to the primary until the host is removed (a lost host's
    // waits for it).
    const endpoints = await Promise.allSettled(
      this.reachable(hosts).map((h) => this.o.call(h, 'applyPatroniEndpoint', [spec, members])),
    );
    const refused = endpoints.find((r) => r.status === 'rejected');
    if (refused) throw refused.reason;
    const waiting = results
      .map((r) => (r as PromiseFulfilledResult<Progress>).value)
      .filter((p): p is Extract<Progress, { done: false }> => !p.done);
    // What Patroni did meanwhile (a failover, while it waits on a lost
    // host) is told in the service's logs, and its leader known (the
    // service's endpoint host) by the time the apply is done.
    await this.read(spec, true).catch(() => undefined);
    if (waiting.length === 0) return this.rollingRestart(spec, placed);
    return wait(
      Math.min(...waiting.map((p) => p.retryAfterMs)),
      waiting.map((p) => p.reason).join('; '),
    );
  }

  /**
   * The node to start alone, at a start after a stop (firstToStart), while
   * it does not lead yet; undefined to start every node. A service known
   * to run (a leader read, nothing started alone) is not read again.
   */
  private async firstAlone(spec: ServiceSpec): Promise<number | undefined> {
    const id = spec.serviceId;
    const pending = this.starting.get(id);
    if (!pending && this.last.get(id)?.cluster?.leader) return undefined;
    const now = this.o.clock();
    const within = pending && now - pending.since < START_ALONE_MS ? pending.index : undefined;
    const first = firstToStart(await this.views(spec), within);
    const target: Target = { kind: 'service', id };
    if (first === undefined) {
      if (pending && within === undefined) {
        this.say(target, `basin: node${pending.index} did not lead in ${START_ALONE_MS / 1000} s: starting every node (Patroni picks the leader)`); // prettier-ignore
      }
      this.starting.delete(id);
    } else if (first !== pending?.index) {
      this.starting.set(id, { index: first, since: now });
      this.say(target, `basin: starting node${first} first, alone (it stopped as the primary, with the newest WAL); the others once it leads`); // prettier-ignore
    }
    return first;
  }

  /**
   * One step of a rolling restart, when a change (a resize) left nodes
   * running with settings that take a restart: decided afresh at every
   * step from what the nodes run (stalePatroniSettings) and what Patroni
   * reports, so a kill -9 of the control plane anywhere resumes it. One
   * node at a time, and only while the cluster is whole (a leader, every
   * standby streaming, as many synchronous as asked): the standbys first,
   * each restarted by its own Patroni; then, with only the leader left, a
   * switchover to a synchronous (else the most caught-up) standby, asked
   * of the leader's Patroni, which decides; the old leader, a standby
   * then, restarts last. DONE when no node runs stale settings.
   */
  private async rollingRestart(spec: ServiceSpec, placed: Map<number, Host>): Promise<Progress> {
    const stale = await Promise.all(
      spec.nodes.map(async (n) => {
        const host = placed.get(n.index) as Host;
        // A lost host's node is restarted with its settings when it returns.
        if (this.lost(host)) return { index: n.index, stale: [] as string[] };
        const got = (await this.o.call(host, 'stalePatroniSettings', [
          spec.serviceId,
          { index: n.index, port: n.port },
        ])) as string[] | null;
        return { index: n.index, stale: got };
      }),
    );
    const todo = stale.filter((s) => s.stale === null || s.stale.length > 0);
    if (todo.length === 0) {
      this.said.delete(spec.serviceId);
      for (const k of this.restarts.keys()) {
        if (k.startsWith(`${spec.serviceId}:`)) this.restarts.delete(k);
      }
      return DONE;
    }
    const cluster = clusterOf(await this.views(spec));
    const verdict = patroniVerdict(cluster, {
      standbys: spec.ha.replicaCount,
      sync: spec.ha.syncReplicaCount,
    });
    const names = todo.map((s) => `node${s.index}`).join(', ');
    if (!cluster?.leader || verdict.reason !== undefined || todo.some((s) => s.stale === null)) {
      const why = verdict.reason ?? 'a node does not answer';
      return wait(1000, `${names} to restart for new settings, once the cluster is whole (${why})`);
    }
    const leader = cluster.leader;
    const ports = (index: number) => {
      const n = spec.nodes.find((x) => x.index === index);
      return { index, port: n?.port ?? 0, apiPort: apiPortOf(spec, index) };
    };
    const target: Target = { kind: 'service', id: spec.serviceId };
    const standby = todo.find((s) => `node${s.index}` !== leader);
    if (standby) {
      const name = `node${standby.index}`;
      this.say(target, `basin: restarting ${name}, a standby, for settings that take a restart (${(standby.stale ?? []).join(', ')})`); // prettier-ignore
      // A setting that a restart does not bring (a value PostgreSQL or
      // Patroni writes otherwise than asked) would restart the node for
      // ever: after a few restarts the operation fails, saying which.
      const key = `${spec.serviceId}:${name}:${(standby.stale ?? []).join(',')}`;
      const times = (this.restarts.get(key) ?? 0) + 1;
      if (times > MAX_RESTARTS) {
        throw new DriverError(
          `${name} still runs with other values of ${(standby.stale ?? []).join(', ')} than asked after ${MAX_RESTARTS} restarts.`,
          false,
        );
      }
      this.restarts.set(key, times);
      const host = placed.get(standby.index) as Host;
      const p = (await this.o.call(host, 'restartPatroniNode', [
        spec.serviceId,
        ports(standby.index),
      ])) as Progress;
      return p.done ? wait(1000, `${name} restarted: waiting for it to stream again`) : p;
    }
    // Only the leader runs stale settings: it hands over first, to a
    // standby that runs the new ones.
    const index = Number(leader.replace(/^node/, ''));
    const stalePrimary = (todo.find((s) => s.index === index)?.stale ?? []).join(', ');
    return this.handOver(
      spec,
      placed.get(index) as Host,
      cluster,
      `the primary ${leader} needs a restart (${stalePrimary})`,
      'restarts',
    );
  }

  /**
   * Asks the leader's Patroni (through its host's agent) to hand over to a
   * synchronous standby, else the most caught-up one that streams (Patroni
   * refuses a candidate that is not synchronous under
   * synchronous_mode_strict, and decides); the old leader follows it.
   */
  private async handOver(
    spec: ServiceSpec,
    host: Host,
    cluster: ClusterState,
    why: string,
    then: string,
  ): Promise<Progress> {
    const leader = cluster.leader as string;
    // Those the leader's WAL senders say stream (Patroni's `running` is not enough).
    const streaming = streamingStandbys(cluster) ?? [];
    const candidate =
      streaming.find((m) => m.role === 'sync_standby') ??
      [...streaming].sort((a, b) => (a.lagBytes ?? 0) - (b.lagBytes ?? 0))[0];
    if (!candidate) return wait(2000, `${leader}: no standby streams to hand over to`);
    const index = Number(leader.replace(/^node/, ''));
    this.say(
      { kind: 'service', id: spec.serviceId },
      `basin: switchover: ${why}: asking Patroni to hand over to ${candidate.name}, then ${leader} ${then} as a standby`,
    );
    const n = spec.nodes.find((x) => x.index === index);
    this.handovers.set(spec.serviceId, { from: leader, to: candidate.name });
    const p = (await this.o.call(host, 'switchoverPatroni', [
      spec.serviceId,
      { index, port: n?.port ?? 0, apiPort: apiPortOf(spec, index) },
      candidate.name,
    ])) as Progress;
    return p.done ? wait(1000, `${leader} handed over to ${candidate.name}`) : p;
  }

  /**
   * One step of moving the service's nodes off hosts being drained (`basin
   * host drain`; docs/decisions.md, "Draining a host"), undefined when none
   * is left there. One node at a time, and only while the cluster is
   * whole: a leader there hands over first (a switchover, as for a
   * restart); a standby's placement row moves to another database host
   * with room and none of the service's nodes, marked with the host it
   * left; its old copy is then removed there (its Patroni stopped, its
   * member gone: two members of one name would be one too many) before
   * the new one is made, which Patroni copies from the primary
   * (`create_replica_methods`). Every step is decided from the rows and
   * from what Patroni reports, so a kill -9 of the control plane resumes it.
   */
  private async moveOffDraining(spec: ServiceSpec): Promise<Progress | undefined> {
    const hosts = await this.o.hosts();
    const all = await this.o.placements.list();
    const rows = nodePlacements(all, spec.serviceId);
    const indexOf = (p: Placement) =>
      p.resourceId === spec.serviceId ? 0 : Number(p.resourceId.slice(`${spec.serviceId}:node`.length)); // prettier-ignore
    const target: Target = { kind: 'service', id: spec.serviceId };
    for (const p of rows.filter((r) => r.movedFrom !== undefined)) {
      const old = hosts.find((h) => h.id === p.movedFrom);
      // A lost host's copy is removed by its agent when it reports again
      // (agent/stale-services.ts): the row names another host then.
      if (old && !this.lost(old)) {
        const removed = (await this.o.call(old, 'deleteService', [
          patroniNodeId(spec.serviceId, indexOf(p)),
        ])) as Progress;
        if (!removed.done) return removed;
      }
      const { movedFrom: _, ...settled } = p;
      await this.o.placements.put(settled);
      this.o.log.info({ service: spec.serviceId, node: indexOf(p) }, 'node moved');
    }
    const hostOf = (p: Placement) => hosts.find((h) => h.id === p.hostId);
    const draining = rows.filter((r) => hostOf(r)?.draining === true);
    if (draining.length === 0) return undefined;
    const cluster = clusterOf(await this.views(spec));
    const verdict = patroniVerdict(cluster, {
      standbys: spec.ha.replicaCount,
      sync: spec.ha.syncReplicaCount,
    });
    const names = draining.map((r) => `node${indexOf(r)}`).join(', ');
    if (!cluster?.leader || verdict.reason !== undefined) {
      return wait(1000, `${names} to move off a drained host, once the cluster is whole (${verdict.reason ?? 'no leader'})`); // prettier-ignore
    }
    const row = draining.find((r) => `node${indexOf(r)}` !== cluster.leader) ?? (draining[0] as Placement); // prettier-ignore
    const index = indexOf(row);
    const from = hostOf(row) as Host;
    if (`node${index}` === cluster.leader) {
      return this.handOver(
        spec,
        from,
        cluster,
        `host ${from.name} (${from.address}), the primary node${index}'s, is being drained`,
        'moves',
      );
    }
    const taken = rows
      .filter((r) => r !== row)
      .map(hostOf)
      .filter((h): h is Host => h !== undefined);
    const to = chooseHosts(this.online(hosts), all, reservation(spec.size), 1, taken)?.[0];
    if (!to) {
      throw new DriverError(
        `Host ${from.name} is being drained, and no other online database host without a node of this service has room for node${index}: add a host.`,
        true,
      );
    }
    this.say(target, `basin: host ${from.name} (${from.address}) is being drained: node${index}, a standby, moves to host ${to.name} (${to.address}), copied there from the primary`); // prettier-ignore
    await this.o.placements.put({ ...row, hostId: to.id, movedFrom: from.id });
    return wait(100, `node${index} moves to host ${to.name}`);
  }

  /**
   * One step of stopping the service's nodes (`running: false`): every
   * standby's Patroni first, then the leader's, so that no standby is
   * promoted meanwhile; DONE once no reachable node's Patroni runs (a lost
   * host's is stopped when it returns: the reconciler sees it run).
   */
  private async stop(spec: ServiceSpec, placed: Map<number, Host>): Promise<Progress> {
    const views = await this.views(spec);
    const running = views.filter((v) => v.view?.patroni);
    this.starting.delete(spec.serviceId);
    if (running.length === 0) {
      this.last.delete(spec.serviceId);
      this.said.delete(spec.serviceId);
      return DONE;
    }
    const leader = clusterOf(views)?.leader;
    const standbys = running.filter((v) => `node${v.index}` !== leader);
    const batch = standbys.length > 0 ? standbys : running;
    const names = batch.map((v) => `node${v.index}`).join(', ');
    this.say(
      { kind: 'service', id: spec.serviceId },
      standbys.length > 0
        ? `basin: stopping ${names} (standbys), then the leader`
        : `basin: stopping ${names}${leader ? ' (the leader)' : ''}`,
    );
    await Promise.all(
      batch.map((v) =>
        this.o.call(placed.get(v.index) as Host, 'stopPatroniNode', [spec.serviceId, v.index]),
      ),
    );
    return wait(100, `stopped ${names}`);
  }

  /** One of Basin's own entries in the service's logs, not said twice in a row. */
  private say(target: Target, message: string): void {
    if (this.said.get(target.id) === message) return;
    this.said.set(target.id, message);
    this.o.notify(target, { severity: 'LOG', message });
  }

  /** What each node's host sees of it (a lost host's: nothing). */
  private async views(
    spec: ServiceSpec,
  ): Promise<{ index: number; host?: Host; view?: PatroniNodeView }[]> {
    const hosts = await this.o.hosts();
    const placements = await this.o.placements.list();
    const placed = this.placedHosts(spec.serviceId, hosts, placements);
    return Promise.all(
      spec.nodes.map(async (n) => {
        const host = placed[n.index];
        if (!host || this.lost(host)) return { index: n.index, ...(host ? { host } : {}) };
        const logSince = this.logSince.get(`${spec.serviceId}/${n.index}`);
        // A host that stopped answering (killed, cut off) is not yet lost:
        // its reading is given up after READ_MS, so that the others' (the
        // new leader's) are not held back until the call's own timeout.
        let timer: NodeJS.Timeout | undefined;
        try {
          const view = (await Promise.race([
            this.o.call(host, 'inspectPatroniNode', [
              spec.serviceId,
              {
                index: n.index,
                apiPort: apiPortOf(spec, n.index),
                ...(logSince === undefined ? {} : { logSince }),
                // Its host's pooler of the service, while it should run.
                ...(spec.running && spec.pooler.enabled ? { pooler: true } : {}),
              },
            ]),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error('no answer in time')), READ_MS);
            }),
          ])) as PatroniNodeView;
          this.tellLog(spec.serviceId, n.index, host, view.events);
          return { index: n.index, host, view };
        } catch {
          return { index: n.index, host };
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }

  /**
   * What a node's Patroni decided (its log, read by its host: promotions,
   * demotions, rewinds, copies) as Basin's own entries at Patroni's times,
   * naming the node and its host. A line read again (the next reading asks
   * from the last one's time on; a new control-plane process from the
   * log's tail) is told once: the entry is looked for before it is written.
   */
  private tellLog(
    serviceId: string,
    index: number,
    host: Host,
    events: PatroniLogEvent[] | undefined,
  ): void {
    if (!events || events.length === 0) return;
    const key = `${serviceId}/${index}`;
    for (const e of events) {
      this.o.notify(
        { kind: 'service', id: serviceId },
        {
          severity: e.severity,
          message: `patroni: node${index} (on ${hostNamed(host)}): ${e.text}`,
          at: e.timeMs,
          once: 'at',
        },
      );
    }
    const newest = Math.max(...events.map((e) => e.timeMs));
    this.logSince.set(key, Math.max(newest, this.logSince.get(key) ?? 0));
  }

  /**
   * `running` when Patroni's cluster is as asked (a leader, every standby
   * streaming, as many synchronous as asked) and every reachable node's
   * Patroni runs; `failed` otherwise, the reason said once in the
   * service's logs. What Patroni did since the last reading (failovers,
   * switchovers, members joining or leaving) becomes Basin's own entries.
   */
  async inspect(spec: ServiceSpec): Promise<Health> {
    const placements = nodePlacements(await this.o.placements.list(), spec.serviceId);
    if (placements.length === 0) return 'missing';
    // Stopped: no node's Patroni should run (one that does is stopped again).
    if (!spec.running) {
      const views = await this.views(spec);
      return views.some((v) => v.view?.patroni) ? 'running' : 'stopped';
    }
    return this.read(spec);
  }

  /**
   * One reading of the cluster: its changes told, its verdict said once
   * (not by an apply's reading, `quiet`: a cluster being formed or
   * changed is not yet what was asked); the health it makes.
   */
  private async read(spec: ServiceSpec, quiet = false): Promise<Health> {
    const views = await this.views(spec);
    const cluster = clusterOf(views);
    const target: Target = { kind: 'service', id: spec.serviceId };
    const last = this.last.get(spec.serviceId) ?? {};
    // The first reading in this process names the leader, and only it (a
    // change needs two readings).
    const before = last.cluster ?? {
      members: cluster?.members.filter((m) => m.name !== cluster.leader) ?? [],
      paused: false,
    };
    // A leaderless reading (between a leader's loss and a promotion) is
    // said once, and the last reading with a leader is kept, so that the
    // promotion after it is told as the failover it is.
    const leaderless = cluster !== undefined && cluster.leader === undefined;
    const notes =
      leaderless && last.leaderless
        ? []
        : patroniChanges(before, cluster, this.handovers.get(spec.serviceId), (name) => {
            const host = views.find((v) => `node${v.index}` === name)?.host;
            return host && hostNamed(host);
          });
    for (const note of notes) this.o.notify(target, note);
    const verdict = patroniVerdict(cluster, {
      standbys: spec.ha.replicaCount,
      sync: spec.ha.syncReplicaCount,
    });
    const stopped = views.filter((v) => v.view && !v.view.patroni).map((v) => `node${v.index}`);
    // A host's pooler that does not run (died, or not started yet) makes
    // the service UNSTABLE, and the reconciler's apply starts it again.
    const noPooler = views
      .filter((v) => v.view?.patroni && v.view.pooler === false)
      .map((v) => `node${v.index}`);
    const reason =
      verdict.reason ??
      (stopped.length > 0
        ? `Patroni does not run on ${stopped.join(', ')}`
        : noPooler.length > 0
          ? `the connection pooler does not run on the host of ${noPooler.join(', ')}`
          : undefined);
    if (!quiet && reason !== undefined && reason !== last.reason) {
      this.o.notify(target, { severity: 'WARNING', message: `basin: ${reason}` });
    }
    const said = quiet ? last.reason : reason;
    const kept = cluster && !leaderless ? cluster : last.cluster;
    this.last.set(spec.serviceId, {
      ...(kept ? { cluster: kept } : {}),
      ...(said === undefined ? {} : { reason: said }),
      ...(leaderless ? { leaderless } : {}),
    });
    return reason === undefined ? 'running' : 'failed';
  }

  /** Each node as Patroni reports it (its role, timeline, lag). */
  async observe(spec: ServiceSpec): Promise<ObservedNode[]> {
    const cluster = clusterOf(await this.views(spec));
    return spec.nodes.map((n) => {
      const m = cluster?.members.find((x) => x.name === `node${n.index}`);
      const ready = m !== undefined && ['running', 'streaming'].includes(m.state);
      return {
        index: n.index,
        ready,
        actsAs: !m ? null : m.role === 'leader' ? 'primary' : 'standby',
        timeline: m?.timeline ?? null,
        lsn: null,
        lagBytes: m?.lagBytes ?? null,
      };
    });
  }

  /**
   * The stable index of the node the logs' API numbers `node` (0 the
   * primary, then the others by index) by Patroni's leader as last read
   * (the service's recorded roles are not Patroni's: node 0 is recorded
   * primary for ever, and the command numbers by them, so the number it
   * hands over is the API's). Unchanged while this process knows no
   * leader (a process that does not lead reads no cluster).
   */
  async logNode(serviceId: string, node: number): Promise<number> {
    const leader = this.last.get(serviceId)?.cluster?.leader;
    if (!leader) return node;
    const lead = Number(leader.replace(/^node/, ''));
    const indices = nodePlacements(await this.o.placements.list(), serviceId)
      .map((p) =>
        p.resourceId === serviceId ? 0 : Number(p.resourceId.slice(`${serviceId}:node`.length)),
      ) // prettier-ignore
      .filter((i) => i !== lead)
      .sort((a, b) => a - b);
    return [lead, ...indices][node] ?? node;
  }

  /** The address of the host of the node Patroni last said leads; undefined when none is known. */
  async leaderHost(serviceId: string): Promise<string | undefined> {
    const leader = this.last.get(serviceId)?.cluster?.leader;
    if (!leader) return undefined;
    const index = Number(leader.replace(/^node/, ''));
    const p = (await this.o.placements.list()).find(
      (x) => x.resourceId === nodeResourceId(serviceId, index),
    );
    return p && (await this.o.hosts()).find((h) => h.id === p.hostId)?.address;
  }

  /**
   * The leader's node as last read (its host, index and ports), for a
   * backup read through it; undefined while the cluster names none or its
   * host is lost.
   */
  async leaderNode(
    spec: ServiceSpec,
  ): Promise<{ host: Host; index: number; port: number; apiPort: number } | undefined> {
    const leader = this.last.get(spec.serviceId)?.cluster?.leader;
    if (!leader) return undefined;
    const index = Number(leader.replace(/^node/, ''));
    const node = spec.nodes.find((n) => n.index === index);
    const p = (await this.o.placements.list()).find(
      (x) => x.resourceId === nodeResourceId(spec.serviceId, index),
    );
    const host = p && (await this.o.hosts()).find((h) => h.id === p.hostId);
    if (!node || !host || this.lost(host)) return undefined;
    return { host, index, port: node.port, apiPort: apiPortOf(spec, index) };
  }

  /**
   * Every node deleted on its host, then its rows. A removed host's node:
   * nothing to delete. A lost host's is not waited for (a host may never
   * come back), as a service's is not (hosts-driver.ts): once the rows are
   * gone, the host removes the node, and its frontend, when it reports
   * again (agent/stale-services.ts); cut off but alive, its Patroni lost
   * etcd with the rest of the cluster and serves no write meanwhile.
   */
  async delete(serviceId: string): Promise<Progress> {
    const hosts = await this.o.hosts();
    const placements = nodePlacements(await this.o.placements.list(), serviceId);
    const results = await Promise.all(
      placements.map(async (p) => {
        const host = hosts.find((h) => h.id === p.hostId);
        if (!host) return DONE;
        if (this.lost(host)) {
          this.o.log.warn(
            { service: serviceId, host: host.name },
            'deleting an HA service with a node on a lost host: the host removes it when it reports again',
          );
          return DONE;
        }
        const index =
          p.resourceId === serviceId ? 0 : Number(p.resourceId.slice(`${serviceId}:node`.length));
        // The node is a resource of its own on its host (patroniNodeId).
        return (await this.o.call(host, 'deleteService', [
          patroniNodeId(serviceId, index),
        ])) as Progress;
      }),
    );
    const waiting = results.filter((r) => !r.done);
    if (waiting.length > 0) return waiting[0] as Progress;
    // Its endpoint on every database host that answers, a drained one too
    // (deleteService of the service's own id there holds nothing else).
    for (const h of this.reachable(hosts)) {
      const p = (await this.o.call(h, 'deleteService', [serviceId])) as Progress;
      if (!p.done) return p;
    }
    try {
      await this.o.forgetService?.(serviceId);
    } catch (err) {
      throw new DriverError(
        `The service's etcd user could not be removed yet: ${(err as Error).message}`,
        true,
      );
    }
    for (const p of placements) await this.o.placements.remove(p.resourceId);
    this.last.delete(serviceId);
    for (const key of this.logSince.keys()) {
      if (key.startsWith(`${serviceId}/`)) this.logSince.delete(key);
    }
    return DONE;
  }

  private members(spec: ServiceSpec, placed: Map<number, Host>): PatroniNodeMember[] {
    return spec.nodes.map((n) => ({
      index: n.index,
      address: (placed.get(n.index) as Host).address,
      port: n.port,
      apiPort: apiPortOf(spec, n.index),
    }));
  }

  /** The hosts of a service's placed nodes, by index. */
  private placedHosts(
    serviceId: string,
    hosts: readonly Host[],
    placements: readonly Placement[],
  ): (Host | undefined)[] {
    const out: (Host | undefined)[] = [];
    for (const p of nodePlacements(placements, serviceId)) {
      const index =
        p.resourceId === serviceId ? 0 : Number(p.resourceId.slice(`${serviceId}:node`.length));
      out[index] = hosts.find((h) => h.id === p.hostId);
    }
    return out;
  }

  private online(hosts: readonly Host[]): Host[] {
    const now = this.o.clock();
    return hosts.filter((h) => takesNodes(h, now, this.o.lostAfterMs));
  }

  /**
   * The database hosts that serve the service's endpoint: every one not
   * lost, a drained one too (as a read replica set's, replica-sets.ts).
   */
  private reachable(hosts: readonly Host[]): Host[] {
    return hosts.filter((h) => h.role === 'database' && !this.lost(h));
  }

  private lost(host: Host): boolean {
    return this.o.lost(host);
  }
}

/**
 * The cluster as the nodes tell it: the leader's own word first (it holds
 * the leader key, or demotes itself), then any node's. A node cut from
 * etcd may answer from what it last knew, and take a lost leader for the
 * current one.
 */
function clusterOf(views: readonly { index: number; view?: PatroniNodeView }[]) {
  const told = views.filter((v) => v.view?.cluster);
  const leader = told.find((v) => v.view?.cluster?.leader === `node${v.index}`);
  return (leader ?? told[0])?.view?.cluster ?? undefined;
}

/**
 * At a start after a stop, the node to start alone, before the others: the
 * one that stopped last, as the primary (the stop stops the standbys
 * first), whose WAL is the newest; started with the others, a standby
 * could take the leader key before its Patroni registers, and it would
 * then fail to follow the new timeline. Read from the nodes' control files
 * (each view's `stopped`), so that a control plane restarted between the
 * stop and the start knows it too. `started`: the node this process
 * started alone and still waits for. Undefined (start every node, Patroni
 * picks) once a leader runs, when a node other than `started` runs, or
 * when the newest checkpoint among the nodes read is not a primary's (its
 * host lost, or a crash: no clean shutdown).
 */
export function firstToStart(
  views: readonly { index: number; view?: PatroniNodeView }[],
  started?: number,
): number | undefined {
  const cluster = clusterOf(views);
  const leader = cluster?.members.find((m) => m.name === cluster.leader);
  if (leader?.state === 'running') return undefined;
  const up = views.filter((v) => v.view?.patroni);
  if (up.length > 0) return up.length === 1 && up[0]?.index === started ? started : undefined;
  const stopped = views.flatMap((v) => (v.view?.stopped ? [{ index: v.index, ...v.view.stopped }] : [])); // prettier-ignore
  const newest = stopped.sort(
    (a, b) =>
      b.timeline - a.timeline ||
      Number(BigInt(b.checkpoint) - BigInt(a.checkpoint)) ||
      Number(b.shutDown === 'primary') - Number(a.shutDown === 'primary'),
  )[0];
  return newest?.shutDown === 'primary' ? newest.index : undefined;
}
