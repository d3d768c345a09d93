// The two ends of a fork's first converge (fork-restore.ts makes its data
// in between): starting, or polling, the restore in the background while
// the node has no data; and opening the fork once its server has recovered
// and promoted itself: tsdbadmin's password reset to the fork's own, the
// copy of the parent's repository removed, and then (the next step) the
// fork's access rules opened to its clients.

import { DriverError, type ServiceSpec } from '../../driver.js';
import { type Progress, wait } from '../../../domain/progress.js';
import { leaveParentRepository } from './fork-repo.js';
import { restoreFork } from './fork-restore.js';
import { removeTrees } from '../node/node-files.js';
import type { NodeState } from '../node/node-state.js';
import type { OsUser } from '../host/os-user.js';
import { forkTask } from '../tasks.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<
  DriverContext,
  | 'adminBounds'
  | 'backups'
  | 'cgroups'
  | 'layout'
  | 'locks'
  | 'log'
  | 'networks'
  | 'oom'
  | 'pg'
  | 'privateTmp'
  | 'publicHost'
  | 'remoteIdentity'
  | 'repositories'
  | 'tasks'
  | 'users'
>;

/**
 * How soon to look again while a restore runs: soon while it is young (a
 * NOW copy on a file system with reflinks is done in a few hundred ms, and
 * each ms waited past its end is a ms of the fork's), a tenth of its age
 * after that, at most every RESTORE_POLL_MS (a restore of a large backup
 * takes minutes, and each look is a converge step).
 */
const RESTORE_POLL_MS = 200;
const restorePoll = (ageMs: number) => Math.min(RESTORE_POLL_MS, Math.max(20, ageMs / 10));

/**
 * One step of making a fork's data: undefined once it is in place;
 * otherwise the restore is started, or still runs. A failed restore is
 * thrown once (retryable unless the fork cannot be made at all), and the
 * next step starts it afresh.
 */
export async function forkData(
  ctx: Ctx,
  spec: ServiceSpec,
  userMade: Promise<OsUser>,
  exists: () => Promise<boolean>,
): Promise<Progress | undefined> {
  const key = forkTask(spec.serviceId);
  const what = spec.relocated ? 'restoring it from its backups' : 'restoring the fork';
  const last = ctx.tasks.take(key);
  if (last === 'running') return wait(restorePoll(ctx.tasks.runningFor(key)), what);
  if (last !== 'none' && last.error) throw last.error;
  if (await exists()) return undefined;
  ctx.tasks.start(key, (signal) => restoreFork(ctx, spec, userMade, signal));
  return wait(restorePoll(0), what);
}

/**
 * Opens a recovered fork, its server ready (promoted): tsdbadmin gets the
 * fork's password (`applySql`), the parent's WAL source goes, and the state
 * says 'open', so that the next step writes the fork's real access rules
 * and reloads. Until then only Basin could log in: the fork held its
 * parent's roles and passwords.
 */
export async function openFork(
  ctx: Ctx,
  spec: ServiceSpec,
  state: NodeState,
  applySql: () => Promise<void>,
  save: () => Promise<void>,
): Promise<Progress> {
  await applySql();
  // Recovered: it no longer reads its parent's repository (repository/).
  if (spec.source.kind === 'fork') {
    await leaveParentRepository(ctx, spec.serviceId, spec.source.parentServiceId);
  }
  const { repo, conf, pg } = ctx.layout.forkSource(spec.serviceId);
  await removeTrees([repo, conf, pg]);
  state.fork = 'open';
  delete state.recovery;
  await save();
  ctx.log.info({ serviceId: spec.serviceId }, 'the fork is open');
  return wait(0, 'opening the fork to its clients');
}

/** A restored fork whose server stopped while recovering: its restore failed for good. */
export function recoveryFailed(reason: string): DriverError {
  return new DriverError(`The fork could not be restored: ${reason}`, false);
}
