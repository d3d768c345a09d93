// Repository interfaces. Commands and the engine depend on these, never on
// SQLite: a PostgreSQL store can implement the same interfaces later (the
// methods are async for that reason). Writes that belong together go through
// `transaction`, which hands the callback a Tx with the same repositories.

import type { Peering, Project, ReplicaSet, Service, Vpc } from '../domain/types.js';

export interface ProjectRepo {
  get(id: string): Promise<Project | undefined>;
  list(ids?: readonly string[]): Promise<Project[]>;
  insert(p: Project): Promise<void>;
  count(): Promise<number>;
}

export interface User {
  id: string;
  name: string;
  createdAt: string;
}

export interface UserRepo {
  get(id: string): Promise<User | undefined>;
  findByName(name: string): Promise<User | undefined>;
  list(): Promise<User[]>;
  insert(u: User): Promise<void>;
  addToProject(userId: string, projectId: string): Promise<void>;
  projectIds(userId: string): Promise<string[]>;
}

export interface Credential {
  id: string;
  /** A project credential sees one project; a user credential, its user's projects. */
  kind: 'project' | 'user';
  projectId: string | null;
  userId: string | null;
  name: string;
  /** SHA-256 (hex) of the bearer key. */
  bearerHash: string;
  /** The public half of the Basic pair, stored as is. */
  accessKey: string;
  /** SHA-256 (hex) of the secret key. */
  secretHash: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface CredentialRepo {
  findByBearerHash(hash: string): Promise<Credential | undefined>;
  findByAccessKey(accessKey: string): Promise<Credential | undefined>;
  insert(c: Credential): Promise<void>;
  revoke(id: string, at: string): Promise<boolean>;
  list(): Promise<Credential[]>;
}

/**
 * Versioned documents: `update` succeeds only when the stored version is the
 * one the caller read (optimistic lock) and bumps it; otherwise it throws a
 * CONFLICT, so two writers can never silently overwrite each other.
 */
export interface DocRepo<T extends { id: string; version: number }> {
  get(id: string): Promise<T | undefined>;
  insert(doc: T): Promise<void>;
  update(doc: T): Promise<T>;
  delete(id: string): Promise<void>;
}

export interface VpcRepo extends DocRepo<Vpc> {
  listByProject(projectId: string): Promise<Vpc[]>;
}

export interface PeeringRepo extends DocRepo<Peering> {
  listByVpc(vpcId: string): Promise<Peering[]>;
}

export interface ServiceRepo extends DocRepo<Service> {
  listByProject(projectId: string): Promise<Service[]>;
  listAll(): Promise<Service[]>;
  countByVpc(vpcId: string): Promise<number>;
}

export interface ReplicaSetRepo extends DocRepo<ReplicaSet> {
  listByService(serviceId: string): Promise<ReplicaSet[]>;
  listAll(): Promise<ReplicaSet[]>;
}

export type OperationState = 'pending' | 'done' | 'failed' | 'cancelled';
export type ResourceKind = 'service' | 'replicaSet' | 'peering';

export interface Operation {
  id: number;
  kind: string;
  resourceKind: ResourceKind;
  resourceId: string;
  state: OperationState;
  payload: Record<string, unknown>;
  attempts: number;
  lastError: string | null;
  /** Epoch ms before which the operation is not run. */
  runAfter: number;
  lockedBy: string | null;
  leaseExpiresAt: number | null;
  createdAt: string;
  updatedAt: string;
}

export interface NewOperation {
  kind: string;
  resourceKind: ResourceKind;
  resourceId: string;
  payload?: Record<string, unknown>;
}

export interface OperationRepo {
  enqueue(op: NewOperation, now: number): Promise<Operation>;
  /**
   * Claims up to `limit` runnable operations for `worker`: pending, due, not
   * leased by a live worker, and the oldest of their resource (a resource's
   * operations run one at a time, in order).
   */
  claim(worker: string, now: number, leaseMs: number, limit: number): Promise<Operation[]>;
  /** Puts a claimed operation back to run again after `runAfter`. */
  release(id: number, runAfter: number, error: string | null, attempts: number): Promise<void>;
  finish(
    id: number,
    state: Exclude<OperationState, 'pending'>,
    error: string | null,
  ): Promise<void>;
  /** Cancels the pending operations of a resource, except `keep`. */
  cancelForResource(kind: ResourceKind, resourceId: string, keep?: number): Promise<void>;
  /**
   * Drops every lease. Only for a single-process store at start-up, when any
   * lease left in the table belongs to a process that died.
   */
  resetLeases(): Promise<void>;
  get(id: number): Promise<Operation | undefined>;
  listPending(): Promise<Operation[]>;
  /** The earliest `runAfter` of pending operations, to know when to wake. */
  nextDue(): Promise<number | undefined>;
}

/** TCP ports handed out to services, pollers and nodes, so no two collide. */
export interface PortRepo {
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
  get(owner: string): Promise<number | undefined>;
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

export interface Repos {
  projects: ProjectRepo;
  users: UserRepo;
  credentials: CredentialRepo;
  vpcs: VpcRepo;
  peerings: PeeringRepo;
  services: ServiceRepo;
  replicaSets: ReplicaSetRepo;
  operations: OperationRepo;
  ports: PortRepo;
  counters: CounterRepo;
}

export type Tx = Repos;

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

export interface Store extends Repos {
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
  close(): void;
}
