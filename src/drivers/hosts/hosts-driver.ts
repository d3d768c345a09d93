// The `hosts` driver (`--driver hosts`): the control plane runs no database
// itself; each service is placed on one of the installation's hosts and the
// local driver there runs it (`basin host run`, agent/driver-rpc.ts). This
// driver decides where (placement.ts), remembers it in the store
// (placements, through the callbacks basin.ts wires), and passes each call
// to that host's agent over mutual TLS. What needs an answer at once
// (metrics, a service's endpoint host) is answered from what it last read.
//
// With a repository host joined, each service's repository is there
// (withRepository): its apply asks the repository host's agent for it, and
// its backups run there, reading the service through a server its database
// host opens for the backup (backupService).
//
// Forks, with a repository host joined, are restored from their parent's
// stanza there onto the fork's host, wherever the parent runs (forkSource:
// the parent's host readies it, a NOW fork's parent is backed up first).
// An HA service's nodes go each to a host of its own, each under its own
// Patroni (ha-nodes.ts: docs/decisions.md, "HA across hosts").
//
// A read replica set's nodes go to other hosts than its service's, each
// streaming from its primary over TLS (an HA service's: through the
// service's endpoint, so it follows a failover), its endpoint on every
// database host, its pooler on each host of its nodes (replica-sets.ts:
// docs/decisions.md, "Read replica sets across hosts").

import {
  agentUrl,
  type Host,
  hostCertCn,
  hostState,
  LEADER_TERM_HEADER as TERM_HEADER,
  nodeResourceId,
  patroniNodeId,
  type Placement,
  takesNodes,
} from '../../domain/hosts.js';
import { DONE, type Progress, type ProgressNote, wait } from '../../domain/progress.js';
import type { LogPage, LogQuery, Target } from '../../domain/logs.js';
import type { SeriesSample } from '../../domain/series/catalogue.js';
import type { Capabilities, Metrics, Size } from '../../domain/types.js';
import type { Clock } from '../../lib/clock.js';
import { httpsJson } from '../../lib/https-json.js';
import type { Logger } from '../../lib/logger.js';
import type { KeyPair } from '../../lib/x509.js';
import {
  type BackupProgress,
  type Driver,
  DriverError,
  type ForkFromRepository,
  type ForkParent,
  type Health,
  type ObservedNode,
  type RemoteRepository,
  type ReplicaSetSpec,
  type ServiceSpec,
} from '../driver.js';
import { HaNodes } from './ha-nodes.js';
import { ReplicaSets } from './replica-sets.js';
import { chooseHost, reservation, roomLeft } from './placement.js';

export interface HostsDriverOptions {
  /** The installation's hosts, as the store has them. */
  hosts(): Promise<Host[]>;
  placements: {
    list(): Promise<Placement[]>;
    get(resourceId: string): Promise<Placement | undefined>;
    put(p: Placement): Promise<void>;
    remove(resourceId: string): Promise<void>;
  };
  /** The control plane's certificate and the installation's CA (hosts/installation-ca.ts). */
  identity(): Promise<KeyPair & { ca: string }>;
  /** A service's spec as the engine builds it (a fork's parent, backed up or readied for it). */
  serviceSpec(serviceId: string): Promise<ServiceSpec | undefined>;
  /** The forks of a service still being made (QUEUED, CONFIGURING): they restore from its stanza. */
  forksBeingMade(serviceId: string): Promise<string[]>;
  /** The service a read replica set streams from (the store's record), for its delete. */
  replicaSetService?(replicaSetId: string): Promise<string | undefined>;
  /** A service's read replica sets (the store's records): an HA service's pg_hba admits their hosts. */
  replicaSetsOf?(serviceId: string): Promise<string[]>;
  /** An HA service's replication role's password (service-secrets.ts), for its read replica sets' nodes. */
  replicationSecret?(serviceId: string): Promise<string>;
  /** Whether a service has a completed backup (the store's record): a move restores from one. */
  hasBackup?(serviceId: string): Promise<boolean>;
  lostAfterMs: number;
  /**
   * Whether a lost host's non-HA services are restored on another host as
   * soon as it is lost (`--restore-lost-services`); otherwise each on its
   * owner's start (ServiceSpec.resuming).
   */
  restoreLost?: boolean;
  clock: Clock;
  log: Logger;
  /** How often hosts, placements and metrics are read again (default 2 s). */
  refreshMs?: number;
  /** Whether a majority of etcd's members answers: an HA service's Patroni needs it to elect a leader. */
  etcdQuorum?(): Promise<boolean>;
  /** After a service's last node is deleted: what the control plane holds for it elsewhere (its etcd user). */
  forgetService?(serviceId: string): Promise<void>;
  /**
   * The term this process leads as, sent with every call so that a host
   * refuses a deposed leader's (agent/term-fence.ts); undefined while it
   * does not lead (a follower's reads).
   */
  term?: () => number | undefined;
}

export class HostsDriver implements Driver {
  readonly name = 'hosts';
  /** Forks once a repository host has joined: they are restored from it. */
  get capabilities(): Capabilities {
    this.freshen();
    return {
      forks: [...this.hostsById.values()].some((h) => h.role === 'repository'),
      haReplicas: true,
      replicaSets: true,
      pooler: true,
      replicaSetPooler: true,
    };
  }

  private hostsById = new Map<string, Host>();
  private placed = new Map<string, Placement>();
  private metricsOf = new Map<string, Metrics>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private notify: ((target: Target, note: ProgressNote) => void) | undefined;
  /** Services whose host was seen lost, and not yet seen back: said once each way. */
  private onLostHost = new Set<string>();
  /** When the view was last read (a follower's reads refresh it: freshen). */
  private refreshedAt = 0;
  private refreshing = false;
  /** The host address of each HA service's node that Patroni last said leads. */
  private leaders = new Map<string, string>();
  /** Each service's repository on the repository host, as last made there. */
  private repositories = new Map<string, RemoteRepository>();
  /** What each fork being made restores (forkSource), decided once: an attempt again restores the same. */
  private forkSources = new Map<string, ForkFromRepository>();
  /** Services being stopped on a host being drained, to move: announced once each. */
  private stopping = new Set<string>();
  /** Forks whose data is in place on their host: they need their parent no more. */
  private madeForks = new Set<string>();
  /** The term this process last judged hosts in, and since when (lost). */
  private heard: { term: number | undefined; since: number } | undefined;

  /** The nodes of HA services, each on a host of its own under Patroni. */
  private readonly ha: HaNodes;
  /** The nodes of read replica sets, on other hosts than their services'. */
  private readonly sets: ReplicaSets;

  constructor(private readonly o: HostsDriverOptions) {
    this.ha = new HaNodes({
      hosts: () => o.hosts(),
      placements: o.placements,
      etcdQuorum: () => o.etcdQuorum?.() ?? Promise.resolve(false),
      ...(o.forgetService
        ? { forgetService: (id: string) => o.forgetService?.(id) ?? Promise.resolve() }
        : {}),
      call: (host, method, args) => this.call(host, method, args),
      readersOf: async (serviceId) => this.sets.readers(await (o.replicaSetsOf?.(serviceId) ?? [])),
      lostAfterMs: o.lostAfterMs,
      lost: (host) => this.lost(host),
      clock: o.clock,
      log: o.log,
      notify: (target, note) => this.notify?.(target, note),
    });
    this.sets = new ReplicaSets({
      hosts: () => o.hosts(),
      placements: o.placements,
      call: (host, method, args) => this.call(host, method, args),
      applyService: (spec) => this.applyService(spec),
      replicationSecret: (serviceId) =>
        o.replicationSecret?.(serviceId) ??
        Promise.reject(new DriverError('No replication secret for HA services here.', false)),
      serviceOf: async (setId) => {
        const serviceId = await o.replicaSetService?.(setId);
        return serviceId === undefined ? undefined : o.serviceSpec(serviceId);
      },
      lostAfterMs: o.lostAfterMs,
      lost: (host) => this.lost(host),
      clock: o.clock,
      log: o.log,
      notify: (target, note) => this.notify?.(target, note),
    });
  }

  async start(): Promise<void> {
    await this.refresh();
    await this.announce();
    const loop = () => {
      this.timer = setTimeout(() => {
        void this.refresh()
          .catch((err: unknown) => this.o.log.warn({ err }, 'hosts driver: refresh failed'))
          .finally(() => !this.closed && loop());
      }, this.o.refreshMs ?? 2000);
    };
    loop();
  }

  /** The view of hosts and placements, read once before the API serves (endpointHost answers from it). */
  async prime(): Promise<void> {
    await this.readView().catch((err: unknown) =>
      this.o.log.warn({ err }, 'hosts driver: the first read of hosts and placements failed'),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
  }

  /**
   * Why no online host has room for a node of `size` now, or, for a placed
   * `resourceId` (a resize), why its own host has not: read from the store,
   * not the view.
   */
  async noRoom(size: Size, resourceId?: string, nodes = 1): Promise<string | undefined> {
    const held = reservation(size);
    if (nodes > 1) return this.ha.refusal(held, nodes, resourceId);
    const placed = resourceId === undefined ? undefined : await this.o.placements.get(resourceId);
    if (placed) {
      const host = await this.lookupHost(placed.hostId);
      if (!host) return undefined; // its operation says what became of the host
      const left = roomLeft(host, await this.o.placements.list(), placed.resourceId);
      if (left.cpuMillis >= held.cpuMillis && left.memoryMb >= held.memoryMb) return undefined;
      return (
        `its host ${host.name} has ${Math.max(0, left.cpuMillis)} millis and ${Math.max(0, left.memoryMb)} MB ` +
        `beside its other services, and the size asks for ${held.cpuMillis} millis and ${held.memoryMb} MB: ` +
        'choose a smaller size, or make room on that host.'
      );
    }
    const now = this.o.clock();
    // A repository host runs no nodes: it is never a candidate.
    const online = (await this.o.hosts()).filter((h) => takesNodes(h, now, this.o.lostAfterMs));
    if (online.length === 0) {
      return 'no database host is online (join one with `basin host token` and `basin host run`).';
    }
    if (chooseHost(online, await this.o.placements.list(), held)) return undefined;
    return `no online host has ${held.cpuMillis} millis and ${held.memoryMb} MB free for it: choose a smaller size, or add a host.`;
  }

  /**
   * A service runs under Patroni across hosts from its creation, or never:
   * its first node is a plain one otherwise, whose port and files a
   * Patroni node would not take over (docs/decisions.md, "HA across hosts").
   */
  haChangeRefusal(before: number, after: number): string | undefined {
    if ((before === 0) === (after === 0)) return undefined;
    return before === 0
      ? 'On an installation of several hosts, a service gets HA replicas at its creation only (replica_count): create a new service with them.'
      : 'On an installation of several hosts, an HA service keeps at least one replica: its nodes run under Patroni.';
  }

  /**
   * The address a service's clients connect to: its host's; a read replica
   * set's, its first node's host (its endpoint is on every database host);
   * undefined until it is placed.
   */
  endpointHost(resourceId: string): string | undefined {
    this.freshen();
    const p = this.placed.get(resourceId) ?? this.placed.get(`${resourceId}:node0`);
    return this.leaders.get(resourceId) ?? (p && this.hostsById.get(p.hostId)?.address);
  }

  watchNotes(on: (target: Target, note: ProgressNote) => void): void {
    this.notify = on;
  }

  async applyService(spec: ServiceSpec): Promise<Progress> {
    if (isHa(spec)) {
      // Its nodes archive into the service's stanza on the repository host.
      const progress = await this.ha.apply(await this.withRepository(spec, true));
      const leader = await this.ha.leaderHost(spec.serviceId);
      if (leader) this.leaders.set(spec.serviceId, leader);
      return progress;
    }
    let host = await this.hostFor(spec);
    if (this.lost(host)) {
      const lost = host;
      host = await this.serially(() => this.moveOffLost(spec, lost));
    } else if (host.draining) {
      const moving = await this.moveOffDraining(spec, host);
      if ('done' in moving) return moving;
      host = moving;
    }
    let applied = await this.withRepository(spec, true);
    const moved = (await this.o.placements.get(spec.serviceId))?.movedFrom;
    if (moved !== undefined) {
      // Its data comes from its own stanza, whatever it was made from.
      if (!applied.repository) throw new DriverError('Its repository is not known.', true);
      applied = {
        ...applied,
        relocated: {
          repository: applied.repository,
          parentSystemId: null,
          backupLabel: null,
          target: 'end',
        },
      };
      const progress = (await this.call(host, 'applyService', [applied])) as Progress;
      if (progress.done) await this.moveDone(spec.serviceId, host, moved);
      return progress;
    }
    if (applied.source.kind === 'fork' && !this.madeForks.has(spec.serviceId)) {
      if ((await this.call(host, 'forkMade', [spec.serviceId])) === true) {
        this.madeForks.add(spec.serviceId);
        this.forkSources.delete(spec.serviceId);
      } else {
        const from = await this.forkSource(applied);
        if (!('repository' in from)) return from;
        applied = { ...applied, source: { ...applied.source, fromRepository: from } };
      }
    }
    return (await this.call(host, 'applyService', [applied])) as Progress;
  }

  /**
   * A non-HA service whose host is lost, moved to another (docs/decisions.md,
   * "A lost host's service restored elsewhere"): on its owner's start, or at
   * once with `restoreLost`, and only with a repository host online to
   * restore it from; otherwise it waits for its host (retryably). The
   * placement row moves first, marked with the host it left, so that every
   * apply from then on, after a restart of the control plane too, restores
   * it there from its own stanza until that is done (and never makes it
   * anew); the lost host, when it reports again, removes its copy
   * (agent/stale-services.ts).
   */
  private async moveOffLost(spec: ServiceSpec, lost: Host): Promise<Host> {
    const repoHost = await this.repositoryHost();
    if (!(spec.resuming || this.o.restoreLost) || !repoHost || this.lost(repoHost)) {
      this.refuseLost(lost);
    }
    if (!(await this.backedUp(spec.serviceId))) {
      throw new DriverError(
        `Host ${lost.name} (${lost.address}) is lost, and the service has no backup to restore elsewhere yet: it waits for its host.`,
        true,
      );
    }
    const to = await this.otherHost(
      spec,
      lost,
      `Host ${lost.name} (${lost.address}) is lost, and no other online host has room to restore the service on: add a host, or bring ${lost.name} back.`,
    );
    this.onLostHost.delete(spec.serviceId);
    return this.moveTo(
      spec,
      lost,
      to,
      `basin: host ${lost.name} (${lost.address}) is lost: this service is restored on host ${to.name} (${to.address}) from its backups on the repository host: it keeps every transaction archived before the loss, and misses at most the last 5 minutes' (archive_timeout) that were not`,
    );
  }

  /**
   * A running non-HA service on a host being drained (`basin host drain`;
   * docs/decisions.md, "Draining a host"), moved to another with a short
   * stop: announced in its logs, then stopped where it is (the local
   * driver's stop archives everything written before it), then restored
   * on the other host from its stanza to the end of its archive, as a
   * lost host's is, so nothing written is lost. A stopped (PAUSED)
   * service stays until it is started, which moves it.
   */
  private async moveOffDraining(spec: ServiceSpec, from: Host): Promise<Host | Progress> {
    if (!spec.running) return from;
    const repoHost = await this.repositoryHost();
    if (!repoHost || this.lost(repoHost)) {
      throw new DriverError(
        `Host ${from.name} is being drained, and a service moves through the repository host, which ${repoHost ? `(${repoHost.name}) is lost` : 'this installation does not have'}: it stays until one is online.`,
        true,
      );
    }
    // Restored from its backups: it moves once it has one (its first is
    // taken when it is READY), never stopped before.
    if (!(await this.backedUp(spec.serviceId))) {
      return {
        done: false,
        retryAfterMs: 5_000,
        reason: 'waiting for its first backup to move it',
      };
    }
    const none = `Host ${from.name} is being drained, and no other online host has room for the service: add a host.`;
    // Chosen before it stops (there must be room), and again, with every
    // other placement decision held, once it has stopped.
    const to = await this.otherHost(spec, from, none);
    if (!this.stopping.has(spec.serviceId)) {
      this.stopping.add(spec.serviceId);
      this.notify?.(
        { kind: 'service', id: spec.serviceId },
        {
          severity: 'WARNING',
          message: `basin: host ${from.name} (${from.address}) is being drained: this service moves to host ${to.name} (${to.address}); it stops for the move (its connections end) and is restored there with everything written before the stop`,
        },
      );
    }
    const stop = { ...(await this.withRepository(spec, true)), running: false };
    const stopped = (await this.call(from, 'applyService', [stop])) as Progress;
    if (!stopped.done) {
      return { ...stopped, reason: `stopping it on host ${from.name} to move it` };
    }
    this.stopping.delete(spec.serviceId);
    return this.serially(async () =>
      this.moveTo(spec, from, await this.otherHost(spec, from, none)),
    );
  }

  private async backedUp(serviceId: string): Promise<boolean> {
    return (await this.o.hasBackup?.(serviceId)) ?? true;
  }

  /** Another online host with room for the service (its own row left out), chosen as placement does. */
  private async otherHost(spec: ServiceSpec, from: Host, none: string): Promise<Host> {
    const held = reservation(spec.size);
    const others = (await this.o.hosts()).filter(
      (h) => h.id !== from.id && takesNodes(h, this.o.clock(), this.o.lostAfterMs),
    );
    const placements = (await this.o.placements.list()).filter(
      (p) => p.resourceId !== spec.serviceId,
    );
    const to = chooseHost(others, placements, held);
    if (!to) throw new DriverError(none, true);
    return to;
  }

  /**
   * The service's placement moved to `to`, marked with the host it left:
   * from now on every apply restores it there from its own stanza until it
   * runs (moveDone), and `from`, when it hears, removes its copy.
   */
  private async moveTo(spec: ServiceSpec, from: Host, to: Host, note?: string): Promise<Host> {
    const held = reservation(spec.size);
    const placement = { resourceId: spec.serviceId, hostId: to.id, ...held, movedFrom: from.id };
    await this.o.placements.put(placement);
    this.placed.set(spec.serviceId, placement);
    this.hostsById.set(to.id, to);
    this.o.log.warn(
      { service: spec.serviceId, from: from.name, to: to.name },
      'a service is moved to another host',
    );
    if (note)
      this.notify?.(
        { kind: 'service', id: spec.serviceId },
        { severity: 'WARNING', message: note },
      );
    return to;
  }

  /** A moved service's data is in place and it runs: its placement is an ordinary one again. */
  private async moveDone(serviceId: string, host: Host, from: string): Promise<void> {
    const p = await this.o.placements.get(serviceId);
    if (!p || p.hostId !== host.id) return;
    const { movedFrom: _, ...settled } = p;
    await this.o.placements.put(settled);
    this.placed.set(serviceId, settled);
    const left = this.hostsById.get(from)?.name ?? from;
    this.notify?.(
      { kind: 'service', id: serviceId },
      {
        severity: 'LOG',
        message: `basin: restored on host ${host.name} (${host.address}) from its backups (moved from ${left}); its endpoint is there now`,
      },
    );
  }

  /**
   * What a fork being made restores from its parent's stanza on the
   * repository host (docs/decisions.md, "Several hosts": forks across
   * hosts), decided once per fork: the parent's host says its recorded
   * identifier and whether it runs, and first archives everything up to
   * now for a point-in-time fork of a running parent; a `NOW` fork of a
   * running parent is a fresh backup of it (started after the fork was
   * asked for), restored to where it ends; of a stopped one, its newest
   * backup and all its WAL (archived up to the stop). Progress while the
   * parent is backed up.
   */
  private async forkSource(spec: ServiceSpec): Promise<ForkFromRepository | Progress> {
    const known = this.forkSources.get(spec.serviceId);
    if (known) return known;
    const source = spec.source as Extract<ServiceSpec['source'], { kind: 'fork' }>;
    const parentId = source.parentServiceId;
    if (!(await this.repositoryHost())) {
      throw new DriverError(
        'A fork is restored from the repository host, and this installation has none: join one with `basin host run --role repository`.',
        false,
      );
    }
    const parent = await this.o.serviceSpec(parentId);
    const parentHost = await this.placedHost(parentId);
    if (!parent || !parentHost) {
      throw new DriverError(`Its parent ${parentId} does not exist (any more).`, false);
    }
    this.refuseLost(parentHost);
    const { repository } = await this.withRepository(parent);
    if (!repository) throw new DriverError(`Its parent ${parentId} has no repository.`, true);
    // A NOW or PITR fork needs the parent's latest moments: an idle parent
    // asleep is woken for it (and a PITR's are archived first); an HA
    // parent's, from its leader's node.
    const archive = source.strategy !== 'LAST_SNAPSHOT';
    let ready: ForkParent;
    if (isHa(parent)) {
      const leader = await this.ha.leaderNode(parent);
      if (!leader)
        return {
          done: false,
          retryAfterMs: 2000,
          reason: `waiting for a leader of its parent ${parentId}`,
        };
      ready = (await this.call(leader.host, 'readyPatroniParent', [
        parentId,
        { index: leader.index, port: leader.port },
        archive,
      ])) as ForkParent;
    } else {
      ready = (await this.call(parentHost, 'readyForkParent', [parentId, archive])) as ForkParent;
    }
    let backupLabel = source.backupLabel;
    let target: ForkFromRepository['target'] = 'immediate';
    if (source.strategy === 'NOW') {
      if (ready.running) {
        // Its checkpoint immediate: the fork's owner waits for it.
        const taken = await this.backupOf(parent, Date.parse(spec.createdAt), true);
        if (!taken.done) {
          return { ...taken, reason: `backing up its parent ${parentId} to fork it` };
        }
        backupLabel = taken.backup.label;
      } else {
        backupLabel = null;
        target = 'end';
      }
    } else if (source.strategy === 'PITR') {
      const time = source.targetTime as string;
      // Stopped since before the target: its state at the stop is the target's.
      const stopped =
        !ready.running && ready.stoppedAt !== null && Date.parse(time) >= ready.stoppedAt;
      target = stopped ? 'end' : { time };
    }
    const from: ForkFromRepository = {
      repository,
      parentSystemId: ready.systemId,
      backupLabel,
      target,
    };
    this.forkSources.set(spec.serviceId, from);
    this.o.log.info(
      { service: spec.serviceId, parent: parentId, strategy: source.strategy, backupLabel, target },
      'the fork is to be restored from the repository host',
    );
    return from;
  }

  /**
   * The service's spec with its repository on the repository host, when
   * the installation has one (docs/decisions.md, "Several hosts"): made
   * there (its server running) when `ensure` and the host is online, else
   * as last made. Without a repository host, the spec as it is: the
   * database host keeps the service's repository, as on one machine.
   */
  private async withRepository(spec: ServiceSpec, ensure = false): Promise<ServiceSpec> {
    const repoHost = await this.repositoryHost();
    if (!repoHost) return spec;
    const known = this.repositories.get(spec.serviceId);
    if (known && !ensure) return { ...spec, repository: known };
    if (this.lost(repoHost)) {
      if (known) return { ...spec, repository: known };
      throw new DriverError(
        `The repository host ${repoHost.name} (${repoHost.address}) is lost: the service's repository cannot be made until it reports again.`,
        true,
      );
    }
    const made = (await this.callRepository(repoHost, {
      action: 'ensure',
      serviceId: spec.serviceId,
      port: spec.port,
    })) as RemoteRepository;
    this.repositories.set(spec.serviceId, made);
    return { ...spec, repository: made };
  }

  /**
   * The installation's repository host, if one has joined (the first, by
   * id). From the store, not the view: before its first refresh the view
   * holds only the hosts placements put in it, and a service applied then
   * got a repository on its database host as if there were no repository
   * host (then a second one there once the view knew better).
   */
  private async repositoryHost(): Promise<Host | undefined> {
    const hosts = await this.o.hosts();
    return hosts.filter((h) => h.role === 'repository').sort((a, b) => (a.id < b.id ? -1 : 1))[0];
  }

  /** One call of the repository host's agent (agent/repository-host/); failures as the driver calls'. */
  private async callRepository(host: Host, body: Record<string, unknown>): Promise<unknown> {
    this.refuseLost(host);
    return this.call(host, '', [], '/v1/agent/repository', body);
  }

  async deleteService(serviceId: string): Promise<Progress> {
    if (await this.hasStandbyRows(serviceId)) {
      // Its stanza on the repository host first, with its backups, while
      // its node rows still say it is an HA service (a delete resumed after
      // a kill finds it so); its nodes' archiving into it ends with them.
      const repoHost = await this.repositoryHost();
      if (repoHost) {
        // Its forks being made restore from that stanza: waited for, as a service's.
        const forks = await this.o.forksBeingMade(serviceId);
        if (forks.length > 0) {
          return {
            done: false,
            retryAfterMs: 2000,
            reason: `waiting for its forks being made from its backups (${forks.join(', ')})`,
          };
        }
        const removed = await this.callRepository(repoHost, { action: 'remove', serviceId });
        if (removed !== true) {
          return { done: false, retryAfterMs: 200, reason: 'removing its repository' };
        }
        this.repositories.delete(serviceId);
      }
      const progress = await this.ha.delete(serviceId);
      if (progress.done) {
        this.placed.delete(serviceId);
        this.leaders.delete(serviceId);
      }
      return progress;
    }
    const placement = await this.o.placements.get(serviceId);
    if (!placement) return DONE;
    // Its forks being made restore (and recover) from its stanza, which its
    // delete removes: it waits for them, as its lock makes it on one machine.
    const forks = (await this.repositoryHost()) ? await this.o.forksBeingMade(serviceId) : [];
    if (forks.length > 0) {
      return {
        done: false,
        retryAfterMs: 2000,
        reason: `waiting for its forks being made from its backups (${forks.join(', ')})`,
      };
    }
    const host = this.hostsById.get(placement.hostId) ?? (await this.lookupHost(placement.hostId));
    if (!host) {
      // The host was removed: nothing of it is reachable to delete.
      await this.o.placements.remove(serviceId);
      return DONE;
    }
    // A lost host is not waited for: once the placement is gone, it removes
    // its copy when it reports again (agent/stale-services.ts), and one
    // alive but cut off has stopped it already (agent/self-fence.ts).
    const lost = this.lost(host);
    if (lost) {
      this.o.log.warn(
        { service: serviceId, host: host.name },
        'deleting a service on a lost host: the host removes its copy when it reports again',
      );
    }
    const progress = lost
      ? DONE
      : ((await this.call(host, 'deleteService', [serviceId])) as Progress);
    // Then its repository on the repository host, with its backups.
    const repoHost = await this.repositoryHost();
    if (progress.done && repoHost) {
      const removed = await this.callRepository(repoHost, { action: 'remove', serviceId });
      if (removed !== true)
        return { done: false, retryAfterMs: 200, reason: 'removing its repository' };
      this.repositories.delete(serviceId);
    }
    if (progress.done) {
      await this.o.placements.remove(serviceId);
      this.placed.delete(serviceId);
      this.metricsOf.delete(serviceId);
      this.forkSources.delete(serviceId);
      this.madeForks.delete(serviceId);
    }
    return progress;
  }

  async inspectService(spec: ServiceSpec): Promise<Health> {
    if (isHa(spec)) {
      const health = await this.ha.inspect(spec);
      const leader = await this.ha.leaderHost(spec.serviceId);
      if (leader) this.leaders.set(spec.serviceId, leader);
      return health;
    }
    const host = await this.placedHost(spec.serviceId);
    if (!host) return 'missing';
    const target: Target = { kind: 'service', id: spec.serviceId };
    if (this.lost(host)) {
      // Said once per loss, in the service's logs: which host, since when.
      if (!this.onLostHost.has(spec.serviceId)) {
        this.onLostHost.add(spec.serviceId);
        this.notify?.(target, {
          severity: 'ERROR',
          message: `basin: host ${host.name} (${host.address}) has not reported since ${new Date(host.heartbeatAt).toISOString()}: this service's node on it cannot be reached`,
        });
      }
      return 'failed';
    }
    const health = (await this.call(host, 'inspectService', [
      await this.withRepository(spec),
    ])) as Health;
    if (this.onLostHost.delete(spec.serviceId)) {
      this.notify?.(target, {
        severity: 'LOG',
        message: `basin: host ${host.name} (${host.address}) reports again`,
      });
    }
    return health;
  }

  async observeService(spec: ServiceSpec): Promise<ObservedNode[]> {
    if (isHa(spec)) return this.ha.observe(spec);
    const host = await this.placedHost(spec.serviceId);
    if (!host || this.lost(host)) return [];
    return (await this.call(host, 'observeService', [spec])) as ObservedNode[];
  }

  async backupService(spec: ServiceSpec, since: number): Promise<BackupProgress> {
    return this.backupOf(spec, since, spec.size.shared);
  }

  /**
   * A backup step; `fast`: its checkpoint immediate (a user waits for it, as
   * for a NOW fork's, or a shared service's, whose few dirty buffers an
   * immediate checkpoint writes at once: config/pgbackrest.ts
   * backupCheckpoint); otherwise spread, as PostgreSQL paces its own. A
   * service's first backup is always immediate (the repository host knows).
   */
  private async backupOf(spec: ServiceSpec, since: number, fast: boolean): Promise<BackupProgress> {
    if (isHa(spec)) return this.backupHaService(spec, since, fast);
    const host = await this.placedHost(spec.serviceId);
    if (!host) throw new DriverError(`Service ${spec.serviceId} is not placed on a host.`, true);
    this.refuseLost(host);
    const withRepo = await this.withRepository(spec);
    const repoHost = await this.repositoryHost();
    if (!withRepo.repository || !repoHost) {
      return (await this.call(host, 'backupService', [spec, since])) as BackupProgress;
    }
    // pgBackRest backs up only where the repository is: on the repository
    // host, reading the service through its own server on its host, which
    // runs for the backup.
    const source = (await this.call(host, 'openBackupSource', [withRepo])) as SourceInfo;
    const progress = await this.backupFrom(repoHost, spec, since, source, host, fast);
    if (progress.done) await this.call(host, 'closeBackupSource', [spec.serviceId]);
    return progress;
  }

  /**
   * A backup of an HA service across hosts: taken on the repository host
   * from its leader's node, through a pgBackRest server of that node's
   * (docs/decisions.md, "HA across hosts": backups). A cluster with no
   * leader now waits for one.
   */
  private async backupHaService(
    spec: ServiceSpec,
    since: number,
    fast: boolean,
  ): Promise<BackupProgress> {
    const repoHost = await this.repositoryHost();
    if (!repoHost) {
      // Its nodes archive nothing without one. The backup waits (said in
      // its operation) rather than fail, which would mark the service
      // UNSTABLE after a few attempts while its databases run as asked.
      return {
        done: false,
        retryAfterMs: 600_000,
        reason:
          'waiting for a repository host: an HA service across hosts is backed up there (`basin host run --role repository`)',
      };
    }
    const leader = await this.ha.leaderNode(spec);
    if (!leader)
      return { done: false, retryAfterMs: 2000, reason: 'waiting for a leader to back up' };
    const withRepo = await this.withRepository(spec);
    const node = { index: leader.index, port: leader.port, apiPort: leader.apiPort };
    const source = (await this.call(leader.host, 'openPatroniSource', [
      withRepo,
      node,
    ])) as SourceInfo;
    const progress = await this.backupFrom(repoHost, spec, since, source, leader.host, fast);
    if (progress.done) {
      await this.call(leader.host, 'closePatroniSource', [spec.serviceId, leader.index]);
    }
    return progress;
  }

  /**
   * One step of a backup on the repository host (pgBackRest backs up only
   * where the repository is), reading the service through `source`, a
   * pgBackRest server on `host` opened for the backup.
   */
  private async backupFrom(
    repoHost: Host,
    spec: ServiceSpec,
    since: number,
    source: SourceInfo,
    host: Host,
    fast: boolean,
  ): Promise<BackupProgress> {
    return (await this.callRepository(repoHost, {
      action: 'backup',
      serviceId: spec.serviceId,
      port: spec.port,
      since,
      fast,
      processMax: source.processMax,
      source: { ...source, host: host.address },
    })) as BackupProgress;
  }

  async expireBackups(serviceId: string, oldestKept: string): Promise<void> {
    const repoHost = await this.repositoryHost();
    if (repoHost) {
      if (!this.lost(repoHost)) {
        await this.callRepository(repoHost, { action: 'expire', serviceId, oldestKept });
      }
      return;
    }
    const host = await this.placedHost(serviceId);
    if (host && !this.lost(host)) await this.call(host, 'expireBackups', [serviceId, oldestKept]);
  }

  /**
   * Why a read replica set of `nodes` nodes of `size` for `serviceId`
   * cannot be made now: no database host other than its service's has
   * room (a 503), before anything is queued. With `replicaSetId` (a
   * resize), why its nodes' hosts have no room for them at `size`.
   */
  async replicaSetRefusal(
    serviceId: string,
    size: Size,
    nodes: number,
    replicaSetId?: string,
  ): Promise<{ invalid?: string; unavailable?: string } | undefined> {
    const why =
      replicaSetId === undefined
        ? await this.sets.refusal({ serviceId }, reservation(size), nodes)
        : await this.sets.resizeRefusal(replicaSetId, reservation(size));
    return why === undefined ? undefined : { unavailable: why };
  }

  async applyReplicaSet(spec: ReplicaSetSpec): Promise<Progress> {
    const host = await this.placedHost(spec.serviceId);
    if (!host) return wait(2000, `waiting for service ${spec.serviceId} to be placed`);
    // An HA service's node 0 may be on a lost host: Patroni leads elsewhere.
    if (!isHa(spec.primary)) this.refuseLost(host);
    return this.sets.apply(spec, host);
  }

  async deleteReplicaSet(id: string): Promise<Progress> {
    return this.sets.delete(id, async () => {
      const serviceId = await this.o.replicaSetService?.(id);
      return serviceId === undefined ? undefined : this.placedHost(serviceId);
    });
  }

  async inspectReplicaSet(spec: ReplicaSetSpec): Promise<Health> {
    return this.sets.inspect(spec, await this.placedHost(spec.serviceId));
  }

  async readLogs(target: Target, query: LogQuery): Promise<LogPage> {
    if (target.kind === 'replicaSet') return this.readReplicaNodeLogs(target.id, query);
    // The client's abort signal stays here: it does not cross to the host.
    const { signal: _, ...asked } = query;
    if (target.kind === 'service' && (await this.hasStandbyRows(target.id))) {
      // An HA service's node is read by its own host's agent, as its own
      // resource there (`<serviceId>n<i>`); one call, to one host, per
      // page. Which node is the API's number is Patroni's leader's order.
      const index = await this.ha.logNode(target.id, query.node ?? 0);
      const host = await this.placedHost(nodeResourceId(target.id, index));
      if (!host || this.lost(host)) return { entries: [] };
      const node: Target = { kind: 'service', id: patroniNodeId(target.id, index) };
      try {
        return (await this.call(host, 'readLogs', [node, { ...asked, node: 0 }])) as LogPage;
      } catch (err) {
        // A host that stopped answering (not yet counted lost): its node's
        // lines wait for it; the page still has Basin's own entries.
        this.o.log.warn(
          { err, service: target.id, host: host.name },
          "reading a node's logs failed",
        );
        return { entries: [] };
      }
    }
    const host = await this.placedHost(target.id);
    // A lost host's server lines cannot be read; Basin's own entries still are.
    if (!host || this.lost(host)) return { entries: [] };
    return (await this.call(host, 'readLogs', [target, asked])) as LogPage;
  }

  metrics(target: Target): Metrics | undefined {
    this.freshen();
    return this.metricsOf.get(target.id);
  }

  async sampleSeries(spec: ServiceSpec): Promise<SeriesSample[]> {
    const host = await this.placedHost(spec.serviceId);
    if (!host || this.lost(host)) return [];
    return (await this.call(host, 'sampleSeries', [spec])) as SeriesSample[];
  }

  /**
   * One placement decision at a time: two services created at once would
   * otherwise both read the same room left, go to the same host (spread
   * would not spread) and may hold more than it has between them.
   */
  private placing: Promise<unknown> = Promise.resolve();
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.placing.then(fn, fn);
    this.placing = next.catch(() => undefined);
    return next;
  }

  /** The host a service runs on, placing it (and recording its size there) at its first apply. */
  private hostFor(spec: ServiceSpec): Promise<Host> {
    return this.serially(() => this.placeOnce(spec));
  }

  private async placeOnce(spec: ServiceSpec): Promise<Host> {
    const now = this.o.clock();
    const held = reservation(spec.size);
    const existing = await this.o.placements.get(spec.serviceId);
    if (existing) {
      const host = await this.lookupHost(existing.hostId);
      if (!host) {
        throw new DriverError(
          `Service ${spec.serviceId} was placed on host ${existing.hostId}, which is no longer registered.`,
          false,
        );
      }
      if (existing.cpuMillis !== held.cpuMillis || existing.memoryMb !== held.memoryMb) {
        await this.o.placements.put({ ...existing, ...held });
      }
      return host;
    }
    const hosts = await this.o.hosts();
    const online = hosts.filter((h) => takesNodes(h, now, this.o.lostAfterMs));
    const chosen = chooseHost(online, await this.o.placements.list(), held);
    if (!chosen) {
      throw new DriverError(
        online.length === 0
          ? 'No database host is online to run the service: join one with `basin host token` and `basin host run`.'
          : `No host has room for a service of ${held.cpuMillis} millis and ${held.memoryMb} MB.`,
        false,
      );
    }
    const placement = { resourceId: spec.serviceId, hostId: chosen.id, ...held };
    await this.o.placements.put(placement);
    this.placed.set(spec.serviceId, placement);
    this.hostsById.set(chosen.id, chosen);
    this.o.log.info({ service: spec.serviceId, host: chosen.name }, 'service placed');
    return chosen;
  }

  /**
   * Whether a host has been silent longer than it may (by the view of the
   * last refresh), counted from this process's first look or its lead at
   * the earliest: after a restart, or once it leads in another's place,
   * the hosts' silence while no one listened does not make them lost
   * (they report again within a heartbeat or two, and a service moved
   * off a host that was fine is stopped for nothing).
   */
  private lost(host: Host): boolean {
    const seen = this.hostsById.get(host.id) ?? host;
    const term = this.o.term?.();
    if (this.heard === undefined || term !== this.heard.term) {
      this.heard = { term, since: this.o.clock() };
    }
    return hostState(seen, this.o.clock(), this.o.lostAfterMs, this.heard.since) === 'LOST';
  }

  /** A call to a lost host would wait for a timeout: fail at once, retryably. */
  private refuseLost(host: Host): void {
    if (this.lost(host)) {
      throw new DriverError(
        `Host ${host.name} (${host.address}) is lost: it has not reported.`,
        true,
      );
    }
  }

  /** Whether a service has rows of standby nodes (it is, or was, an HA service across hosts). */
  /**
   * The server lines of node `query.node` (0 unless asked) of a read
   * replica set across hosts, as one machine reads a set's node: from
   * that node's host, where it is a resource of its own (`<set>n<i>`, its
   * node 0). A lost host's cannot be read (none, as for a service); a
   * cursor is that host's, so one taken before the node moved reads
   * nothing on its new host.
   */
  private async readReplicaNodeLogs(setId: string, query: LogQuery): Promise<LogPage> {
    const node = query.node ?? 0;
    const row = await this.o.placements.get(`${setId}:node${node}`);
    const host = row && (await this.lookupHost(row.hostId));
    if (!host || this.lost(host)) return { entries: [] };
    const { signal: _, ...asked } = query;
    return (await this.call(host, 'readLogs', [
      { kind: 'replicaSet', id: patroniNodeId(setId, node) },
      { ...asked, node: 0 },
    ])) as LogPage;
  }

  private async hasStandbyRows(serviceId: string): Promise<boolean> {
    return (await this.o.placements.list()).some((p) =>
      p.resourceId.startsWith(`${serviceId}:node`),
    );
  }

  private async placedHost(resourceId: string): Promise<Host | undefined> {
    const p = this.placed.get(resourceId) ?? (await this.o.placements.get(resourceId));
    return p && (this.hostsById.get(p.hostId) ?? (await this.lookupHost(p.hostId)));
  }

  private async lookupHost(id: string): Promise<Host | undefined> {
    const host = (await this.o.hosts()).find((h) => h.id === id);
    if (host) this.hostsById.set(id, host);
    return host;
  }

  /** Hosts and placements from the store; metrics of every placed service from its host. */
  /**
   * A process that serves the API without leading (several Basins on one
   * store) never starts its driver, so nothing refreshes its view: its
   * reads do, in the background, when the view is older than a refresh.
   */
  private freshen(): void {
    if (this.timer !== undefined || this.refreshing) return;
    if (Date.now() - this.refreshedAt < (this.o.refreshMs ?? 2000)) return;
    this.refreshing = true;
    void this.refresh()
      .catch((err: unknown) => this.o.log.warn({ err }, 'hosts driver: refresh failed'))
      .finally(() => (this.refreshing = false));
  }

  private async refresh(): Promise<void> {
    const placements = await this.readView();
    await Promise.all(
      placements.map(async (p) => {
        const host = this.hostsById.get(p.hostId);
        if (!host || this.lost(host)) return;
        try {
          const m = (await this.call(host, 'metrics', [
            { kind: 'service', id: p.resourceId },
          ])) as Metrics | null;
          if (m) this.metricsOf.set(p.resourceId, m);
        } catch {
          // A host that does not answer keeps its last metrics until it does.
        }
      }),
    );
  }

  /** Hosts and placements from the store (no host is asked anything). */
  private async readView(): Promise<Placement[]> {
    this.refreshedAt = Date.now();
    const hosts = await this.o.hosts();
    this.hostsById = new Map(hosts.map((h) => [h.id, h]));
    const placements = await this.o.placements.list();
    this.placed = new Map(placements.map((p) => [p.resourceId, p]));
    return placements;
  }

  /**
   * Tells every host the term this process leads as before it acts, so a
   * host refuses the former leader's calls from now on, placed services or
   * not (a host that does not answer hears it with the next call).
   */
  private async announce(): Promise<void> {
    const term = this.o.term?.();
    if (term === undefined) return;
    const me = await this.o.identity();
    await Promise.all(
      [...this.hostsById.values()].map((host) =>
        httpsJson(agentUrl(host, '/v1/agent/health'), {
          ca: me.ca,
          cert: me.cert,
          key: me.key,
          peerCn: hostCertCn(host.id),
          headers: { [TERM_HEADER]: String(term) },
          timeoutMs: 5_000,
        }).catch(() => undefined),
      ),
    );
  }

  /** One driver call on a host's agent; a host that does not answer is a retryable failure. */
  private async call(
    host: Host,
    method: string,
    args: unknown[],
    path = '/v1/agent/driver',
    request: unknown = { method, args },
  ): Promise<unknown> {
    const me = await this.o.identity();
    let res;
    try {
      res = await httpsJson(agentUrl(host, path), {
        body: request,
        ca: me.ca,
        cert: me.cert,
        key: me.key,
        peerCn: hostCertCn(host.id),
        timeoutMs: READS.has(method) ? READ_TIMEOUT_MS : 120_000,
        connectTimeoutMs: CONNECT_TIMEOUT_MS,
        headers: termHeader(this.o.term?.()),
      });
    } catch (err) {
      throw new DriverError(`Host ${host.name} does not answer: ${(err as Error).message}`, true);
    }
    const body = res.body as { result?: unknown; error?: { message: string; retryable: boolean } };
    if (res.status !== 200 || typeof body !== 'object' || body === null) {
      throw new DriverError(`Host ${host.name} answered HTTP ${res.status}: ${res.text}`, true);
    }
    if (body.error) throw new DriverError(body.error.message, body.error.retryable);
    return body.result;
  }
}

/**
 * Reads of what a host runs answer in this long, or fail (retryably): a
 * host cut off does not answer at all until it is declared lost, and the
 * reconciler's round, which reads every service in turn, must not wait a
 * write's two minutes on each of its services meanwhile.
 */
const READ_TIMEOUT_MS = 5_000;
/**
 * How long connecting to a host may take: one killed or cut off answers
 * nothing, and an apply waiting the two minutes of a write on it would
 * hold the service's operation (and what Patroni did meanwhile, told by
 * the next reading) until then. Generous: a live host's agent accepts
 * and shakes hands within a second even on a loaded machine.
 */
const CONNECT_TIMEOUT_MS = 10_000;
const READS = new Set([
  'inspectService',
  'observeService',
  'readLogs',
  'sampleSeries',
  'metrics',
  'inspectReplicaNode',
]);

/**
 * What a database host answers when it opens a backup source (the local
 * driver's SourceInfo: drivers do not import each other).
 */
interface SourceInfo {
  port: number;
  config: string;
  pgPath: string;
  socketDir: string;
  pgPort: number;
  processMax: number;
}

/** A service with standbys: its nodes run under Patroni, each on a host of its own. */
const isHa = (spec: ServiceSpec) => spec.nodes.length > 1;

function termHeader(term: number | undefined): Record<string, string> {
  return term === undefined ? {} : { [TERM_HEADER]: String(term) };
}

export function createHostsDriver(o: HostsDriverOptions): HostsDriver {
  return new HostsDriver(o);
}
