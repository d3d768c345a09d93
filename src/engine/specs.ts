// Pure builders: the driver's view of a resource, derived from stored state.
// Nothing here is stored, so there is nothing to get out of step.

import { nodesOf } from '../domain/service-nodes.js';
import { shouldRun } from '../domain/service-status.js';
import type { Peering, ReplicaSet, Service, Vpc } from '../domain/types.js';
import { vpcNetwork } from '../domain/vpc-network.js';
import type { ReplicaSetSpec, ServiceSpec } from '../drivers/driver.js';

/** `peerings` are the VPC's: their peer networks are admitted with it (vpc-network.ts). */
export function serviceSpec(
  svc: Service,
  vpc: Vpc | undefined,
  peerings: readonly Peering[] = [],
): ServiceSpec {
  return {
    serviceId: svc.id,
    projectId: svc.projectId,
    type: svc.type,
    vector: svc.vector,
    size: svc.size,
    environment: svc.environment,
    running: shouldRun(svc.status),
    port: svc.port,
    passwordVerifier: svc.passwordVerifier,
    pooler: svc.pooler,
    allowedCidrs: vpc ? vpcNetwork(vpc, peerings) : [],
    ha: svc.ha,
    nodes: nodesOf(svc).map((n) => ({ index: n.index, role: n.role, port: n.port })),
    source: svc.forkedFrom
      ? {
          kind: 'fork',
          parentServiceId: svc.forkedFrom.serviceId,
          strategy: svc.forkedFrom.strategy,
          targetTime: svc.forkedFrom.targetTime,
          backupLabel: svc.forkedFrom.backupLabel ?? null,
        }
      : { kind: 'empty' },
    createdAt: svc.createdAt,
    resuming: svc.status === 'RESUMING',
  };
}

export function replicaSetSpec(
  rs: ReplicaSet,
  primary: Service,
  vpc: Vpc | undefined,
  peerings: readonly Peering[] = [],
): ReplicaSetSpec {
  return {
    replicaSetId: rs.id,
    serviceId: rs.serviceId,
    primary: serviceSpec(primary, vpc, peerings),
    nodePorts: rs.nodePorts ?? [],
    projectId: rs.projectId,
    nodes: rs.nodes,
    size: rs.size,
    environment: rs.environment,
    port: rs.port,
    pooler: rs.pooler,
    allowedCidrs: vpc ? vpcNetwork(vpc, peerings) : [],
  };
}
