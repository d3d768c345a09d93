// The driver interface: the only place that knows how databases are run.
// The engine hands a driver the *whole* desired state of a service or replica
// set (a spec built from the store by engine/specs.ts) and the driver makes the
// world match it, one idempotent step at a time. `sim` and `local` implement
// this interface and pass the same contract tests (test/contract).

import type { Backup } from '../domain/backups.js';
import type { ClusterState, PatroniLogEvent } from '../domain/patroni-cluster.js';
import type { StorageChange } from '../domain/storage.js';
import type { LogPage, LogQuery, Target } from '../domain/logs.js';
import type { Progress, ProgressNote } from '../domain/progress.js';
import type { NodeObservation, NodeRole } from '../domain/service-nodes.js';
import type { SeriesSample } from '../domain/series/catalogue.js';
import type {
  Capabilities,
  Environment,
  ForkStrategy,
  HaConfig,
  Metrics,
  ServiceType,
  Size,
} from '../domain/types.js';

/**
 * A driver failure. `retryable` failures (a port briefly busy, a process slow
 * to start) are retried with backoff; permanent ones fail the operation.
 */
export class DriverError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'DriverError';
  }
}

export type ServiceSource =
  | { kind: 'empty' }
  | {
      kind: 'fork';
      parentServiceId: string;
      strategy: ForkStrategy;
      /** ISO timestamp, for PITR. */
      targetTime: string | null;
      /** The parent's backup to restore (LAST_SNAPSHOT, PITR); null for NOW. */
      backupLabel: string | null;
      /**
       * Given by the hosts driver while the fork is made: restore it from
       * the parent's stanza on the repository host (the parent may run on
       * another host), not from the parent's files on this one.
       */
      fromRepository?: ForkFromRepository;
    };

/** What a fork restored from the repository host needs of its parent's own host (local/backups/fork-parent.ts). */
export interface ForkParent {
  /** Its recorded system identifier (null: made before identifiers were recorded). */
  systemId: string | null;
  /** Whether its server runs (and, when asked to archive, has archived everything up to now). */
  running: boolean;
  /** When Basin last stopped it with everything before archived (epoch ms); null: not stopped so. */
  stoppedAt: number | null;
}

/** A fork restored from its parent's stanza on the repository host (docs/decisions.md, "Several hosts"). */
export interface ForkFromRepository {
  /** The parent's repository there, as the fork's host reaches it. */
  repository: RemoteRepository;
  /** The parent's system identifier, as the parent's host recorded it (null: none recorded). */
  parentSystemId: string | null;
  /** The backup to restore (the chosen one, or a NOW fork's fresh one); null: the newest. */
  backupLabel: string | null;
  /** How far it recovers: to consistency, to a time, or to the end of the archive. */
  target: 'immediate' | 'end' | { time: string };
}

/** Everything a driver needs to run a service; derived, never stored. */
export interface ServiceSpec {
  serviceId: string;
  projectId: string;
  type: ServiceType;
  vector: boolean;
  size: Size;
  environment: Environment;
  /** Whether the service's processes should be running (false while PAUSING/PAUSED). */
  running: boolean;
  port: number;
  passwordVerifier: string;
  pooler: { enabled: boolean; port: number | null };
  /**
   * A service in a VPC: the blocks admitted instead of the public endpoint's
   * (the VPC's and its peers'). Empty: not in a VPC, the public ones.
   */
  allowedCidrs: string[];
  ha: HaConfig;
  /**
   * The nodes, as recorded (domain/service-nodes.ts): exactly one primary.
   * With HA replicas each node has a port of its own and `port` is the
   * proxy's; without, the primary listens on `port`.
   */
  nodes: SpecNode[];
  source: ServiceSource;
  createdAt: string;
  /**
   * Whether this apply carries out a user's start (status RESUMING): the
   * hosts driver then restores a service whose host is lost on another
   * host (docs/decisions.md, "A lost host's service restored elsewhere").
   */
  resuming?: boolean;
  /**
   * Given by the hosts driver while the service's node is moved onto this
   * host (its own host lost, or drained): its data is restored from its own
   * stanza on the repository host, to the end of its archive, keeping its
   * system identifier, never made anew (local/backups/fork-restore.ts).
   */
  relocated?: ForkFromRepository;
  /**
   * Where its repository is when not on its own host (the hosts driver, a
   * repository host online: docs/decisions.md, "Several hosts"); absent:
   * the local driver's own.
   */
  repository?: RemoteRepository;
}

/** A service's repository on the repository host, as its database host reaches it. */
export interface RemoteRepository {
  /** The repository host's address (the CN of its server certificate). */
  host: string;
  /** The service's server's port there. */
  port: number;
  /** The configuration that server loads for a client's command (repo1-host-config). */
  config: string;
}

/** A node of a service, as the driver needs it. */
export interface SpecNode {
  index: number;
  role: NodeRole;
  port: number;
}

/** What a driver's watch saw of a service's primary (see watchPrimaries). */
export type PrimaryEvent =
  /** Its server is gone (killed, crashed). */
  | { kind: 'dead' }
  /** It did not answer a check within `timeoutMs`: the `count`th in a row; at `limit` it is hung. */
  | { kind: 'unanswered'; count: number; limit: number; timeoutMs: number }
  /** It runs but did not answer `count` checks in a row: taken for dead, to be fenced and failed over. */
  | { kind: 'hung'; count: number; timeoutMs: number }
  /** It answers again after `after` unanswered checks. */
  | { kind: 'answering'; after: number };

/** Whether a service's primary is dead, and if so where its standbys stand (see prepareFailover). */
export type FailoverView =
  { dead: false } | { dead: true; standbys: { index: number; lsn: string | null }[] };

/** What the driver sees of one node of a service right now (see observeService). */
export type ObservedNode = Omit<NodeObservation, 'at'> & { index: number };

export interface ReplicaSetSpec {
  replicaSetId: string;
  serviceId: string;
  /**
   * The service it streams from, as its own spec: the set's nodes follow
   * its endpoint (and so its primary, through a failover) and run its
   * type's libraries.
   */
  primary: ServiceSpec;
  /** Each node's own port, by index (`port` is the set's endpoint). */
  nodePorts: number[];
  projectId: string;
  nodes: number;
  size: Size;
  environment: Environment;
  port: number;
  pooler: { enabled: boolean; port: number | null };
  allowedCidrs: string[];
}

/** A completed backup, as the driver names and dates it. */
export type BackupInfo = Omit<Backup, 'serviceId'>;

/** One step of a backup: done with the backup taken, or worth calling again. */
export type BackupProgress =
  { done: true; backup: BackupInfo } | { done: false; retryAfterMs: number; reason: string };

/**
 * What a driver's storage watch says of a service or replica set: its
 * level changed (`change`, for its logs), or its nodes are not converged
 * to its level yet (no `change`): either way a converge is wanted.
 */
export interface StorageEvent {
  target: Target;
  change?: StorageChange;
}

/** What a driver sees of a resource's processes right now. */
export type Health = 'running' | 'stopped' | 'failed' | 'missing';

export interface Driver {
  readonly name: string;
  readonly capabilities: Capabilities;

  /** Prepares the driver (checks the host, adopts running processes). */
  start(): Promise<void>;
  /** Stops background work; databases keep running. */
  close(): Promise<void>;

  applyService(spec: ServiceSpec): Promise<Progress>;
  deleteService(serviceId: string): Promise<Progress>;
  inspectService(spec: ServiceSpec): Promise<Health>;
  /**
   * What each node of the service is now (role, readiness, timeline, WAL
   * position, lag), for the engine to record. Nodes it cannot reach are
   * reported not ready; it never throws for a node that is down.
   */
  observeService?(spec: ServiceSpec): Promise<ObservedNode[]>;
  /**
   * Calls `on(serviceId, event)` soon (well within a second) after the
   * primary of a running service with standbys dies without the driver
   * stopping it (`dead`), and when it stops answering the driver's
   * periodic checks (`unanswered` at each, `hung` once too many came in a
   * row: prepareFailover then takes it for dead) or answers again.
   */
  watchPrimaries?(on: (serviceId: string, event: PrimaryEvent) => void): void;
  /**
   * Calls `on(target, note)` when the driver sees something happen to a
   * service or read replica set, outside any operation, that its logs
   * should tell (the local driver: processes of a node killed by the
   * kernel at its memory bound). Restarting what died is the reconciler's
   * business, through inspectService, as for any crash.
   */
  watchNotes?(on: (target: Target, note: ProgressNote) => void): void;
  /**
   * When the recorded primary of `spec` is dead (and the driver is not
   * restarting it): fences it, so that nothing of it runs or accepts a
   * write any more, and says how far each standby that answers received
   * WAL. `{ dead: false }` otherwise (it runs, or it is being restarted).
   */
  prepareFailover?(spec: ServiceSpec): Promise<FailoverView>;

  /**
   * One step of a full backup of a running service: done once a backup that
   * started at or after `since` (epoch ms) has completed, with that backup;
   * otherwise one is started, or is still running. Each call returns soon:
   * the backup runs in the background. A service that does not run cannot
   * be backed up: a retryable DriverError.
   */
  backupService(spec: ServiceSpec, since: number): Promise<BackupProgress>;
  /**
   * Removes the service's backups older than the one labelled `oldestKept`,
   * and the archived WAL only they needed. Backups already gone are not an error.
   */
  expireBackups(serviceId: string, oldestKept: string): Promise<void>;

  applyReplicaSet(spec: ReplicaSetSpec): Promise<Progress>;
  deleteReplicaSet(replicaSetId: string): Promise<Progress>;
  inspectReplicaSet(spec: ReplicaSetSpec): Promise<Health>;

  /**
   * One page of logs. Throws InvalidCursorError for a cursor it did not issue.
   * The caller has checked that `query.node` exists (node 0 is the primary).
   */
  readLogs(target: Target, query: LogQuery): Promise<LogPage>;

  /**
   * Latest sampled usage of the target's primary node (a replica set: one of
   * its nodes), or undefined when nothing was sampled yet; with its storage
   * allowance and level where the driver keeps them. Must be cheap: it is
   * called on every GET of a service.
   */
  metrics(target: Target): Metrics | undefined;

  /**
   * One sample of every metric series of a running service's nodes
   * (domain/series/catalogue.ts), for Basin's collector, on its timer and
   * never on a request. A node that cannot be sampled is left out; this
   * never throws for one.
   */
  sampleSeries?(spec: ServiceSpec): Promise<SeriesSample[]>;
  /** The same of a read replica set's nodes (all replicas) and its pooler. */
  sampleReplicaSetSeries?(spec: ReplicaSetSpec): Promise<SeriesSample[]>;

  /**
   * Calls `on` when the storage level of a service or replica set changes
   * (domain/storage.ts), and while its nodes are not converged to it.
   * Drivers without storage allowances have none.
   */
  watchStorage?(on: (event: StorageEvent) => void): void;
  /** The host's disk, where the driver keeps a reserve on it; undefined when it does not (or before it looked). */
  disk?(): { free: number; reserve: number; low: boolean } | undefined;
  /**
   * The address clients reach a service (or read replica set) at, when the
   * driver runs it on a host other than the public host (the hosts driver).
   */
  endpointHost?(resourceId: string): string | undefined;
  /**
   * Reads what its synchronous answers need (the hosts driver: hosts and
   * placements, for endpointHost) before the API serves, which may be long
   * before the driver starts (a process that does not lead yet).
   */
  prime?(): Promise<void>;

  /**
   * One step of running this host's node of an HA service across hosts
   * under Patroni (the local driver of a host agent, called by the hosts
   * driver: docs/decisions.md, "HA across hosts"); done once its Patroni
   * runs. Which node leads is Patroni's to decide, never the spec's.
   */
  applyPatroniNode?(spec: ServiceSpec, node: PatroniNodeSpec): Promise<Progress>;
  /**
   * This host's endpoint of an HA service across hosts (every database
   * host runs one): `spec.port` routed to whichever of `members` Patroni
   * says is the primary.
   */
  applyPatroniEndpoint?(spec: ServiceSpec, members: PatroniNodeMember[]): Promise<Progress>;
  /**
   * Whether this host's node of the service runs its Patroni, and the
   * cluster as it tells; with `pooler`, whether the service's pooler on
   * this host runs too.
   */
  inspectPatroniNode?(
    serviceId: string,
    node: { index: number; apiPort: number; pooler?: boolean; logSince?: number },
  ): Promise<PatroniNodeView>;
  /**
   * A backup on the repository host reads this host's node of an HA
   * service through a pgBackRest server of the node's (as openBackupSource
   * a service's): started here for it, stopped by closePatroniSource.
   */
  openPatroniSource?(
    spec: ServiceSpec,
    node: { index: number; port: number; apiPort: number },
  ): Promise<unknown>;
  closePatroniSource?(serviceId: string, index: number): Promise<void>;
  /** readyForkParent's answer for an HA service across hosts, from this host's node (its leader). */
  readyPatroniParent?(
    serviceId: string,
    node: { index: number; port: number },
    archive: boolean,
  ): Promise<ForkParent>;
  /**
   * The settings this host's node runs with that take a restart to match
   * what it was given (a resize); null while its PostgreSQL does not answer.
   */
  stalePatroniSettings?(
    serviceId: string,
    node: { index: number; port: number },
  ): Promise<string[] | null>;
  /** This host's node restarted by its Patroni (POST /restart) when it runs with stale settings. */
  restartPatroniNode?(
    serviceId: string,
    node: { index: number; port: number; apiPort: number },
  ): Promise<Progress>;
  /** This host's node, the leader, asks its Patroni to hand over to `candidate` (POST /switchover). */
  switchoverPatroni?(
    serviceId: string,
    node: { index: number; port: number; apiPort: number },
    candidate: string,
  ): Promise<Progress>;
  /** This host's node's Patroni stopped, and its PostgreSQL with it. */
  stopPatroniNode?(serviceId: string, index: number): Promise<Progress>;

  /**
   * On the host of a service's primary (a service without HA across
   * hosts): admits a read replica set's nodes, whose hosts are elsewhere
   * (docs/decisions.md, "Read replica sets across hosts"): its pg_hba
   * admits the replication role from `addresses`, the primary has the
   * role and the set's `slots`. Answers the role's password once done,
   * for the set's nodes' hosts.
   */
  admitReplicaSet?(spec: ServiceSpec, admit: ReplicaSetAdmission): Promise<AdmittedReplicaSet>;
  /** The reverse of admitReplicaSet once the set's nodes are gone: its slots dropped, its addresses no longer admitted. */
  releaseReplicaSet?(spec: ServiceSpec, replicaSetId: string): Promise<Progress>;
  /** One node of a read replica set across hosts, a resource of its own on this host (`nodeId`). */
  applyReplicaNode?(nodeId: string, node: ReplicaNodeSpec): Promise<Progress>;
  /** Whether this host's node of a set runs and streams from its primary. */
  inspectReplicaNode?(nodeId: string, node: ReplicaNodeSpec): Promise<Health>;
  /** This host's endpoint of a read replica set across hosts: `spec.port` balanced over `servers`. */
  applyReplicaSetEndpoint?(spec: ReplicaSetSpec, servers: ReplicaSetServer[]): Promise<Progress>;
}

/**
 * A node of a read replica set across hosts as its endpoint reaches it: at
 * its host's address; `enabled: false` while it is being moved off a
 * drained host (no connection is sent to it before it runs there).
 */
export interface ReplicaSetServer {
  index: number;
  host: string;
  port: number;
  enabled?: boolean;
}

/** What the host of a service's primary admits for one read replica set across hosts. */
export interface ReplicaSetAdmission {
  replicaSetId: string;
  /** The set's slots on the primary (`rs_<set>_<i>`). */
  slots: string[];
  /** The addresses of the hosts of the set's nodes: replication is admitted from them only. */
  addresses: string[];
}

/** What admitReplicaSet answers: a wait, or done with the replication role's password. */
export type AdmittedReplicaSet =
  { done: false; retryAfterMs: number; reason: string } | { done: true; secret: string };

/** What the control plane tells the host of one node of a read replica set across hosts. */
export interface ReplicaNodeSpec {
  set: ReplicaSetSpec;
  /** The node's index in the set (its slot and application_name: `rs_<set>_<index>`). */
  index: number;
  /** Where it streams from: its service primary's host address and port. */
  source: { host: string; port: number };
  /** The service's replication role's password (admitReplicaSet's answer, or the HA service's derived one). */
  secret: string;
  /**
   * Without a slot of its own: a node of an HA service's set (Patroni owns
   * the slots of its cluster, and drops those it does not know).
   */
  noSlot?: boolean;
  /**
   * This node runs its host's pooler of the set (the set's pooler is
   * enabled, and it is the node of the lowest index on its host), one of
   * `poolers` (the set's hosts): each takes that share of the set's pools.
   */
  pooler?: { poolers: number };
  /**
   * Every database host's address: the set's endpoint is on each, so the
   * node's certificate names them all (verify-full through any), and its
   * pg_hba admits HAProxy's connections from them.
   */
  names: string[];
}

export { patroniNodeId } from '../domain/hosts.js';

/** One node of an HA service across hosts, as its members know it: its host's address and ports. */
export interface PatroniNodeMember {
  index: number;
  address: string;
  /** Its PostgreSQL port on its host. */
  port: number;
  /** Its Patroni REST API port on its host. */
  apiPort: number;
}

/** What the control plane tells the host of one node of an HA service across hosts. */
export interface PatroniNodeSpec {
  /** This node's index (its member name is node<index>). */
  index: number;
  /** Every node of the service, this one included. */
  members: PatroniNodeMember[];
  /**
   * Every address a client may reach the service by (every database
   * host's): the node's certificate names them all, so verify-full holds
   * through any of them.
   */
  names: string[];
  /** Who may call the REST API's unsafe endpoints besides the members: the control plane's addresses. */
  allowlist: string[];
  /** Patroni's timing (PatroniTiming); Patroni's defaults when absent. */
  timing?: PatroniTiming;
  /** The host addresses of the service's read replica sets' nodes: its pg_hba admits their replication. */
  readers?: string[];
}

/**
 * Patroni's timing, in seconds: the leader key's TTL, its loop, its
 * retries, and how long a primary's stop may run in synchronous mode
 * before Patroni cuts it short (`primary_stop_timeout`, dynamic; absent,
 * Patroni's default 0 waits for the stop: docs/decisions.md, "HA across
 * hosts", a partition).
 */
export interface PatroniTiming {
  ttl: number;
  loopWait: number;
  retryTimeout: number;
  primaryStopTimeout?: number;
}

/** What a node's host sees of it: whether its Patroni runs, and the cluster as its REST API tells. */
export interface PatroniNodeView {
  patroni: boolean;
  cluster: ClusterState | null;
  /**
   * What the node's Patroni decided, from its log (local/patroni/patroni-log.ts),
   * oldest first: those at or after `logSince` when the call gave one.
   */
  events?: PatroniLogEvent[];
  /** Whether the service's pooler on this host runs (asked only while it should). */
  pooler?: boolean;
  /**
   * While its Patroni does not run: how its PostgreSQL last stopped (its
   * control file): cleanly as the primary, or as a standby, and its latest
   * checkpoint. A start after a stop starts the last primary first.
   */
  stopped?: { shutDown: 'primary' | 'standby' | 'other'; checkpoint: string; timeline: number };
}
