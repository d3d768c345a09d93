// How a data directory's PostgreSQL last stopped, from its control file
// (global/pg_control, ControlFileData): its state (a clean shutdown as a
// primary, `shut down`, or as a standby, `shut down in recovery`), and its
// latest checkpoint's location and timeline. An HA service across hosts
// started after a stop starts first the node that stopped as its primary
// (drivers/hosts/ha-nodes.ts firstToStart): read here, on the node's host,
// while its Patroni does not run. Offsets as PostgreSQL 15 lays the
// struct out (checked against pg_controldata): state at 16 (DBState,
// 4 bytes), checkPoint at 32, checkPointCopy.ThisTimeLineID at 48; in the
// byte order of the host.

import { endianness } from 'node:os';
import type { SafeDir } from '../host/files/safe-dir.js';
import { readControlFile } from './system-id.js';

const LE = endianness() === 'LE';

/** DBState: DB_SHUTDOWNED, DB_SHUTDOWNED_IN_RECOVERY. */
const SHUT_DOWN = 1;
const SHUT_DOWN_IN_RECOVERY = 2;

export interface ControlState {
  /** `primary`: shut down cleanly as a primary; `standby`: in recovery; `other`: running, crashed, starting. */
  shutDown: 'primary' | 'standby' | 'other';
  /** The latest checkpoint's location (an LSN, decimal: 64 bits do not fit a JSON number). */
  checkpoint: string;
  timeline: number;
}

/** The state in a control file's bytes (see above). */
export function controlState(control: Buffer): ControlState {
  const state = LE ? control.readInt32LE(16) : control.readInt32BE(16);
  const checkpoint = LE ? control.readBigUInt64LE(32) : control.readBigUInt64BE(32);
  const timeline = LE ? control.readUInt32LE(48) : control.readUInt32BE(48);
  return {
    shutDown:
      state === SHUT_DOWN ? 'primary' : state === SHUT_DOWN_IN_RECOVERY ? 'standby' : 'other',
    checkpoint: checkpoint.toString(),
    timeline,
  };
}

/** The state of the data directory `pgdata`'s control file (checked against its CRC). */
export async function readControlState(pgdata: SafeDir): Promise<ControlState> {
  return controlState(await readControlFile(pgdata));
}
