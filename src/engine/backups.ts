// Backups, as the engine runs them (docs/decisions.md, Backups and forks).
// A full backup is queued when a service first becomes READY and then on
// the schedule (reconciler.ts); the operation takes the backup through the
// driver, records it in the store (where requests read the recovery window
// from), and expires what the window no longer needs. Backups have a lane
// of their own (resource kind `serviceBackups`), so a long backup never
// holds back a service's other operations, and each attempt only starts or
// polls the backup, which runs in the background: the operation timeout
// bounds an attempt, not the backup.

import {
  type BackupPolicy,
  backupDue,
  DEFAULT_BACKUP_POLICY,
  oldestToKeep,
} from '../domain/backups.js';
import { serviceBackup } from '../domain/operations.js';
import { DONE, type Progress } from '../domain/progress.js';
import type { Service, ServiceStatus } from '../domain/types.js';
import { DriverError } from '../drivers/driver.js';
import type { Operation, Store, Tx } from '../store/store.js';
import type { HandlerDeps } from './handler-deps.js';
import { serviceSpec } from './specs.js';

/** Forks in these states may still need the backup they restore: it is not expired. */
const RESTORING: readonly ServiceStatus[] = ['QUEUED', 'CONFIGURING', 'UNSTABLE'];

/**
 * One step of a service's backup. A service that is not READY is not backed
 * up (done: the schedule comes back to it). Failures are all retried with
 * backoff, never final: a backup that cannot be taken now (the server
 * restarting, a full disk) is tried again until it can, and its failures
 * are written into the service's logs.
 */
export async function backupHandler(
  op: Operation<'service.backup'>,
  deps: HandlerDeps,
): Promise<Progress> {
  const { store, driver } = deps;
  const svc = await store.services.get(op.resourceId);
  if (!svc || svc.status !== 'READY') return DONE;
  const vpc = svc.vpcId === null ? undefined : await store.vpcs.get(svc.vpcId);
  let progress;
  try {
    progress = await driver.backupService(serviceSpec(svc, vpc), Date.parse(op.createdAt));
  } catch (err) {
    if (err instanceof DriverError && !err.retryable) throw new DriverError(err.message, true);
    throw err;
  }
  if (!progress.done) return progress;
  await store.transaction((tx) => tx.backups.insert({ serviceId: svc.id, ...progress.backup }));
  await expire(svc, deps);
  return DONE;
}

/** Expires the service's backups (and their WAL) that the recovery window no longer needs. */
async function expire(svc: Service, { store, driver, clock, backups }: HandlerDeps) {
  const recorded = await store.backups.listByService(svc.id);
  const pinned = (await store.services.listByProject(svc.projectId))
    .filter((s) => s.forkedFrom?.serviceId === svc.id && RESTORING.includes(s.status))
    .flatMap((s) => (s.forkedFrom?.backupLabel ? [s.forkedFrom.backupLabel] : []));
  const keep = oldestToKeep(recorded, backups ?? DEFAULT_BACKUP_POLICY, clock(), pinned);
  if (!keep || recorded[0]?.label === keep.label) return;
  await driver.expireBackups(svc.id, keep.label);
  await store.transaction((tx) => tx.backups.deleteOlderThan(svc.id, keep.label));
}

/**
 * Queues a backup of `svc` when it is READY, none is queued, and one is
 * due. Returns whether it queued one.
 */
export async function queueBackupIfDue(
  tx: Tx,
  svc: Service,
  policy: BackupPolicy | undefined,
  now: number,
  queued: (serviceId: string) => boolean,
): Promise<boolean> {
  if (svc.status !== 'READY' || queued(svc.id)) return false;
  if (!backupDue(await tx.backups.listByService(svc.id), policy ?? DEFAULT_BACKUP_POLICY, now)) {
    return false;
  }
  await tx.operations.enqueue(serviceBackup(svc), now);
  return true;
}

/** Whether a backup of the service is queued or running. */
export async function backupQueued(store: Store | Tx, serviceId: string): Promise<boolean> {
  return (await store.operations.listPending()).some(
    (o) => o.resourceKind === 'serviceBackups' && o.resourceId === serviceId,
  );
}
