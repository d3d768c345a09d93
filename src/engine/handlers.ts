// What each kind of operation does. Every handler is level-triggered and
// idempotent: it reads where things stand, moves them one step on, and can be
// re-run from the top after a crash at any point.

import type { ReplicaSetConverge, ServiceConverge } from '../domain/operations.js';
import { ENGINE_MOVES } from '../domain/service-status.js';
import type { ReplicaSet, Service } from '../domain/types.js';
import type { Driver } from '../drivers/driver.js';
import type { Progress } from '../domain/progress.js';
import { DONE } from '../domain/progress.js';
import type { Clock } from '../lib/clock.js';
import type { Operation, Repos, Store } from '../store/store.js';
import type { NetworkProvisioner } from './network-provisioner.js';
import { replicaSetSpec, serviceSpec } from './specs.js';

export interface HandlerDeps {
  store: Store;
  driver: Driver;
  provisioner: NetworkProvisioner;
  clock: Clock;
}

export type Handler = (op: Operation, deps: HandlerDeps) => Promise<Progress>;

export const HANDLERS: Record<string, Handler> = {
  'service.converge': convergeService,
  'service.delete': deleteService,
  'replicaSet.converge': convergeReplicaSet,
  'replicaSet.delete': deleteReplicaSet,
  'peering.provision': provisionPeering,
};

async function loadVpc(repos: Repos, vpcId: string | null) {
  return vpcId === null ? undefined : repos.vpcs.get(vpcId);
}

/** Drives a service to its stored desired state, then settles its status. */
async function convergeService(op: Operation, { store, driver }: HandlerDeps): Promise<Progress> {
  const payload = op.payload as Omit<ServiceConverge, 'kind'>;
  let svc = await store.services.get(op.resourceId);
  if (!svc || svc.status === 'DELETING') return DONE; // deletion superseded this work
  const [queued, configuring] = ENGINE_MOVES.provision;
  if (payload.provision && svc.status === queued) {
    svc = await store.transaction(async (tx) => {
      const s = (await tx.services.get(op.resourceId)) as Service;
      return s.status === queued ? tx.services.update({ ...s, status: configuring }) : s;
    });
  }
  const progress = await driver.applyService(serviceSpec(svc, await loadVpc(store, svc.vpcId)));
  if (!progress.done) return progress;
  if (payload.settle) {
    await store.transaction(async (tx) => {
      const s = await tx.services.get(op.resourceId);
      if (s && s.status === payload.from)
        await tx.services.update({ ...s, status: payload.settle as Service['status'] });
    });
  }
  return DONE;
}

/** Tears a service's databases down, then forgets the service and frees its ports. */
async function deleteService(op: Operation, { store, driver }: HandlerDeps): Promise<Progress> {
  const progress = await driver.deleteService(op.resourceId);
  if (!progress.done) return progress;
  await store.transaction(async (tx) => {
    await tx.services.delete(op.resourceId);
    await tx.ports.releasePrefix(`service:${op.resourceId}`);
  });
  return DONE;
}

async function convergeReplicaSet(
  op: Operation,
  { store, driver }: HandlerDeps,
): Promise<Progress> {
  const payload = op.payload as Omit<ReplicaSetConverge, 'kind'>;
  const rs = await store.replicaSets.get(op.resourceId);
  if (!rs || rs.status === 'deleting') return DONE;
  const primary = await store.services.get(rs.serviceId);
  if (!primary || primary.status === 'DELETING') return DONE;
  const progress = await driver.applyReplicaSet(
    replicaSetSpec(rs, await loadVpc(store, primary.vpcId)),
  );
  if (!progress.done) return progress;
  if (payload.settle) {
    await store.transaction(async (tx) => {
      const r = await tx.replicaSets.get(op.resourceId);
      if (r && r.status === payload.from)
        await tx.replicaSets.update({ ...r, status: payload.settle as ReplicaSet['status'] });
    });
  }
  return DONE;
}

async function deleteReplicaSet(op: Operation, { store, driver }: HandlerDeps): Promise<Progress> {
  const progress = await driver.deleteReplicaSet(op.resourceId);
  if (!progress.done) return progress;
  await store.transaction(async (tx) => {
    await tx.replicaSets.delete(op.resourceId);
    await tx.ports.releasePrefix(`replicaSet:${op.resourceId}`);
  });
  return DONE;
}

async function provisionPeering(
  op: Operation,
  { store, provisioner }: HandlerDeps,
): Promise<Progress> {
  const peering = await store.peerings.get(op.resourceId);
  if (!peering || peering.status !== 'pending') return DONE;
  const vpc = await store.vpcs.get(peering.vpcId);
  if (!vpc) return DONE;
  const result = await provisioner.provision(vpc, peering);
  if (!result.done) return result;
  await store.transaction(async (tx) => {
    const p = await tx.peerings.get(op.resourceId);
    if (p && p.status === 'pending') {
      await tx.peerings.update({
        ...p,
        status: result.status,
        provisionedId: result.provisionedId,
        errorMessage: result.errorMessage,
      });
    }
  });
  return DONE;
}

/** What a permanently failed operation leaves behind, so a client can see it failed. */
export async function markFailed(op: Operation, store: Store): Promise<void> {
  await store.transaction(async (tx) => {
    if (op.kind === 'service.converge') {
      const s = await tx.services.get(op.resourceId);
      if (s && s.status !== 'DELETING' && s.status !== 'PAUSED')
        await tx.services.update({ ...s, status: 'UNSTABLE' });
    } else if (op.kind === 'replicaSet.converge') {
      const r = await tx.replicaSets.get(op.resourceId);
      if (r && r.status !== 'deleting') await tx.replicaSets.update({ ...r, status: 'error' });
    } else if (op.kind === 'peering.provision') {
      const p = await tx.peerings.get(op.resourceId);
      if (p && p.status === 'pending') {
        await tx.peerings.update({
          ...p,
          status: 'failed',
          errorMessage: op.lastError ?? 'provisioning failed',
        });
      }
    }
  });
}
