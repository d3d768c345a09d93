// The nodes a service's HA configuration asks for, with their ports
// (domain/service-nodes.ts plans them; ports are handed out here, one owner
// per node, so they are released with the service).

import { droppedNodes, planNodes, type ServiceNode } from '../domain/service-nodes.js';
import type { HaConfig, Service } from '../domain/types.js';
import type { Tx } from '../store/store.js';
import { type Ctx, allocatePort, portOwner } from './context.js';

/**
 * The service's nodes for `ha`: the primary and the standbys it keeps, new
 * standbys with new ports; the ports of the nodes it drops are released
 * (the driver stops them before anything else can bind there, and
 * allocation skips ports still in use).
 */
export async function nodePlan(
  ctx: Ctx,
  tx: Tx,
  svc: Pick<Service, 'id' | 'port' | 'nodes'>,
  ha: HaConfig,
): Promise<ServiceNode[]> {
  const planned = await planNodes(svc, ha, (index) =>
    allocatePort(ctx, tx, portOwner.serviceNode(svc.id, index)),
  );
  for (const n of droppedNodes(svc, planned)) {
    await tx.ports.release(portOwner.serviceNode(svc.id, n.index));
  }
  if (ha.replicaCount === 0) {
    for (const n of planned) await tx.ports.release(portOwner.serviceNode(svc.id, n.index));
  }
  return planned;
}
