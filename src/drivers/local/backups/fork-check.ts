// The last look at a fork's data before its server first starts: it must be
// its parent's, and it gets an identifier of its own (docs/security.md,
// Forks; docs/decisions.md, Backups and forks: the identifier).
//
// What Basin copies out of a parent is read without links and owned by the
// parent's OS user (safe-dir.ts), so it is the parent's. This checks the
// outcome all the same, from what Basin recorded rather than from anything
// the parent's tenant wrote, so that a way around the reader still could
// not start another service's data as the fork:
//
// - the control file carries the identifier recorded for the parent when
//   it was made (each service has its own since identifiers were given:
//   system-id.ts); a parent made before that has no record, and its forks
//   are checked for the rest only;
// - a restored backup (LAST_SNAPSHOT, PITR) is the one Basin chose: its
//   backup_label starts where backup.info, as Basin read it, says that
//   backup starts, and backup.info names the parent's identifier for its
//   stanza (the stanza and its directories are named after the parent by
//   Basin itself);
// - a NOW copy's label is the one Basin gave its low-level backup.
//
// Anything else fails the fork for good, naming what did not match. Then
// the data gets the fork's identifier: its control file and the WAL in its
// pg_wal. A restored backup still recovers through its parent's archived
// WAL, which carries the parent's identifier: archive-get looks it up by the
// parent's control file (a copy, in the fork's source-pg directory), and
// the restore_command gives each segment the fork's identifier as it brings
// it in (conf.ts, recoverySettings), so that PostgreSQL replays it.

import { join } from 'node:path';
import { DriverError } from '../../driver.js';
import type { Layout } from '../layout.js';
import { mkdirIn } from '../node/node-files.js';
import type { Recovery } from '../node/node-state.js';
import { backupLabelName } from './now-copy.js';
import { chownTo, type OsUser } from '../host/os-user.js';
import { withSafeDir } from '../host/files/safe-dir.js';
import { UnsafeFileError, writeFileAs } from '../host/files/safe-fs.js';
import { FORK_ID_FILE, PARENT_ID_FILE } from '../config/pgbackrest.js';
import { idBytes, readControlFile, readId, setSystemId } from '../node/system-id.js';
import type { Copied } from './fork-repo.js';

export interface StagedData {
  /** The staged data directory (in a staging directory of root's). */
  pgdata: string;
  /** Who owns its files: the fork's OS user after a restore, root after a copy (undefined: Basin not root). */
  owner: number | undefined;
  parent: string;
  /** The parent's identifier as recorded (undefined: a parent made before identifiers were recorded). */
  parentSystemId: string | undefined;
  forkId: string;
  /** The identifier the fork gets. */
  forkSystemId: string;
}

/**
 * Checks the staged data of a fork against its parent and gives it the
 * fork's identifier (see the top of this file). Returns the recovery the
 * fork then runs (a restored backup's with both identifiers). Throws a
 * DriverError, for good, naming what did not match.
 */
export async function checkAndIdentify(
  layout: Layout,
  staged: StagedData,
  copied: Copied,
  user: OsUser,
): Promise<Recovery> {
  const { parent, parentSystemId, forkSystemId } = staged;
  const mismatch = (what: string) =>
    new DriverError(
      `The fork's data is not its parent's: ${what}; the fork is not started.`,
      false,
    );
  try {
    return await withSafeDir(staged.pgdata, staged.owner, async (pgdata) => {
      const control = await readControlFile(pgdata);
      const found = readId(control);
      if (parentSystemId !== undefined && found !== parentSystemId) {
        throw mismatch(`its system identifier is ${found}, where ${parent}'s is ${parentSystemId}`);
      }
      if (copied.recovery.kind === 'copy') {
        const label = /^LABEL: (.*)$/m.exec(copied.backupLabel ?? '')?.[1];
        if (label !== backupLabelName(staged.forkId)) {
          throw mismatch(
            `its backup is labelled ${JSON.stringify(label ?? '')}, not as Basin made it`,
          );
        }
      }
      let recovery = copied.recovery;
      if (recovery.kind === 'repo') {
        const repo = copied.repo;
        if (!repo) throw new Error('a restored fork without what it restored (a bug)');
        if (parentSystemId !== undefined && repo.stanzaSystemId !== parentSystemId) {
          throw mismatch(
            `the backups it was restored from belong to system ${repo.stanzaSystemId ?? '(none given)'}, ` +
              `where ${parent}'s is ${parentSystemId}`,
          );
        }
        const label = await pgdata.readSmall('backup_label', 64 * 1024).catch((err: unknown) => {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
          throw err;
        });
        const start = /^START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)$/m.exec(label)?.[1];
        if (start !== repo.backup.walStart) {
          throw mismatch(
            `its backup_label starts at WAL ${start ?? '(none)'}, where the backup ` +
              `${repo.backup.label} of ${parent} starts at ${repo.backup.walStart}`,
          );
        }
        const systemIds = { parent: found, fork: forkSystemId };
        await saveSourcePg(layout, staged.forkId, control, systemIds, user);
        recovery = { ...recovery, systemIds };
      }
      await setSystemId(pgdata, forkSystemId);
      return recovery;
    });
  } catch (err) {
    if (err instanceof DriverError) throw err;
    if (err instanceof UnsafeFileError) {
      throw new DriverError(`The fork's data could not be checked: ${err.message}`, false);
    }
    throw new DriverError(`The fork's data could not be checked: ${(err as Error).message}`, true);
  }
}

/**
 * The fork's source-pg directory, its user's: the parent's control file
 * (`global/pg_control`, where archive-get reads the identifier it finds the
 * parent's WAL by) and both identifiers as WAL holds them, for the
 * restore_command (pgbackrest.ts, forkRestoreCommand).
 */
async function saveSourcePg(
  layout: Layout,
  forkId: string,
  control: Buffer,
  ids: { parent: string; fork: string },
  user: OsUser,
): Promise<void> {
  // Root's until it is complete, then handed over, the inner one first.
  const dir = layout.forkSource(forkId).pg;
  const global = join(dir, 'global');
  await mkdirIn(dir, 0o700);
  await mkdirIn(global, 0o700);
  await writeFileAs(join(global, 'pg_control'), control, user, 0o600);
  await writeFileAs(join(dir, PARENT_ID_FILE), idBytes(ids.parent), user, 0o600);
  await writeFileAs(join(dir, FORK_ID_FILE), idBytes(ids.fork), user, 0o600);
  await chownTo(global, user);
  await chownTo(dir, user);
}
