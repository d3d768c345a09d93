// Domain records → API bodies. The field names here are the spec's, exactly.

import type { Static } from '@sinclair/typebox';
import type { AuthInfo } from '../commands/auth-info.js';
import { replicaSetAsServiceStatus } from '../domain/replica-set-status.js';
import {
  answeredType,
  DEFAULT_SERVICE_TYPE_NAME,
  type ServiceTypeName,
} from '../domain/service-type-names.js';
import type {
  Metrics,
  Peering,
  Project,
  ReplicaSet,
  Service,
  ServiceType,
  Size,
  StorageLevel,
  Vpc,
} from '../domain/types.js';
import type { AuthInfo as AuthInfoBody } from './schemas/auth.js';
import type { Project as ProjectBody } from './schemas/common.js';
import type { ReadReplicaSet, Service as ServiceBody } from './schemas/service.js';
import type { Peering as PeeringBody, Vpc as VpcBody } from './schemas/vpc.js';

export interface PresentOptions {
  publicHost: string;
  /**
   * Endpoints report each service's (or read replica set's) own name,
   * `<id>.<publicHost>` (--service-hostnames: the installation has wildcard
   * DNS for it; its certificate names it), instead of the public host.
   */
  serviceHostnames?: boolean;
  volumeType: string;
  /** How answers name the time-series type (--service-type-name); the spec's when absent. */
  serviceTypeName?: ServiceTypeName;
  metrics?: Metrics | undefined;
  /**
   * Where a service's clients connect when it runs on a host of its own
   * (the hosts driver: its host's address); the public host otherwise.
   */
  endpointHost?: (resourceId: string) => string | undefined;
}

export const presentProject = (p: Project): Static<typeof ProjectBody> => ({
  id: p.id,
  name: p.name,
});

/** Plan types are the vendor's; a self-hosted Basin has none. */
const PLAN_TYPE = 'SELF_HOSTED';

export function presentAuthInfo(info: AuthInfo): Static<typeof AuthInfoBody> {
  if (info.type === 'oauth') return { type: 'oauth', oauth: { user: { ...info.user } } };
  const apiKey = {
    public_key: info.credential.accessKey,
    name: info.credential.name,
    created: info.credential.createdAt,
    project: { id: info.project.id, name: info.project.name, plan_type: PLAN_TYPE },
    issuing_user: { ...info.issuer },
  };
  // Both spellings, the current one and the deprecated one older clients read.
  return { type: 'apiKey', api_key: apiKey, apiKey };
}

export const presentVpc = (v: Vpc): Static<typeof VpcBody> => ({
  id: v.id,
  cidr: v.cidr,
  name: v.name,
  region_code: v.regionCode,
});

export function presentPeering(p: Peering): Static<typeof PeeringBody> {
  return {
    id: p.id,
    peer_account_id: p.peerAccountId,
    peer_region_code: p.peerRegionCode,
    peer_vpc_id: p.peerVpcId,
    status: p.status,
    ...(p.provisionedId ? { provisioned_id: p.provisionedId } : {}),
    ...(p.errorMessage ? { error_message: p.errorMessage } : {}),
  };
}

const endpoint = (o: PresentOptions, id: string, port: number) => ({
  host: o.endpointHost?.(id) ?? (o.serviceHostnames ? `${id}.${o.publicHost}` : o.publicHost),
  port,
});

export function presentReplicaSet(
  rs: ReplicaSet,
  o: PresentOptions,
): Static<typeof ReadReplicaSet> {
  return {
    id: rs.id,
    name: rs.name,
    nodes: rs.nodes,
    cpu_millis: rs.size.cpuMillis,
    memory_gbs: rs.size.memoryGbs,
    endpoint: endpoint(o, rs.id, rs.port),
    ...(rs.pooler.enabled && rs.pooler.port !== null
      ? { connection_pooler: { endpoint: endpoint(o, rs.id, rs.pooler.port) } }
      : {}),
    metadata: { environment: rs.environment },
    status: rs.status,
  };
}

// Clients read metrics as integers (a Go client's `int` rejects 30.1, failing
// the whole response): whole megabytes and millicores. The storage
// allowance is a field beside the spec's (docs/decisions.md, Storage
// allowances): clients that do not know it pass it by.
const metricsBody = (m: Metrics | undefined) =>
  m
    ? {
        metrics: {
          memory_mb: Math.round(m.memoryMb),
          milli_cpu: Math.round(m.milliCpu),
          storage_mb: Math.round(m.storageMb),
        },
        ...(m.storageLevel !== undefined && m.storageAllowanceMb !== undefined
          ? {
              storage: {
                allowance_mb: Math.round(m.storageAllowanceMb),
                state: STORAGE_STATE[m.storageLevel],
              },
            }
          : {}),
        ...(m.suspended !== undefined
          ? {
              idle: {
                state: m.suspended ? ('suspended' as const) : ('awake' as const),
                ...(m.suspendedSince ? { since: m.suspendedSince } : {}),
              },
            }
          : {}),
      }
    : {};

/** A storage level as the API spells it. */
const STORAGE_STATE = {
  ok: 'ok',
  readOnly: 'read_only',
  recovery: 'recovery',
  stopped: 'stopped',
} as const satisfies Record<StorageLevel, string>;

/**
 * A resource's spec. A shared size has no dedicated allocation: clients show
 * a missing value as "shared", where 0 would read as "0 cores".
 */
const resourceSpec = (size: Size, o: PresentOptions) =>
  size.shared
    ? { volume_type: o.volumeType }
    : { cpu_millis: size.cpuMillis, memory_gbs: size.memoryGbs, volume_type: o.volumeType };

// The body's type is the spec's enum; under TIMESCALEDB the schema Basin
// registers and serves carries that name instead (schemas/service.ts).
const typeOf = (svc: Service, o: PresentOptions) =>
  answeredType(svc.type, o.serviceTypeName ?? DEFAULT_SERVICE_TYPE_NAME) as ServiceType;

const vpcEndpoints = (e: { host: string; port: number; vpc_id: string }) => ({
  vpc_endpoint: e,
  vpcEndpoint: e,
});

export function presentService(
  svc: Service,
  replicaSets: readonly ReplicaSet[],
  o: PresentOptions,
  initialPassword?: string,
): Static<typeof ServiceBody> {
  return {
    service_id: svc.id,
    project_id: svc.projectId,
    name: svc.name,
    region_code: svc.regionCode,
    service_type: typeOf(svc, o),
    status: svc.status,
    created: svc.createdAt,
    endpoint: endpoint(o, svc.id, svc.port),
    ...(svc.pooler.enabled && svc.pooler.port !== null
      ? { connection_pooler: { endpoint: endpoint(o, svc.id, svc.pooler.port) } }
      : {}),
    // Both spellings, the spec's and the one newer clients read, same value.
    ...(svc.vpcId ? vpcEndpoints({ ...endpoint(o, svc.id, svc.port), vpc_id: svc.vpcId }) : {}),
    ...(svc.forkedFrom
      ? {
          forked_from: {
            is_standby: false,
            project_id: svc.forkedFrom.projectId,
            service_id: svc.forkedFrom.serviceId,
          },
        }
      : {}),
    ha_replicas: {
      replica_count: svc.ha.replicaCount,
      sync_replica_count: svc.ha.syncReplicaCount,
    },
    ...(initialPassword !== undefined ? { initial_password: initialPassword } : {}),
    metadata: { environment: svc.environment },
    ...metricsBody(o.metrics),
    resources: [{ id: svc.id, spec: resourceSpec(svc.size, o) }],
    read_replica_sets: replicaSets.map((rs) => presentReplicaSet(rs, o)),
  };
}

/**
 * A read replica set seen through `GET /services/{id}`: a standby of its
 * primary, so that clients that connect by service id can reach replicas.
 */
export function presentReplicaSetAsService(
  rs: ReplicaSet,
  primary: Service,
  o: PresentOptions,
): Static<typeof ServiceBody> {
  return {
    service_id: rs.id,
    project_id: rs.projectId,
    name: rs.name,
    region_code: primary.regionCode,
    service_type: typeOf(primary, o),
    status: replicaSetAsServiceStatus(rs.status),
    created: rs.createdAt,
    endpoint: endpoint(o, rs.id, rs.port),
    ...(rs.pooler.enabled && rs.pooler.port !== null
      ? { connection_pooler: { endpoint: endpoint(o, rs.id, rs.pooler.port) } }
      : {}),
    forked_from: { is_standby: true, project_id: primary.projectId, service_id: primary.id },
    ha_replicas: { replica_count: rs.nodes - 1, sync_replica_count: 0 },
    metadata: { environment: rs.environment },
    ...metricsBody(o.metrics),
    resources: [{ id: rs.id, spec: resourceSpec(rs.size, o) }],
    read_replica_sets: [],
  };
}
