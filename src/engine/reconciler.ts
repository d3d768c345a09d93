// Level-triggered repair: compares what the store says should be with what the
// driver sees, and queues the work that closes the gap. Runs at start-up and
// then periodically. It only ever queues operations (and marks drift); the
// handlers act.
//
// It leaves alone a resource whose newest operation failed for good: retrying
// it on every round would hammer the host forever, and the same failure would
// come back. A user's request is what tries again (docs/decisions.md,
// Failures). Deleting is the exception: a DELETING resource is always driven on.

import {
  type NewOperation,
  replicaSetConverge,
  resumeReplicaSet,
  resumeService,
  serviceConverge,
} from '../domain/operations.js';
import { markUnstable } from '../domain/service-transitions.js';
import type { FailedOperation, Tx } from '../store/store.js';
import { queueBackupIfDue } from './backups.js';
import { failResource, type HandlerDeps, observe } from './handlers.js';
import { observeNodes } from '../domain/service-nodes.js';
import { replicaSetSpec, serviceSpec } from './specs.js';

type Versioned = { id: string; version: number };

/** Returns how many operations it queued. */
export async function reconcile({ store, driver, clock, backups }: HandlerDeps): Promise<number> {
  const key = (kind: string, id: string) => `${kind}:${id}`;
  const pending = new Set(
    (await store.operations.listPending()).map((o) => key(o.resourceKind, o.resourceId)),
  );
  const failures = new Map(
    (await store.operations.latestFailures()).map((f) => [key(f.resourceKind, f.resourceId), f]),
  );
  let queued = 0;

  /**
   * Runs `act` in a transaction if the resource is still the version read
   * above: a request that changed it meanwhile queued its own work, and the
   * next round looks again.
   */
  const unchanged = async <T extends Versioned>(
    read: (tx: Tx) => Promise<T | undefined>,
    seen: T,
    act: (tx: Tx, current: T) => Promise<NewOperation | undefined>,
  ) => {
    await store.transaction(async (tx) => {
      const current = await read(tx);
      if (!current || current.version !== seen.version) return;
      const op = await act(tx, current);
      if (!op) return;
      await tx.operations.enqueue(op, clock());
      queued++;
    });
  };
  /** A failure the engine did not record on the resource (an unreadable operation): record it. */
  const recordFailure = async (tx: Tx, f: FailedOperation) => {
    const reason = f.lastError ?? 'an operation failed';
    const changed = await failResource(tx, f, reason);
    if (changed && (f.resourceKind === 'service' || f.resourceKind === 'replicaSet')) {
      await tx.events.add({
        resourceKind: f.resourceKind,
        resourceId: f.resourceId,
        node: null,
        at: clock(),
        severity: 'ERROR',
        message: `basin: an operation failed: ${reason}`,
      });
    }
    return undefined;
  };

  for (const svc of await store.services.listAll()) {
    const k = key('service', svc.id);
    if (pending.has(k)) continue;
    const read = (tx: Tx) => tx.services.get(svc.id);
    const failure = failures.get(k);
    if (failure && svc.status !== 'DELETING') {
      await unchanged(read, svc, (tx) => recordFailure(tx, failure));
      continue;
    }
    const resume = resumeService(svc);
    if (resume) {
      await unchanged(read, svc, async (_tx, current) => resumeService(current));
      continue;
    }
    const vpc = svc.vpcId ? await store.vpcs.get(svc.vpcId) : undefined;
    const spec = serviceSpec(svc, vpc);
    const health = await driver.inspectService(spec);
    if (svc.status === 'READY' && health !== 'running') {
      // A database that should run does not: say so, and bring it back.
      await unchanged(read, svc, async (tx, current) => {
        const unstable = markUnstable(current);
        return unstable && serviceConverge(await tx.services.update(unstable));
      });
    } else if (svc.status === 'PAUSED' && health === 'running') {
      await unchanged(read, svc, async (_tx, current) => serviceConverge(current));
    } else if (svc.status === 'READY' && health === 'running') {
      // Backups on their schedule, in a lane of their own (engine/backups.ts).
      // What its nodes are now: role, timeline, WAL position, lag.
      const seen = await observe(driver, spec, clock).catch(() => undefined);
      if (seen) {
        await unchanged(read, svc, async (tx, current) => {
          const next = observeNodes(current, seen);
          if (next) await tx.services.update(next);
          return undefined;
        });
      }
      const queuedBackup = pending.has(key('serviceBackups', svc.id));
      await store.transaction(async (tx) => {
        if (await queueBackupIfDue(tx, svc, backups, clock(), () => queuedBackup)) queued++;
      });
    }
  }

  for (const rs of await store.replicaSets.listAll()) {
    const k = key('replicaSet', rs.id);
    if (pending.has(k)) continue;
    const read = (tx: Tx) => tx.replicaSets.get(rs.id);
    const failure = failures.get(k);
    if (failure && rs.status !== 'deleting') {
      await unchanged(read, rs, (tx) => recordFailure(tx, failure));
      continue;
    }
    if (resumeReplicaSet(rs)) {
      await unchanged(read, rs, async (_tx, current) => resumeReplicaSet(current));
      continue;
    }
    if (rs.status !== 'active') continue;
    const primary = await store.services.get(rs.serviceId);
    if (!primary) continue;
    const vpc = primary.vpcId ? await store.vpcs.get(primary.vpcId) : undefined;
    if ((await driver.inspectReplicaSet(replicaSetSpec(rs, primary, vpc))) !== 'running') {
      await unchanged(read, rs, async (_tx, current) => replicaSetConverge(current));
    }
  }
  // A peering has no logs: its failure shows as `failed` with the reason.
  for (const f of failures.values()) {
    if (f.resourceKind === 'peering') await store.transaction((tx) => recordFailure(tx, f));
  }
  return queued;
}
