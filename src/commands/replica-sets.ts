// Read replica sets: streaming standbys of a service, reached through their
// own endpoint. Same pattern as services: desired state + operation, then 202.

import { AppError, conflict, invalid } from '../domain/errors.js';
import { replicaSetConverge, replicaSetDelete, serviceConverge } from '../domain/operations.js';
import {
  applyReplicaSetAction,
  NEW_REPLICA_SET_STATUS,
  type ReplicaSetAction,
} from '../domain/replica-set-status.js';
import { serviceMove } from '../domain/service-status.js';
import { checkName } from '../domain/service-rules.js';
import { pickSize } from '../domain/sizes.js';
import type { Environment, ReplicaSet, Size } from '../domain/types.js';
import { iso } from '../lib/clock.js';
import { resourceId } from '../lib/ids.js';
import type { Tx } from '../store/store.js';
import {
  type Ctx,
  type Principal,
  allocatePort,
  portOwner,
  requireCapability,
  requireDiskRoom,
} from './context.js';
import { loadReplicaSet, loadService } from './service-lookup.js';

export const MAX_REPLICA_NODES = 10;

export async function listReplicaSets(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
) {
  const svc = await loadService(ctx.store, p, projectId, serviceId);
  return ctx.store.replicaSets.listByService(svc.id);
}

export async function createReplicaSet(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  body: { name: string; nodes: number; cpu_millis: number; memory_gbs: number },
): Promise<ReplicaSet> {
  requireCapability(ctx, 'replicaSets', 'read replica sets');
  requireDiskRoom(ctx, 'read replica sets');
  const name = checkName('name', body.name);
  if (!Number.isInteger(body.nodes) || body.nodes < 1 || body.nodes > MAX_REPLICA_NODES) {
    throw invalid(
      `nodes must be a whole number from 1 to ${MAX_REPLICA_NODES}; got ${body.nodes}.`,
    );
  }
  const size = pickSize(
    ctx.settings.sizes,
    { cpu: body.cpu_millis, memory: body.memory_gbs },
    false,
  );
  if (!size) throw invalid('cpu_millis and memory_gbs are required.');
  // Where nodes go to hosts (the hosts driver): refused before anything is
  // queued, once the service is known to be the caller's.
  if (ctx.driver.replicaSetRefusal) {
    const svc = await loadService(ctx.store, p, projectId, serviceId);
    await refuseWithoutRoom(ctx, 'place', svc.id, size, body.nodes);
  }
  const id = resourceId();
  const now = ctx.clock();
  const rs = await ctx.store.transaction(async (tx) => {
    const svc = await loadService(tx, p, projectId, serviceId);
    serviceMove(svc.id, svc.status, 'addReplicaSet');
    const port = await allocatePort(ctx, tx, portOwner.replicaSet(id));
    const nodePorts: number[] = [];
    for (let i = 0; i < body.nodes; i++) {
      nodePorts.push(await allocatePort(ctx, tx, portOwner.replicaSetNode(id, i)));
    }
    const created: ReplicaSet = {
      id,
      projectId,
      serviceId: svc.id,
      name,
      nodes: body.nodes,
      size,
      status: NEW_REPLICA_SET_STATUS,
      environment: svc.environment,
      port,
      nodePorts,
      pooler: { enabled: false, port: null },
      createdAt: iso(now),
      version: 1,
    };
    await tx.replicaSets.insert(created);
    await tx.operations.enqueue(replicaSetConverge(created), now);
    // The service's primary admits its standbys' replication from then on
    // (a service converged before replica sets existed had no such rule).
    await tx.operations.enqueue(serviceConverge(svc), now);
    return created;
  });
  ctx.kick();
  return rs;
}

/** The configuration fields a command changes (never the status: that is the action's move). */
type Change = (
  rs: ReplicaSet,
  tx: Tx,
) => Promise<Partial<Omit<ReplicaSet, 'status'>>> | Partial<Omit<ReplicaSet, 'status'>>;

async function configureReplicaSet(
  ctx: Ctx,
  p: Principal,
  ids: { projectId: string; serviceId: string; replicaSetId: string },
  action: ReplicaSetAction,
  change: Change,
  converge = true,
): Promise<ReplicaSet> {
  const rs = await ctx.store.transaction(async (tx) => {
    const { replicaSet } = await loadReplicaSet(
      tx,
      p,
      ids.projectId,
      ids.serviceId,
      ids.replicaSetId,
    );
    const moved = applyReplicaSetAction(replicaSet, action);
    const next = await tx.replicaSets.update({ ...moved, ...(await change(replicaSet, tx)) });
    if (converge) await tx.operations.enqueue(replicaSetConverge(next), ctx.clock());
    return next;
  });
  if (converge) ctx.kick();
  return rs;
}

/**
 * The driver's refusal of a set's nodes where they would run (the hosts
 * driver: no host with room), as a 400 or a 503; nothing without one.
 */
async function refuseWithoutRoom(
  ctx: Ctx,
  verb: 'place' | 'resize',
  serviceId: string,
  size: Size,
  nodes: number,
  replicaSetId?: string,
): Promise<void> {
  const refused = await ctx.driver.replicaSetRefusal?.(serviceId, size, nodes, replicaSetId);
  if (refused?.invalid) throw invalid(refused.invalid);
  if (refused?.unavailable) {
    throw new AppError(
      'UNAVAILABLE',
      `Basin cannot ${verb} the read replica set now: ${refused.unavailable}`,
    );
  }
}

type Ids = { projectId: string; serviceId: string; replicaSetId: string };

export async function resizeReplicaSet(
  ctx: Ctx,
  p: Principal,
  ids: Ids,
  body: { cpu_millis: string; memory_gbs: string },
) {
  const size = pickSize(
    ctx.settings.sizes,
    { cpu: body.cpu_millis, memory: body.memory_gbs },
    false,
  );
  if (!size) throw invalid('cpu_millis and memory_gbs are required.');
  // Room where its nodes run (the hosts driver): refused before anything
  // is queued or changed, once the set is known to be the caller's.
  if (ctx.driver.replicaSetRefusal) {
    const { replicaSet } = await loadReplicaSet(
      ctx.store,
      p,
      ids.projectId,
      ids.serviceId,
      ids.replicaSetId,
    );
    await refuseWithoutRoom(
      ctx,
      'resize',
      replicaSet.serviceId,
      size,
      replicaSet.nodes,
      replicaSet.id,
    );
  }
  return configureReplicaSet(ctx, p, ids, 'resize', (rs) => {
    if (rs.size.cpuMillis === size.cpuMillis && rs.size.memoryGbs === size.memoryGbs) {
      throw conflict(
        `Read replica set ${rs.id} already has ${size.cpuMillis}m CPU and ${size.memoryGbs} GB memory.`,
      );
    }
    return { size };
  });
}

export function setReplicaSetPooler(ctx: Ctx, p: Principal, ids: Ids, enabled: boolean) {
  if (enabled)
    requireCapability(ctx, 'replicaSetPooler', 'the connection pooler of a read replica set');
  return configureReplicaSet(ctx, p, ids, 'configure', async (rs, tx) => {
    if (rs.pooler.enabled === enabled) {
      throw conflict(
        `The connection pooler of read replica set ${rs.id} is already ${enabled ? 'enabled' : 'disabled'}.`,
      );
    }
    // As for services, the pooler keeps its port until the replica set is deleted.
    if (!enabled) return { pooler: { enabled: false, port: rs.pooler.port } };
    const port = await allocatePort(ctx, tx, portOwner.replicaSetPooler(rs.id));
    return { pooler: { enabled: true, port } };
  });
}

export function setReplicaSetEnvironment(
  ctx: Ctx,
  p: Principal,
  ids: Ids,
  environment: Environment,
) {
  return configureReplicaSet(ctx, p, ids, 'configure', () => ({ environment }), false);
}

export async function deleteReplicaSet(ctx: Ctx, p: Principal, ids: Ids): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const { replicaSet } = await loadReplicaSet(
      tx,
      p,
      ids.projectId,
      ids.serviceId,
      ids.replicaSetId,
    );
    const deleting = await tx.replicaSets.update(applyReplicaSetAction(replicaSet, 'delete'));
    const now = ctx.clock();
    await tx.operations.cancelForResource('replicaSet', replicaSet.id, now);
    await tx.operations.enqueue(replicaSetDelete(deleting), now);
  });
  ctx.kick();
}
