// The resources Basin manages, as the domain sees them. Pure data: no I/O,
// no HTTP shapes (those live in api/schemas and are produced by presenters).

import type { ServiceNode } from './node-records.js';

export const SERVICE_STATUSES = [
  'QUEUED',
  'DELETING',
  'CONFIGURING',
  'READY',
  'DELETED',
  'UNSTABLE',
  'PAUSING',
  'PAUSED',
  'RESUMING',
  'UPGRADING',
  'OPTIMIZING',
] as const;
export type ServiceStatus = (typeof SERVICE_STATUSES)[number];

export const SERVICE_TYPES = ['TIMESERIESDB', 'POSTGRES', 'VECTOR'] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];

export const ENVIRONMENTS = ['DEV', 'PROD'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

export const ADDONS = ['time-series', 'ai'] as const;
export type Addon = (typeof ADDONS)[number];

export const REPLICA_SET_STATUSES = [
  'creating',
  'active',
  'resizing',
  'deleting',
  'error',
] as const;
export type ReplicaSetStatus = (typeof REPLICA_SET_STATUSES)[number];

export const PEERING_STATUSES = ['pending', 'active', 'failed'] as const;
export type PeeringStatus = (typeof PEERING_STATUSES)[number];

export const FORK_STRATEGIES = ['LAST_SNAPSHOT', 'NOW', 'PITR'] as const;
export type ForkStrategy = (typeof FORK_STRATEGIES)[number];

/** A compute allocation from the size catalogue. `shared` sizes have no dedicated CPU or memory. */
export interface Size {
  shared: boolean;
  cpuMillis: number;
  memoryGbs: number;
}

export interface Project {
  id: string;
  name: string;
  createdAt: string;
}

/** A person with access to projects (administered with the `basin` command). */
export interface User {
  id: string;
  name: string;
  /** Shown by GET /v1/auth/info; null for users made without one. */
  email: string | null;
  createdAt: string;
}

/**
 * A credential: a project's (it sees that project) or a user's (it sees the
 * user's projects). Only hashes of its secrets are kept.
 */
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

export interface Vpc {
  id: string;
  projectId: string;
  name: string;
  cidr: string;
  regionCode: string;
  createdAt: string;
  version: number;
}

export interface Peering {
  id: string;
  projectId: string;
  vpcId: string;
  peerAccountId: string;
  peerRegionCode: string;
  peerVpcId: string;
  status: PeeringStatus;
  provisionedId: string | null;
  errorMessage: string | null;
  /**
   * The peer network's blocks, as the network provisioner reported them
   * when it made the link (absent: none known). Admitted to the VPC's
   * services while the peering is active (domain/vpc-network.ts).
   */
  peerCidrs?: string[];
  createdAt: string;
  version: number;
}

export interface Pooler {
  enabled: boolean;
  port: number | null;
}

export interface ForkOrigin {
  serviceId: string;
  projectId: string;
  strategy: ForkStrategy;
  /** RFC 3339; only for PITR. */
  targetTime: string | null;
  /**
   * The parent's backup the fork restores (its label), chosen when the fork
   * was requested; null for NOW (and for forks recorded before backups were).
   */
  backupLabel?: string | null;
}

export interface HaConfig {
  replicaCount: number;
  syncReplicaCount: number;
}

export interface Service {
  id: string;
  projectId: string;
  name: string;
  regionCode: string;
  type: ServiceType;
  /** Whether the AI/vector extensions are wanted (VECTOR services and the `ai` addon). */
  vector: boolean;
  status: ServiceStatus;
  environment: Environment;
  size: Size;
  /** Port of the direct endpoint; allocated when the service is created. */
  port: number;
  pooler: Pooler;
  vpcId: string | null;
  forkedFrom: ForkOrigin | null;
  ha: HaConfig;
  /**
   * The service's nodes (domain/service-nodes.ts): absent for a service
   * recorded before nodes were, which has one, its primary, on `port`.
   */
  nodes?: ServiceNode[];
  /**
   * SCRAM-SHA-256 verifier of the `tsdbadmin` password. Basin never stores the
   * password itself: PostgreSQL accepts a verifier in ALTER ROLE … PASSWORD.
   */
  passwordVerifier: string;
  createdAt: string;
  version: number;
}

export interface ReplicaSet {
  id: string;
  projectId: string;
  serviceId: string;
  name: string;
  nodes: number;
  size: Size;
  status: ReplicaSetStatus;
  environment: Environment;
  port: number;
  /**
   * Each node's own port (the endpoint, `port`, spreads connections over
   * them); absent for sets recorded before nodes had ports.
   */
  nodePorts?: number[];
  pooler: Pooler;
  createdAt: string;
  version: number;
}

export interface Metrics {
  memoryMb: number;
  milliCpu: number;
  storageMb: number;
  /**
   * Where the driver keeps storage allowances (domain/storage.ts): the
   * service's allowance, and its level on the ladder (storageMb is what it
   * holds against it).
   */
  storageAllowanceMb?: number;
  storageLevel?: StorageLevel;
  /**
   * Where services suspend when idle (local driver: idle/), for a service
   * that may: whether it sleeps now, and since when (ISO).
   */
  suspended?: boolean;
  suspendedSince?: string;
}

/** A service's storage level (domain/storage.ts). */
export const STORAGE_LEVELS = ['ok', 'readOnly', 'recovery', 'stopped'] as const;
export type StorageLevel = (typeof STORAGE_LEVELS)[number];

/** What a driver can do; requests for the rest are refused up front with a clear message. */
export interface Capabilities {
  forks: boolean;
  haReplicas: boolean;
  replicaSets: boolean;
  pooler: boolean;
  /** A read replica set's connection pooler. */
  replicaSetPooler: boolean;
}
