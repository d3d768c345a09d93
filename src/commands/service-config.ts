// Changes to a service's configuration: size, HA, VPC, pooler, password,
// environment tag and name. Each writes the new desired state and, where the databases
// must change, queues a converge operation in the same transaction.

import { conflict, invalid } from '../domain/errors.js';
import { serviceConverge } from '../domain/operations.js';
import { applyServiceAction, type ServiceAction } from '../domain/service-status.js';
import { checkHa, checkName, checkPassword } from '../domain/service-rules.js';
import { pickSize } from '../domain/sizes.js';
import type { Environment, Service } from '../domain/types.js';
import { scramVerifier } from '../lib/secrets.js';
import type { Tx } from '../store/store.js';
import {
  type Ctx,
  type Principal,
  allocatePort,
  portOwner,
  requireCapability,
  requireHostRoom,
} from './context.js';
import { loadService } from './service-lookup.js';
import { nodePlan } from './service-nodes.js';
import { getVpc } from './vpcs.js';

/** The configuration fields a command changes (never the status: that is the action's move). */
type Change = (
  svc: Service,
  tx: Tx,
) => Promise<Partial<Omit<Service, 'status'>>> | Partial<Omit<Service, 'status'>>;

/**
 * The shared shape of every configuration command: load, check the state
 * rule, apply `change`, and queue a converge unless `converge` is false.
 */
async function configure(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  action: ServiceAction,
  change: Change,
  converge = true,
): Promise<Service> {
  const svc = await ctx.store.transaction(async (tx) => {
    const current = await loadService(tx, p, projectId, serviceId);
    const moved = applyServiceAction(current, action);
    const next = await tx.services.update({ ...moved, ...(await change(current, tx)) });
    if (converge) await tx.operations.enqueue(serviceConverge(next), ctx.clock());
    return next;
  });
  if (converge) ctx.kick();
  return svc;
}

export async function resizeService(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  body: { cpu_millis: string; memory_gbs: string },
) {
  const size = pickSize(
    ctx.settings.sizes,
    { cpu: body.cpu_millis, memory: body.memory_gbs },
    false,
  );
  if (!size) throw invalid('cpu_millis and memory_gbs are required.');
  // Its host must hold the new size (a 404 for a service it cannot see first).
  await loadService(ctx.store, p, projectId, serviceId);
  await requireHostRoom(ctx, size, `resize service ${serviceId}`, serviceId);
  return configure(ctx, p, projectId, serviceId, 'resize', (svc) => {
    if (
      svc.size.cpuMillis === size.cpuMillis &&
      svc.size.memoryGbs === size.memoryGbs &&
      !svc.size.shared
    ) {
      throw conflict(
        `Service ${svc.id} already has ${size.cpuMillis}m CPU and ${size.memoryGbs} GB memory.`,
      );
    }
    return { size };
  });
}

export function setHA(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  body: { replica_count?: number; sync_replica_count?: number },
) {
  if (body.replica_count === undefined && body.sync_replica_count === undefined) {
    throw invalid('Give replica_count, sync_replica_count or both.');
  }
  if ((body.replica_count ?? 0) > 0) requireCapability(ctx, 'haReplicas', 'HA replicas');
  return configure(ctx, p, projectId, serviceId, 'setHA', async (svc, tx) => {
    const ha = checkHa(
      { replicaCount: body.replica_count, syncReplicaCount: body.sync_replica_count },
      svc.ha,
    );
    if (
      ha.replicaCount === svc.ha.replicaCount &&
      ha.syncReplicaCount === svc.ha.syncReplicaCount
    ) {
      throw conflict(
        `Service ${svc.id} already has ${ha.replicaCount} HA replica(s), ${ha.syncReplicaCount} synchronous.`,
      );
    }
    const refused = ctx.driver.haChangeRefusal?.(svc.ha.replicaCount, ha.replicaCount);
    if (refused !== undefined) throw invalid(refused);
    if (ha.replicaCount > svc.ha.replicaCount) {
      await requireHostRoom(ctx, svc.size, `add replicas to ${svc.id}`, svc.id, 1 + ha.replicaCount); // prettier-ignore
    }
    return { ha, nodes: await nodePlan(ctx, tx, svc, ha) };
  });
}

/** A service joins at most one VPC, of its own project and region. */
export function attachToVpc(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  vpcId: string,
) {
  return configure(ctx, p, projectId, serviceId, 'reconfigure', async (svc, tx) => {
    const vpc = await getVpc({ store: tx }, p, projectId, vpcId);
    if (svc.vpcId === vpc.id)
      throw conflict(`Service ${svc.id} is already attached to VPC ${vpc.id}.`);
    if (svc.vpcId !== null) {
      throw conflict(
        `Service ${svc.id} is attached to VPC ${svc.vpcId}; detach it first (a service is in at most one VPC).`,
      );
    }
    if (vpc.regionCode !== svc.regionCode) {
      throw conflict(
        `VPC ${vpc.id} is in ${vpc.regionCode} but service ${svc.id} is in ${svc.regionCode}; a service joins a VPC of its own region.`,
      );
    }
    return { vpcId: vpc.id };
  });
}

export function detachFromVpc(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  vpcId: string,
) {
  return configure(ctx, p, projectId, serviceId, 'reconfigure', async (svc, tx) => {
    const vpc = await getVpc({ store: tx }, p, projectId, vpcId);
    if (svc.vpcId !== vpc.id) throw conflict(`Service ${svc.id} is not attached to VPC ${vpc.id}.`);
    return { vpcId: null };
  });
}

export function setPooler(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  enabled: boolean,
) {
  if (enabled) requireCapability(ctx, 'pooler', 'the connection pooler');
  return configure(ctx, p, projectId, serviceId, 'reconfigure', async (svc, tx) => {
    if (svc.pooler.enabled === enabled) {
      throw conflict(
        `The connection pooler of service ${svc.id} is already ${enabled ? 'enabled' : 'disabled'}.`,
      );
    }
    // A disabled pooler keeps its port until the service is deleted: PgBouncer
    // may still be listening until the engine converges, and a re-enabled
    // pooler comes back where clients expect it.
    if (!enabled) return { pooler: { enabled: false, port: svc.pooler.port } };
    const port = await allocatePort(ctx, tx, portOwner.servicePooler(svc.id));
    return { pooler: { enabled: true, port } };
  });
}

/** Only the SCRAM verifier is kept; the password itself goes no further than this function. */
export async function updatePassword(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  password: string,
) {
  checkPassword(password);
  const passwordVerifier = scramVerifier(password);
  await configure(ctx, p, projectId, serviceId, 'configure', () => ({ passwordVerifier }));
}

export async function setServiceEnvironment(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  environment: Environment,
) {
  await configure(ctx, p, projectId, serviceId, 'configure', () => ({ environment }), false);
}

/** A new name: nothing runs differently, so no operation is queued. */
export function renameService(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  name: string,
): Promise<Service> {
  const checked = checkName('name', name);
  return configure(ctx, p, projectId, serviceId, 'configure', () => ({ name: checked }), false);
}
