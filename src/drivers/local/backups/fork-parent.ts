// The parent's side of a fork restored from the repository host
// (fork-remote.ts is the fork's): run on the parent's own host, for the
// hosts driver, before the fork's host restores. What only this host knows
// of the parent: the system identifier recorded when it was made (root's
// file: the fork's data is checked against it, fork-check.ts), whether its
// server runs, and when it last stopped with everything archived. For a
// point-in-time (or NOW) fork of a running parent, everything up to now is
// first pushed into the archive (a commit, a segment switch, the archiver),
// as on one machine (fork-restore.ts): a target is always before a commit
// there, which recovery needs to stop at. An idle parent asleep is woken
// for it (LocalDriver.readyForkParent).

import { DriverError, type ForkParent } from '../../driver.js';
import { postmasterPort, postmasterStatus } from '../node/postmaster.js';
import { readNodeState } from '../node/node-state.js';
import { recordedSystemId } from '../node/system-id.js';
import { archiveUpToNow, primaryDataOf } from './fork-restore.js';
import type { DriverContext } from '../context.js';

export async function readyForkParent(
  ctx: Pick<DriverContext, 'adminBounds' | 'layout'>,
  id: string,
  archive: boolean,
): Promise<ForkParent> {
  const { layout } = ctx;
  const systemId = (await recordedSystemId(layout.systemIdFile(id))) ?? null;
  const ref = await primaryDataOf(layout, id);
  const pgdata = layout.pgdata(ref);
  const pm = await postmasterStatus(pgdata);
  if (pm.up && pm.state !== 'ready') {
    throw new DriverError(`The parent ${id} is starting or stopping; trying again.`, true);
  }
  if (!pm.up) {
    const marked = (await readNodeState(layout.stateFile(ref)).catch(() => undefined))?.walMarkedAt;
    return { systemId, running: false, stoppedAt: marked ?? null };
  }
  if (archive) {
    // A PITR target needs a commit after it in the archive; for NOW it costs
    // a segment switch before the backup, which switches one anyway.
    const target = {
      socketDir: layout.socketDir(ref),
      port: (await postmasterPort(pgdata)) ?? 0,
      pgdata,
      bounds: ctx.adminBounds,
    };
    await archiveUpToNow(target, AbortSignal.timeout(90_000));
  }
  return { systemId, running: true, stoppedAt: null };
}
