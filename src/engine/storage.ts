// What the engine does when the driver's storage watch speaks
// (docs/decisions.md, Storage allowances): a change of level goes into the
// service's logs, and a converge is queued, which applies the level to its
// nodes (read-only sessions, recovery, or no start at all). A service the
// watch stopped is UNSTABLE: it should run, and does not; its converge
// fails with why, and a user's resize (or start) is what tries again.
//
// A read replica set's nodes are read-only by nature: only its stop, and
// what brings it back, are worth an entry and a converge.

import { replicaSetConverge, serviceConverge } from '../domain/operations.js';
import { shouldRun } from '../domain/service-status.js';
import { markUnstable } from '../domain/service-transitions.js';
import { storageMessage } from '../domain/storage.js';
import type { StorageEvent } from '../drivers/driver.js';
import type { Tx } from '../store/store.js';
import type { HandlerDeps } from './handlers.js';

/** Records `event`; returns whether an operation was queued. */
export function storageEvent(deps: HandlerDeps, event: StorageEvent): Promise<boolean> {
  const { target, change } = event;
  const at = deps.clock();
  return deps.store.transaction(async (tx: Tx) => {
    if (target.kind === 'service') {
      const svc = await tx.services.get(target.id);
      if (!svc || svc.status === 'DELETING') return false;
      if (change) {
        await tx.events.add({
          resourceKind: 'service',
          resourceId: svc.id,
          node: null,
          at,
          ...storageMessage(change, 'service'),
        });
      }
      // A paused service gets its level when it starts.
      if (!shouldRun(svc.status)) return false;
      const moved = change?.view.level === 'stopped' ? markUnstable(svc) : undefined;
      const current = moved ? await tx.services.update(moved) : svc;
      await tx.operations.enqueue(serviceConverge(current), at);
      return true;
    }
    const rs = await tx.replicaSets.get(target.id);
    if (!rs || rs.status === 'deleting' || change?.view.level !== 'stopped') return false;
    await tx.events.add({
      resourceKind: 'replicaSet',
      resourceId: rs.id,
      node: null,
      at,
      ...storageMessage(change, 'replica set'),
    });
    await tx.operations.enqueue(replicaSetConverge(rs), at);
    return true;
  });
}
