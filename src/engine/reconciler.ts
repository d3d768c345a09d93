// Level-triggered repair: compares what the store says should be with what the
// driver sees, and queues the work that closes the gap. Runs at start-up and
// then periodically. It only ever queues operations; the handlers act.

import type { ServiceConverge } from '../domain/operations.js';
import { ENGINE_MOVES } from '../domain/service-status.js';
import type { Service } from '../domain/types.js';
import type { NewOperation } from '../store/store.js';
import type { HandlerDeps } from './handlers.js';
import { replicaSetSpec, serviceSpec } from './specs.js';

/** The operation that settles a service sitting in a transitional status. */
function settlingOperation(svc: Service): NewOperation | undefined {
  const converge = (payload: Omit<ServiceConverge, 'kind'>): NewOperation => ({
    kind: 'service.converge',
    resourceKind: 'service',
    resourceId: svc.id,
    payload,
  });
  switch (svc.status) {
    case 'QUEUED':
      return converge({ provision: true, from: 'CONFIGURING', settle: 'READY' });
    case 'CONFIGURING':
    case 'UNSTABLE':
    case 'RESUMING':
      return converge({ from: svc.status, settle: 'READY' });
    case 'PAUSING':
      return converge({ from: 'PAUSING', settle: 'PAUSED' });
    case 'DELETING':
      return { kind: 'service.delete', resourceKind: 'service', resourceId: svc.id };
    default:
      return undefined;
  }
}

/** Returns how many operations it queued. */
export async function reconcile({ store, driver, clock }: HandlerDeps): Promise<number> {
  const pending = new Set(
    (await store.operations.listPending()).map((o) => `${o.resourceKind}:${o.resourceId}`),
  );
  let queued = 0;
  const enqueue = async (op: NewOperation, mutate?: (svc: Service) => Service) => {
    await store.transaction(async (tx) => {
      if (mutate) {
        const current = await tx.services.get(op.resourceId);
        if (!current) return;
        await tx.services.update(mutate(current));
      }
      await tx.operations.enqueue(op, clock());
    });
    queued++;
  };

  const [ready, unstable] = ENGINE_MOVES.markUnstable;
  for (const svc of await store.services.listAll()) {
    if (pending.has(`service:${svc.id}`)) continue;
    const settle = settlingOperation(svc);
    if (settle) {
      await enqueue(settle);
      continue;
    }
    const vpc = svc.vpcId ? await store.vpcs.get(svc.vpcId) : undefined;
    const health = await driver.inspectService(serviceSpec(svc, vpc));
    if (svc.status === ready && health !== 'running') {
      // A database that should run does not: say so, and bring it back.
      await enqueue(
        {
          kind: 'service.converge',
          resourceKind: 'service',
          resourceId: svc.id,
          payload: { from: unstable, settle: ENGINE_MOVES.recover[1] },
        },
        (s) => (s.status === ready ? { ...s, status: unstable } : s),
      );
    } else if (svc.status === 'PAUSED' && health === 'running') {
      await enqueue({
        kind: 'service.converge',
        resourceKind: 'service',
        resourceId: svc.id,
        payload: {},
      });
    }
  }

  for (const rs of await store.replicaSets.listAll()) {
    if (pending.has(`replicaSet:${rs.id}`)) continue;
    if (rs.status === 'deleting') {
      await enqueue({ kind: 'replicaSet.delete', resourceKind: 'replicaSet', resourceId: rs.id });
    } else if (rs.status === 'creating' || rs.status === 'resizing') {
      await enqueue({
        kind: 'replicaSet.converge',
        resourceKind: 'replicaSet',
        resourceId: rs.id,
        payload: { from: rs.status, settle: 'active' },
      });
    } else if (rs.status === 'active') {
      const primary = await store.services.get(rs.serviceId);
      const vpc = primary?.vpcId ? await store.vpcs.get(primary.vpcId) : undefined;
      if ((await driver.inspectReplicaSet(replicaSetSpec(rs, vpc))) !== 'running') {
        await enqueue({
          kind: 'replicaSet.converge',
          resourceKind: 'replicaSet',
          resourceId: rs.id,
          payload: {},
        });
      }
    }
  }
  return queued;
}
