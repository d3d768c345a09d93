// Repository interfaces. Commands and the engine depend on these, never on
// SQLite: a PostgreSQL store can implement the same interfaces later (the
// methods are async for that reason). Writes that belong together go through
// `transaction`, which hands the callback a Tx with the same repositories.

import type { Backup } from '../domain/backups.js';
import type { Host, HostCapacity, HostToken, HostUsage, Placement } from '../domain/hosts.js';
import type { NewOperation, OperationKind, ResourceKind } from '../domain/operations.js';
import type { SeriesSample } from '../domain/series/catalogue.js';
import type {
  Credential,
  Metrics,
  Peering,
  Project,
  ReplicaSet,
  Service,
  User,
  Vpc,
} from '../domain/types.js';

export interface ProjectReads {
  get(id: string): Promise<Project | undefined>;
  list(ids?: readonly string[]): Promise<Project[]>;
  count(): Promise<number>;
}

export interface ProjectRepo extends ProjectReads {
  insert(p: Project): Promise<void>;
}

export interface UserReads {
  get(id: string): Promise<User | undefined>;
  findByName(name: string): Promise<User | undefined>;
  list(): Promise<User[]>;
  projectIds(userId: string): Promise<string[]>;
}

export interface UserRepo extends UserReads {
  insert(u: User): Promise<void>;
  addToProject(userId: string, projectId: string): Promise<void>;
  /** Sets a user's email; false when there is no such user. */
  setEmail(userId: string, email: string): Promise<boolean>;
}

export interface CredentialReads {
  get(id: string): Promise<Credential | undefined>;
  findByBearerHash(hash: string): Promise<Credential | undefined>;
  findByAccessKey(accessKey: string): Promise<Credential | undefined>;
  list(): Promise<Credential[]>;
}

export interface CredentialRepo extends CredentialReads {
  insert(c: Credential): Promise<void>;
  revoke(id: string, at: string): Promise<boolean>;
}

export interface DocReads<T extends { id: string; version: number }> {
  get(id: string): Promise<T | undefined>;
}

/**
 * Versioned documents: `update` succeeds only when the stored version is the
 * one the caller read (optimistic lock) and bumps it; otherwise it throws a
 * CONFLICT, so two writers can never silently overwrite each other.
 */
export interface DocRepo<T extends { id: string; version: number }> extends DocReads<T> {
  insert(doc: T): Promise<void>;
  update(doc: T): Promise<T>;
  delete(id: string): Promise<void>;
}

export interface VpcReads extends DocReads<Vpc> {
  listByProject(projectId: string): Promise<Vpc[]>;
}
export interface VpcRepo extends DocRepo<Vpc>, VpcReads {}

export interface PeeringReads extends DocReads<Peering> {
  listByVpc(vpcId: string): Promise<Peering[]>;
}
export interface PeeringRepo extends DocRepo<Peering>, PeeringReads {}

export interface ServiceReads extends DocReads<Service> {
  listByProject(projectId: string): Promise<Service[]>;
  listAll(): Promise<Service[]>;
  countByVpc(vpcId: string): Promise<number>;
}
export interface ServiceRepo extends DocRepo<Service>, ServiceReads {}

export interface ReplicaSetReads extends DocReads<ReplicaSet> {
  listByService(serviceId: string): Promise<ReplicaSet[]>;
  listAll(): Promise<ReplicaSet[]>;
}
export interface ReplicaSetRepo extends DocRepo<ReplicaSet>, ReplicaSetReads {}

export type OperationState = 'pending' | 'done' | 'failed' | 'cancelled';
export type { NewOperation, ResourceKind };

/** What the queue adds to an operation: its id, state, retries and lease. */
export interface OperationRecord {
  id: number;
  state: OperationState;
  /** Failed attempts so far (only failures count, not "wait and call again"). */
  attempts: number;
  /** Times it was released to be called again ("not done yet"): waits are bounded too. */
  waits: number;
  /** Epoch ms of its first wait; null until it waited. */
  waitingSince: number | null;
  lastError: string | null;
  /** Epoch ms before which the operation is not run. */
  runAfter: number;
  lockedBy: string | null;
  leaseExpiresAt: number | null;
  createdAt: string;
  updatedAt: string;
}

/** A stored operation, typed by kind (domain/operations.ts). */
export type Operation<K extends OperationKind = OperationKind> = {
  [P in K]: NewOperation<P> & OperationRecord;
}[K];

/** A failed operation that is the newest of its resource (see OperationRepo.latestFailures). */
export interface FailedOperation {
  id: number;
  /** As stored: a row the store could not read has failed too, whatever its kind. */
  kind: string;
  resourceKind: string;
  resourceId: string;
  lastError: string | null;
}

export interface ClaimLimits {
  /** How long the claim holds before another worker may take the operation. */
  leaseMs: number;
  /** At most this many operations. */
  limit: number;
  /** At most this many leased by this worker per project, counting those it already holds. */
  perProject: number;
}

/**
 * The durable operation queue. Every time comes from the caller (the injected
 * clock), never from the store's host. Writes that act for a worker (release,
 * finish) apply only while that worker holds the lease of a pending operation,
 * and say whether they applied: a worker whose lease was taken over, or whose
 * operation was cancelled meanwhile, changes nothing.
 *
 * Rows are checked when read: an operation of an unknown kind or with a
 * malformed payload (written by a newer Basin, or damaged) is never handed
 * out: claim fails it with a last_error that says why, and get/listPending
 * leave it out.
 */
/**
 * How a claimed operation is put back: after a failure (`attempts` counts
 * it) or a wait (`waits` and `waitingSince` given; absent, they are kept).
 */
export interface ReleaseAt {
  now: number;
  runAfter: number;
  error: string | null;
  attempts: number;
  waits?: number;
  waitingSince?: number;
}

export interface OperationReads {
  /** The workers that hold leases on pending operations (live or not). */
  leaseHolders(): Promise<string[]>;
  get(id: number): Promise<Operation | undefined>;
  listPending(): Promise<Operation[]>;
  /** Resources whose newest operation failed: nothing retries them until a request does. */
  latestFailures(): Promise<FailedOperation[]>;
  /** The earliest `runAfter` of pending operations, to know when to wake. */
  nextDue(): Promise<number | undefined>;
}

export interface OperationRepo extends OperationReads {
  /**
   * Queues `op`. A converge supersedes the queued converges of its resource
   * that no live worker holds (they are cancelled): converges drive a resource
   * to its whole stored desired state, and domain/operations.ts builds each
   * one to settle whatever status the resource is in, so the newest does
   * everything the older ones would have. A user's request thereby replaces
   * an operation that is backing off, with fresh attempts.
   */
  enqueue(op: NewOperation, now: number): Promise<Operation>;
  /**
   * Claims runnable operations for `worker`: pending, due, not leased by
   * another worker whose lease still runs, and the oldest pending one of their
   * resource (a resource's operations run one at a time, in order). Oldest due
   * first, within `limits`.
   */
  claim(worker: string, now: number, limits: ClaimLimits): Promise<Operation[]>;
  /** Extends every lease `worker` holds to `now + leaseMs` (its heartbeat). */
  renew(worker: string, now: number, leaseMs: number): Promise<void>;
  /** Puts a claimed operation back, to run again after `runAfter`. */
  release(id: number, worker: string, at: ReleaseAt): Promise<boolean>;
  finish(
    id: number,
    worker: string,
    state: 'done' | 'failed',
    error: string | null,
    now: number,
  ): Promise<boolean>;
  /** Cancels the pending operations of a resource (including one a worker runs). */
  cancelForResource(kind: ResourceKind, resourceId: string, now: number): Promise<void>;
  /**
   * Drops every lease `worker` holds, so others may run its operations at
   * once. Only for a worker known to be dead; returns how many were dropped.
   */
  releaseLeases(worker: string, now: number): Promise<number>;
}

/**
 * An entry Basin writes into a resource's logs (why provisioning failed,
 * retries), shown by the logs endpoint beside the database's own entries.
 */
export interface NewEvent {
  resourceKind: ResourceKind;
  resourceId: string;
  /** The node it concerns; null: the resource as a whole (shown with node 0). */
  node: number | null;
  /** Epoch ms, from the injected clock. */
  at: number;
  /** Upper case, one of PostgreSQL's levels (ERROR, WARNING, LOG…). */
  severity: string;
  message: string;
}

export interface StoredEvent extends NewEvent {
  id: number;
}

export interface EventQuery {
  /** Events of this node, and those without a node when it is 0. */
  node: number;
  /** Only events strictly older, in (at, id) order, than this one: a page's resume point. */
  before?: { at: number; id: number } | undefined;
  /** Exclusive bounds, epoch ms. */
  since?: number | undefined;
  until?: number | undefined;
  /** Any of these (upper case); all when empty. */
  severities: readonly string[];
  /** Case-insensitive substrings of the message, all required. */
  search: readonly string[];
  limit: number;
}

/** The newest events kept per resource; older ones are dropped as new ones come. */
export const EVENTS_KEPT_PER_RESOURCE = 1000;

export interface EventReads {
  /** Newest first: by `at`, then by id. */
  list(kind: ResourceKind, resourceId: string, q: EventQuery): Promise<StoredEvent[]>;
}

export interface EventRepo extends EventReads {
  /** Records an event, dropping the resource's oldest beyond EVENTS_KEPT_PER_RESOURCE. */
  add(e: NewEvent): Promise<void>;
  /** A resource's events go with it. */
  deleteForResource(kind: ResourceKind, resourceId: string): Promise<void>;
}

/** TCP ports handed out to services, pollers and nodes, so no two collide. */
export interface PortReads {
  get(owner: string): Promise<number | undefined>;
}

export interface PortRepo extends PortReads {
  /**
   * The owner's port, allocating the lowest free one in [min, max] if it has
   * none; `usable` can veto a port (e.g. another program listens on it).
   */
  allocate(
    owner: string,
    min: number,
    max: number,
    usable?: (port: number) => Promise<boolean>,
  ): Promise<number>;
  release(owner: string): Promise<void>;
  /** Releases every port whose owner starts with `prefix`. */
  releasePrefix(prefix: string): Promise<void>;
}

/**
 * Named counters that only ever go up. The local driver keeps here the
 * highest uid it gave a service's OS user, so that a uid, once given, is
 * never given again (docs/security.md): files a deleted service left behind
 * can then never belong to another.
 */
export interface CounterRepo {
  /**
   * Bumps the counter `name` and returns its new value: one more than its
   * last value, and at least `floor` (a new counter starts at `floor`).
   * Call it in a transaction: the value is given out once it commits.
   */
  next(name: string, floor: number): Promise<number>;
}

/**
 * The completed backups of each service, as the engine recorded them: what
 * the recovery window is computed from when a fork is requested (no driver
 * is asked on a request's path).
 */
export interface BackupReads {
  /** Oldest first. */
  listByService(serviceId: string): Promise<Backup[]>;
}

export interface BackupRepo extends BackupReads {
  /** Records a backup; recording the same label again changes nothing. */
  insert(b: Backup): Promise<void>;
  /** Forgets the service's backups that started before the one labelled `label`. */
  deleteOlderThan(serviceId: string, label: string): Promise<void>;
  deleteForService(serviceId: string): Promise<void>;
}

export interface HostReads {
  get(id: string): Promise<Host | undefined>;
  findByName(name: string): Promise<Host | undefined>;
  /** By name. */
  list(): Promise<Host[]>;
}

export interface HostRepo extends HostReads {
  /** A name already taken is a CONFLICT. */
  insert(h: Host): Promise<void>;
  /** Records a heartbeat at `at`; false when the host is not (or no longer) registered. */
  heartbeat(id: string, at: number, capacity: HostCapacity, usage: HostUsage): Promise<boolean>;
  /** Forgets a host: its certificate is refused from then on. False when there was none. */
  remove(id: string): Promise<boolean>;
  /** Marks a host as being drained, or not; false when there is no such host. */
  setDraining(id: string, draining: boolean): Promise<boolean>;
}

export interface PlacementReads {
  get(resourceId: string): Promise<Placement | undefined>;
  list(): Promise<Placement[]>;
}

/** Which host runs which service (docs/decisions.md, "Several hosts"). */
export interface PlacementRepo extends PlacementReads {
  /** Records or replaces a resource's placement. */
  put(p: Placement): Promise<void>;
  remove(resourceId: string): Promise<void>;
}

/** One-time join tokens (docs/decisions.md, "Several hosts"). */
export interface HostTokenRepo {
  insert(t: HostToken): Promise<void>;
  get(id: string): Promise<HostToken | undefined>;
  /** Marks it used by `hostId`; false when it was used already (a token joins one host). */
  use(id: string, hostId: string): Promise<boolean>;
}

/**
 * The installation's own secrets (the CA of its hosts' mutual TLS), by name.
 * In the store, not a data directory: every control-plane process must hold
 * the same ones.
 */
export interface SecretReads {
  get(name: string): Promise<string | undefined>;
}

export interface SecretRepo extends SecretReads {
  /** Stores `value` unless the name has one; returns the value stored (first writer wins). */
  putIfAbsent(name: string, value: string): Promise<string>;
}

export interface Repos {
  projects: ProjectRepo;
  users: UserRepo;
  credentials: CredentialRepo;
  vpcs: VpcRepo;
  peerings: PeeringRepo;
  services: ServiceRepo;
  replicaSets: ReplicaSetRepo;
  operations: OperationRepo;
  events: EventRepo;
  ports: PortRepo;
  counters: CounterRepo;
  backups: BackupRepo;
  hosts: HostRepo;
  hostTokens: HostTokenRepo;
  secrets: SecretRepo;
  placements: PlacementRepo;
}

export type Tx = Repos;

/**
 * The repositories' reads, for reads outside a transaction (the store
 * itself): no write method, so a write outside `transaction` does not
 * compile. Counters have no read: taking a number is a write.
 */
export interface ReadRepos {
  projects: ProjectReads;
  users: UserReads;
  credentials: CredentialReads;
  vpcs: VpcReads;
  peerings: PeeringReads;
  services: ServiceReads;
  replicaSets: ReplicaSetReads;
  operations: OperationReads;
  events: EventReads;
  ports: PortReads;
  backups: BackupReads;
  hosts: HostReads;
  secrets: SecretReads;
  placements: PlacementReads;
}

/**
 * The reads that every request makes (authentication, GETs of services),
 * shaped like the repositories but synchronous: see Store.readView.
 */
export interface ReadView {
  credentials: {
    findByBearerHash(hash: string): Credential | undefined;
    findByAccessKey(accessKey: string): Credential | undefined;
  };
  users: { projectIds(userId: string): readonly string[] };
  services: {
    get(id: string): Service | undefined;
    listByProject(projectId: string): readonly Service[];
  };
  replicaSets: {
    get(id: string): ReplicaSet | undefined;
    listByService(serviceId: string): readonly ReplicaSet[];
  };
}

/** The leadership lease as it stands (src/leader/leadership.ts). */
export interface Lease {
  term: number;
  holder: string | null;
  /** How long it still holds, by the store's clock (negative: expired). */
  remainingMs: number;
}

/** A lease just taken (LeadershipRepo.acquire). */
export interface Acquired {
  term: number;
  /** Who held it last, when its lease expired rather than was released: a leader to fence. */
  previous: string | null;
}

/**
 * The one row that says which of the Basin processes sharing a store leads
 * (runs the engine). Every time is the store's clock, never a process's:
 * processes may disagree on the time, the store is one. Each call is a
 * statement of its own, outside `transaction`, and atomic.
 */
export interface LeadershipRepo {
  /**
   * Takes the lease for `holder` when nobody holds it or it expired: the
   * next term (one more than the last) and the holder whose lease expired
   * (null when it was released or never held), or undefined when another
   * holds it.
   */
  acquire(holder: string, leaseMs: number): Promise<Acquired | undefined>;
  /** Extends the lease of `term` to `leaseMs` from now; false when `term` no longer holds it. */
  renew(term: number, leaseMs: number): Promise<boolean>;
  /**
   * Ends the lease of `term` now (a clean shutdown): the next candidate takes
   * it at once, and finds no holder to fence.
   */
  release(term: number): Promise<void>;
  /** The lease; undefined before anyone took it. */
  current(): Promise<Lease | undefined>;
}

/**
 * A write refused because the writer's leadership term is not the store's
 * any more (Store.fenced): another process leads now. Nothing of the
 * transaction was committed.
 */
export class FencedError extends Error {
  constructor(
    readonly term: number,
    readonly current: number | undefined,
  ) {
    super(
      `this process's leadership (term ${term}) has ended: term ${current ?? 'none'} leads now; the write was refused`,
    );
    this.name = 'FencedError';
  }
}

/**
 * The store. Outside `transaction` it is read-only, and typed so
 * (ReadRepos): what may be written is written in a transaction
 * (docs/architecture.md §5). Should a caller cast its way past the types, the
 * write still fails, with an INTERNAL AppError (whatever the store's engine
 * would have said).
 */
export interface Store extends ReadRepos {
  /**
   * Reads for one request. Making a view checks, once, whether anything was
   * committed since the last view was made, by this process or any other
   * (the CLI revoking a credential, adding a user to a project), and then
   * sees every such commit: take one per request, before its first read, and
   * do not keep it. Its reads come from a cache where they can, so what they
   * return is frozen and shared between requests: never mutate it. Writes
   * still go through `transaction`, and anything that reads in order to write
   * reads there.
   *
   * Unlike the repositories, a view answers synchronously: it is on the path
   * of every request, where each promise costs (µs, see src/bench/README.md),
   * and SQLite reads are synchronous anyway. A store whose reads need I/O
   * would serve its views from memory, refreshed by its own change signal.
   */
  readView(): ReadView;
  /**
   * Runs `fn` in one transaction: all its writes commit together or not at
   * all. `fn` must only call the store (no other I/O) so transactions stay short.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** The leadership lease of the processes that share this store. */
  leadership: LeadershipRepo;
  /**
   * This store for the leader of `term`: its transactions first read the
   * lease's term, after the write lock, and throw FencedError (rolling back)
   * when it is another, so a deposed leader can write nothing. Reads are
   * the store's own.
   */
  fenced(term: number): Store;
  /**
   * Calls `on` soon after any process queues an operation (the PostgreSQL
   * store: a NOTIFY on commit), so the leader's engine runs it at once;
   * a store only this process writes has no need of it.
   */
  watchQueue?(on: () => void): void;
  /**
   * Whether a current credential that `key` names was committed but is not
   * in the read view yet (another process made it a moment ago, and its
   * notification is still on the way); if so, resolves once the view has
   * it. A store whose views are fresh after any commit (SQLite) has no need
   * of it.
   */
  catchUpCredential?(key: CredentialKey): Promise<boolean>;
  /**
   * What the leader's driver sampled, for every process that shares the
   * store (the PostgreSQL store; engine/shared-usage.ts): a store only this
   * process uses has no need of it.
   */
  usage?: UsageRounds;
  close(): void;
}

/** How a request names its credential: a Bearer key's hash, or a Basic access key. */
export type CredentialKey = { bearerHash: string } | { accessKey: string };

/**
 * One round of the leader's samples: the time it began, the services that
 * exist (series of others are forgotten), each service's and replica set's
 * usage as its driver answers it (Driver.metrics, by `service:<id>` and
 * `replicaSet:<id>`), and each running service's series samples.
 */
export interface UsageRound {
  at: number;
  keep: readonly string[];
  metrics: Readonly<Record<string, Metrics>>;
  series: Readonly<Record<string, readonly SeriesSample[]>>;
}

export interface UsageRounds {
  /** Keeps `round` (a day of rounds is kept) and tells every process; fenced like transactions. */
  publish(round: UsageRound): Promise<void>;
  /**
   * Calls `on` with every kept round, oldest first, then with each round
   * published after, in order (reading again whatever a lost notification
   * may have hidden). Resolves once the kept rounds were read.
   */
  follow(on: (round: UsageRound) => void): Promise<void>;
}
