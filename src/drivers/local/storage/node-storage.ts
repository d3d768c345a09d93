// How a node follows its service's storage level (domain/storage.ts), in
// the converge (service-node.ts):
//
//   readOnly   default_transaction_read_only in basin.conf, with a reload
//              (conf.ts, storageSettings);
//   recovery   the primary restarts with a standby.signal and nothing to
//              follow: a hot standby of itself, which answers reads and
//              refuses every write, whatever a session sets. Leaving it,
//              it restarts without: it was never promoted, so it goes on on
//              its own timeline (a promotion would start a new one). Its
//              HA standbys keep following it, as a cascade;
//   stopped    the watch stopped every process of the service; its nodes
//              are not started, the converge fails with why (permanent,
//              but for a host below its reserve: that passes by itself).
//
// A tenant can undo the first two from inside (SET, or promote its own
// server with a `promote` file and SIGUSR1): it then writes until the next
// level, and at the limit it is stopped, which it cannot undo. The
// reconciler looks for a promoted server (inspectService) and restarts it
// in recovery.

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { holdMessage } from '../../../domain/storage.js';
import { DriverError } from '../../driver.js';
import type { NodeState } from '../node/node-state.js';
import { writeOwned } from '../node/node-files.js';
import type { OsUser } from '../host/os-user.js';
import type { StorageWatch } from './storage-watch.js';

/** The error a converge of a stopped service (or replica set) fails with; undefined when it is not stopped. */
export function storageHold(
  storage: StorageWatch,
  id: string,
  what: 'service' | 'replica set',
): DriverError | undefined {
  const { level, why } = storage.state(id);
  if (level !== 'stopped') return undefined;
  const view = storage.view(id);
  const message = view
    ? holdMessage(view, what)
    : `its storage is past its limit: the ${what} does not start while it is`;
  return new DriverError(message, why === 'lowDisk');
}

/** Whether the service's primary is to run in recovery. */
export const inStorageRecovery = (storage: StorageWatch, id: string) =>
  storage.state(id).level === 'recovery';

/** Whether sessions of the service start read-only (every level from readOnly up). */
export const storageReadOnly = (storage: StorageWatch, id: string) =>
  storage.state(id).level !== 'ok';

/**
 * Before a primary starts: a standby.signal when it is to run in
 * recovery, and the one Basin put there taken away when it is not (a
 * standby.signal Basin did not put there is a failover's, left alone:
 * that node is promoted once it runs). Records which in `state`.
 */
export async function prepareRecovery(
  pgdata: string,
  user: OsUser,
  state: NodeState,
  wanted: boolean,
  save: () => Promise<void>,
): Promise<void> {
  const signal = join(pgdata, 'standby.signal');
  if (wanted) {
    state.storageRecovery = true;
    await save(); // first: a crash between the two leaves a signal Basin knows is its own
    await writeOwned(signal, '', user);
  } else if (state.storageRecovery) {
    await rm(signal, { force: true }); // unlinks a link itself, never what it points to
    delete state.storageRecovery;
    await save();
  }
}
