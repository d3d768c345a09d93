// What each kind of operation does. Every handler is level-triggered and
// idempotent: it reads where things stand, moves them one step on, and can be
// re-run from the top after a crash at any point. Status moves are the named
// transitions of domain/.

import {
  type OperationKind,
  type ResourceKind,
  replicaSetConverge,
  serviceConverge,
} from '../domain/operations.js';
import { failPeering, settlePeering } from '../domain/peering-transitions.js';
import { markReplicaSetFailed, replicaSetConverged } from '../domain/replica-set-transitions.js';
import { converged, markFailed, startProvisioning } from '../domain/service-transitions.js';
import type { Progress } from '../domain/progress.js';
import type { Peering } from '../domain/types.js';
import { DONE } from '../domain/progress.js';
import type { Driver, ServiceSpec } from '../drivers/driver.js';
import {
  type NodeObservation,
  nodeName,
  observeNodes,
  primaryOf,
} from '../domain/service-nodes.js';
import { failoverIfPrimaryDead } from './failover.js';
import { type Clock, iso } from '../lib/clock.js';
import type { DocRepo, Operation, ReadRepos, Tx } from '../store/store.js';
import { backupHandler, backupQueued, queueBackupIfDue } from './backups.js';
import type { HandlerDeps } from './handler-deps.js';
import { replicaSetSpec, serviceSpec } from './specs.js';

export type { HandlerDeps };

export type Handler<K extends OperationKind> = (
  op: Operation<K>,
  deps: HandlerDeps,
) => Promise<Progress>;

export const HANDLERS: { readonly [K in OperationKind]: Handler<K> } = {
  'service.converge': convergeService,
  'service.delete': deleteService,
  'replicaSet.converge': convergeReplicaSet,
  'replicaSet.delete': deleteReplicaSet,
  'peering.provision': provisionPeering,
  'service.backup': backupHandler,
};

/** Runs the handler of the operation's own kind. */
export function runHandler<K extends OperationKind>(
  op: Operation<K>,
  deps: HandlerDeps,
): Promise<Progress> {
  const handler: Handler<K> = HANDLERS[op.kind];
  return handler(op, deps);
}

/**
 * Applies `transition` to the stored document, in `tx`, when it applies;
 * returns the document as it now is (undefined when it is gone).
 */
async function moveStored<T extends { id: string; version: number }>(
  repo: DocRepo<T>,
  id: string,
  transition: (doc: T) => T | undefined,
): Promise<T | undefined> {
  const current = await repo.get(id);
  if (!current) return undefined;
  const next = transition(current);
  return next ? repo.update(next) : current;
}

/** A service's VPC and that VPC's peerings (whose peer networks it admits too). */
async function loadNetwork(repos: ReadRepos, vpcId: string | null) {
  const vpc = vpcId === null ? undefined : await repos.vpcs.get(vpcId);
  return [vpc, vpc ? await repos.peerings.listByVpc(vpc.id) : []] as const;
}

/** Drives a service to its stored desired state, then settles its status. */
async function convergeService(
  op: Operation<'service.converge'>,
  deps: HandlerDeps,
): Promise<Progress> {
  const { store, driver, clock, backups } = deps;
  let svc = await store.services.get(op.resourceId);
  if (!svc || svc.status === 'DELETING') return DONE; // deletion superseded this work
  if (op.payload.provision) {
    svc = await store.transaction((tx) =>
      moveStored(tx.services, op.resourceId, startProvisioning),
    );
    if (!svc) return DONE;
  }
  const network = await loadNetwork(store, svc.vpcId);
  let spec = serviceSpec(svc, ...network);
  // A dead primary is replaced first (failover.ts); then this converge goes on.
  if (await failoverIfPrimaryDead(deps, svc, spec)) {
    svc = await store.services.get(op.resourceId);
    if (!svc) return DONE;
    spec = serviceSpec(svc, ...network);
  }
  const wasUnstable = svc.status === 'UNSTABLE';
  const progress = await driver.applyService(spec);
  if (!progress.done) return progress;
  const seen = await observe(driver, spec, clock);
  const queued = await backupQueued(store, op.resourceId);
  await store.transaction(async (tx) => {
    if (seen) await moveStored(tx.services, op.resourceId, (s) => observeNodes(s, seen));
    const settled = await moveStored(tx.services, op.resourceId, (s) => converged(s, op.payload));
    if (settled && wasUnstable && settled.status === 'READY' && spec.nodes.length > 1) {
      // The node that acts as the primary where the driver says (Patroni
      // decides across hosts), else the one recorded.
      const primary =
        settled.nodes?.find((n) => n.observed?.actsAs === 'primary') ?? primaryOf(settled);
      await tx.events.add({
        resourceKind: 'service',
        resourceId: settled.id,
        node: null,
        at: clock(),
        severity: 'LOG',
        message: `basin: READY again: ${nodeName(primary.index)} is the primary, the endpoint routes to it, the other nodes follow it`,
      });
    }
    // A service's first backup is taken as soon as it is READY: from then
    // on it can be forked from its backups (engine/backups.ts).
    if (settled) await queueBackupIfDue(tx, settled, backups, clock(), () => queued);
    // Its read replica sets follow what may have changed: its password
    // (their pooler's), its network (their access rules), its size (what
    // their nodes must have at least as high). One already queued is
    // replaced (converges coalesce); a creating or resizing one has its own.
    // One in error too: its pooler may run, and until it has the new
    // verifier, its clients with the old password get the server
    // connections it opened before (PgBouncer checks a client against its
    // own file, and replays to the server only to open a connection).
    if (settled?.status === 'READY') {
      for (const rs of await tx.replicaSets.listByService(settled.id)) {
        if (rs.status === 'active' || rs.status === 'error') {
          await tx.operations.enqueue(replicaSetConverge(rs), clock());
        }
      }
    }
  });
  return DONE;
}

/**
 * What the driver sees of each node of a service with standbys (a single
 * node is not asked: that would cost every create a connection), keyed by
 * index, for observeNodes to record.
 */
export async function observe(
  driver: Driver,
  spec: ServiceSpec,
  clock: Clock,
): Promise<Map<number, NodeObservation> | undefined> {
  if (spec.nodes.length < 2 || !driver.observeService) return undefined;
  const at = iso(clock());
  const seen = await driver.observeService(spec);
  return new Map(seen.map(({ index, ...o }) => [index, { ...o, at }]));
}

/** Tears a service's databases down, then forgets the service, its ports and its events. */
async function deleteService(
  op: Operation<'service.delete'>,
  { store, driver }: HandlerDeps,
): Promise<Progress> {
  const progress = await driver.deleteService(op.resourceId);
  if (!progress.done) return progress;
  await store.transaction(async (tx) => {
    await tx.services.delete(op.resourceId);
    await tx.ports.releasePrefix(`service:${op.resourceId}`);
    await tx.events.deleteForResource('service', op.resourceId);
    await tx.backups.deleteForService(op.resourceId);
  });
  return DONE;
}

async function convergeReplicaSet(
  op: Operation<'replicaSet.converge'>,
  { store, driver }: HandlerDeps,
): Promise<Progress> {
  const rs = await store.replicaSets.get(op.resourceId);
  if (!rs || rs.status === 'deleting') return DONE;
  const primary = await store.services.get(rs.serviceId);
  if (!primary || primary.status === 'DELETING') return DONE;
  const progress = await driver.applyReplicaSet(
    replicaSetSpec(rs, primary, ...(await loadNetwork(store, primary.vpcId))),
  );
  if (!progress.done) return progress;
  await store.transaction((tx) =>
    moveStored(tx.replicaSets, op.resourceId, (r) => replicaSetConverged(r, op.payload)),
  );
  return DONE;
}

async function deleteReplicaSet(
  op: Operation<'replicaSet.delete'>,
  { store, driver }: HandlerDeps,
): Promise<Progress> {
  const progress = await driver.deleteReplicaSet(op.resourceId);
  if (!progress.done) return progress;
  await store.transaction(async (tx) => {
    await tx.replicaSets.delete(op.resourceId);
    await tx.ports.releasePrefix(`replicaSet:${op.resourceId}`);
    await tx.events.deleteForResource('replicaSet', op.resourceId);
  });
  return DONE;
}

async function provisionPeering(
  op: Operation<'peering.provision'>,
  { store, provisioner, clock }: HandlerDeps,
): Promise<Progress> {
  const peering = await store.peerings.get(op.resourceId);
  if (!peering || peering.status !== 'pending') return DONE;
  const vpc = await store.vpcs.get(peering.vpcId);
  if (!vpc) return DONE;
  const result = await provisioner.provision(vpc, peering);
  if (!result.done) return result;
  await store.transaction(async (tx) => {
    const settled = await moveStored(tx.peerings, op.resourceId, (p) => settlePeering(p, result));
    // A peer network now reachable: the VPC's services admit it.
    if (settled?.peerCidrs?.length) await convergeVpcServices(tx, settled, clock());
  });
  return DONE;
}

/**
 * Queues a converge of every service attached to the peering's VPC, so
 * that their access rules follow its peerings (vpc-network.ts). A resting
 * service keeps its status; converges of one service coalesce.
 */
async function convergeVpcServices(
  tx: Tx,
  peering: Pick<Peering, 'projectId' | 'vpcId'>,
  now: number,
): Promise<void> {
  const attached = (await tx.services.listByProject(peering.projectId)).filter(
    (s) => s.vpcId === peering.vpcId && s.status !== 'DELETING',
  );
  for (const svc of attached) await tx.operations.enqueue(serviceConverge(svc), now);
}

/**
 * Marks the resource of a failed operation failed, so a client sees it: a
 * service UNSTABLE, a replica set `error`, a peering `failed` with the reason.
 * Returns whether anything changed (a deleted or paused resource keeps its status).
 */
export async function failResource(
  tx: Tx,
  ref: { resourceKind: ResourceKind | string; resourceId: string },
  reason: string,
): Promise<boolean> {
  switch (ref.resourceKind) {
    case 'service':
      return moved(tx.services, ref.resourceId, markFailed);
    case 'replicaSet':
      return moved(tx.replicaSets, ref.resourceId, markReplicaSetFailed);
    case 'peering':
      return moved(tx.peerings, ref.resourceId, (p) => failPeering(p, reason));
    default:
      return false;
  }
}

/** Applies `transition` when it applies; says whether it did. */
async function moved<T extends { id: string; version: number }>(
  repo: DocRepo<T>,
  id: string,
  transition: (doc: T) => T | undefined,
): Promise<boolean> {
  const current = await repo.get(id);
  const next = current && transition(current);
  if (next) await repo.update(next);
  return next !== undefined;
}
