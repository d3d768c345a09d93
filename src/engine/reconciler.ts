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
import type { ReplicaSet, Service } from '../domain/types.js';
import type { FailedOperation, Tx } from '../store/store.js';
import { queueBackupIfDue } from './backups.js';
import type { HandlerDeps } from './handler-deps.js';
import { failResource, observe } from './handlers.js';
import { observeNodes } from '../domain/service-nodes.js';
import { replicaSetSpec, serviceSpec } from './specs.js';

type Versioned = { id: string; version: number };

/**
 * One round: what it read of the operations (the pending ones, the latest
 * failures: after the resources, see reconcile) and what it queued so far. Its steps below each look at one
 * resource and queue, in a transaction of their own, what closes its gap.
 */
interface Round {
  deps: HandlerDeps;
  pending: ReadonlySet<string>;
  failures: ReadonlyMap<string, FailedOperation>;
  queued: number;
}

const key = (kind: string, id: string) => `${kind}:${id}`;

/**
 * Returns how many operations it queued. A resource that cannot be looked
 * at (its host does not answer) is passed to `onError` and skipped: the
 * others are still repaired this round.
 */
export async function reconcile(
  deps: HandlerDeps,
  onError: (err: unknown) => void = (err) => {
    throw err;
  },
): Promise<number> {
  const { store } = deps;
  // The resources first, then their operations: a request that moved a
  // resource and queued its work in one transaction before the resource
  // was read has its operation in `pending` (read after), and one after
  // changed the version that `unchanged` checks. Read the other way round,
  // a DELETE between the two reads showed a DELETING service with nothing
  // pending, and the round queued a second delete (a CI run's
  // several-processes test: "done,done").
  const services = await store.services.listAll();
  const replicaSets = await store.replicaSets.listAll();
  const round: Round = {
    deps,
    pending: new Set(
      (await store.operations.listPending()).map((o) => key(o.resourceKind, o.resourceId)),
    ),
    failures: new Map(
      (await store.operations.latestFailures()).map((f) => [key(f.resourceKind, f.resourceId), f]),
    ),
    queued: 0,
  };
  for (const svc of services) {
    await reconcileService(round, svc).catch(onError);
  }
  for (const rs of replicaSets) {
    await reconcileReplicaSet(round, rs).catch(onError);
  }
  await recordPeeringFailures(round);
  return round.queued;
}

/**
 * Runs `act` in a transaction if the resource is still the version read
 * above: a request that changed it meanwhile queued its own work, and the
 * next round looks again.
 */
async function unchanged<T extends Versioned>(
  round: Round,
  read: (tx: Tx) => Promise<T | undefined>,
  seen: T,
  act: (tx: Tx, current: T) => Promise<NewOperation | undefined>,
): Promise<void> {
  const { store, clock } = round.deps;
  await store.transaction(async (tx) => {
    const current = await read(tx);
    if (!current || current.version !== seen.version) return;
    const op = await act(tx, current);
    if (!op) return;
    await tx.operations.enqueue(op, clock());
    round.queued++;
  });
}

/** A failure the engine did not record on the resource (an unreadable operation): record it. */
async function recordFailure(round: Round, tx: Tx, f: FailedOperation): Promise<undefined> {
  const reason = f.lastError ?? 'an operation failed';
  const changed = await failResource(tx, f, reason);
  if (changed && (f.resourceKind === 'service' || f.resourceKind === 'replicaSet')) {
    await tx.events.add({
      resourceKind: f.resourceKind,
      resourceId: f.resourceId,
      node: null,
      at: round.deps.clock(),
      severity: 'ERROR',
      message: `basin: an operation failed: ${reason}`,
    });
  }
  return undefined;
}

/**
 * A service: its failure recorded, its interrupted work resumed, a database
 * that should run but does not brought back (and one that should not,
 * stopped), and, running as it should, its nodes observed and its backup
 * queued when due.
 */
async function reconcileService(round: Round, svc: Service): Promise<void> {
  const { store, driver, clock, backups } = round.deps;
  const k = key('service', svc.id);
  if (round.pending.has(k)) return;
  const read = (tx: Tx) => tx.services.get(svc.id);
  const failure = round.failures.get(k);
  if (failure && svc.status !== 'DELETING') {
    await unchanged(round, read, svc, (tx) => recordFailure(round, tx, failure));
    return;
  }
  if (resumeService(svc)) {
    await unchanged(round, read, svc, async (_tx, current) => resumeService(current));
    return;
  }
  const vpc = svc.vpcId ? await store.vpcs.get(svc.vpcId) : undefined;
  const spec = serviceSpec(svc, vpc);
  const health = await driver.inspectService(spec);
  if (svc.status === 'READY' && health !== 'running') {
    // A database that should run does not: say so, and bring it back.
    await unchanged(round, read, svc, async (tx, current) => {
      const unstable = markUnstable(current);
      return unstable && serviceConverge(await tx.services.update(unstable));
    });
  } else if (svc.status === 'PAUSED' && health === 'running') {
    await unchanged(round, read, svc, async (_tx, current) => serviceConverge(current));
  } else if (svc.status === 'READY' && health === 'running') {
    // Backups on their schedule, in a lane of their own (engine/backups.ts).
    // What its nodes are now: role, timeline, WAL position, lag.
    const seen = await observe(driver, spec, clock).catch(() => undefined);
    if (seen) {
      await unchanged(round, read, svc, async (tx, current) => {
        const next = observeNodes(current, seen);
        if (next) await tx.services.update(next);
        return undefined;
      });
    }
    const queuedBackup = round.pending.has(key('serviceBackups', svc.id));
    await store.transaction(async (tx) => {
      if (await queueBackupIfDue(tx, svc, backups, clock(), () => queuedBackup)) round.queued++;
    });
  }
}

/** A read replica set: its failure recorded, its work resumed, its nodes brought back. */
async function reconcileReplicaSet(round: Round, rs: ReplicaSet): Promise<void> {
  const { store, driver } = round.deps;
  const k = key('replicaSet', rs.id);
  if (round.pending.has(k)) return;
  const read = (tx: Tx) => tx.replicaSets.get(rs.id);
  const failure = round.failures.get(k);
  if (failure && rs.status !== 'deleting') {
    await unchanged(round, read, rs, (tx) => recordFailure(round, tx, failure));
    return;
  }
  if (resumeReplicaSet(rs)) {
    await unchanged(round, read, rs, async (_tx, current) => resumeReplicaSet(current));
    return;
  }
  if (rs.status !== 'active') return;
  const primary = await store.services.get(rs.serviceId);
  if (!primary) return;
  const vpc = primary.vpcId ? await store.vpcs.get(primary.vpcId) : undefined;
  if ((await driver.inspectReplicaSet(replicaSetSpec(rs, primary, vpc))) !== 'running') {
    await unchanged(round, read, rs, async (_tx, current) => replicaSetConverge(current));
  }
}

/** A peering has no logs: its failure shows as `failed` with the reason. */
async function recordPeeringFailures(round: Round): Promise<void> {
  for (const f of round.failures.values()) {
    if (f.resourceKind === 'peering') {
      await round.deps.store.transaction((tx) => recordFailure(round, tx, f));
    }
  }
}
