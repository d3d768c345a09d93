// A stanza whose making was interrupted. pgBackRest's stanza-create writes
// archive.info, its copy, backup.info and its copy, each to a
// `<name>.pgbackrest.tmp` first, renamed into place. Killed on the way (its
// Basin killed -9 while it ran, a host losing power), it leaves a
// repository every later stanza-create refuses for good:
//   - a lone `archive.info.pgbackrest.tmp`: "[040]: archive directory not empty";
//   - archive.info without backup.info: "[055]: archive.info exists but
//     backup.info is missing".
// So before a stanza-create, a stanza without backup.info and without a
// backup set in it is cleared: nothing in it can be restored (WAL archived
// before a first backup has no base to be replayed on), and a stanza with
// backup sets but no backup.info is left as it is, for a person to look at
// (pgBackRest's error says so).

import { CommandError, run } from '../host/exec.js';
import { helperCommand, type PrivateTmp } from '../host/confine.js';
import type { OsUser } from '../host/os-user.js';
import { SafeDir } from '../host/files/safe-dir.js';
import type { Logger } from '../../../lib/logger.js';

/** Names pgBackRest gives a backup set: 20261129-064500F, …F_20261129-070000D or I. */
const BACKUP_SET = /^\d{8}-\d{6}F(?:_\d{8}-\d{6}[DI])?$/;

/** What a stanza directory of a repository holds, read without following a link. */
async function namesIn(repo: string, owner: number, names: string[]): Promise<string[]> {
  let top: SafeDir | undefined;
  let dir: SafeDir | undefined;
  try {
    top = await SafeDir.open(repo, owner);
    dir = await top.dirPath(names);
    return await dir.names();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  } finally {
    if (dir && dir !== top) await dir.close();
    await top?.close();
  }
}

/**
 * Clears the stanza `id` in the repository `repo` (owned by `owner`) when
 * an interrupted stanza-create left it half-made (see the top of this
 * file): removed as its owner, so that nothing a tenant planted in its own
 * repository leads the removal anywhere else. Whether it did.
 */
export async function clearUnmadeStanza(
  repo: string,
  id: string,
  owner: OsUser,
  privateTmp: PrivateTmp | undefined,
  log: Logger,
): Promise<boolean> {
  const backup = await namesIn(repo, owner.uid, ['backup', id]);
  if (backup.some((n) => n === 'backup.info' || n === 'backup.info.copy' || BACKUP_SET.test(n))) {
    return false;
  }
  const archive = await namesIn(repo, owner.uid, ['archive', id]);
  if (backup.length === 0 && archive.length === 0) return false;
  const paths = [`${repo}/archive/${id}`, `${repo}/backup/${id}`];
  const rm = helperCommand(owner, 'rm', ['-rf', '--one-file-system', '--', ...paths], privateTmp);
  try {
    await run(rm.file, rm.args, { timeoutMs: 120_000 });
  } catch (err) {
    const said = err instanceof CommandError ? err.output.trim() : (err as Error).message;
    throw new Error(`Could not clear the half-made stanza of ${id}: ${said}`);
  }
  log.warn(
    { serviceId: id, archive, backup },
    'its stanza was left half-made by an interrupted stanza-create: cleared, made again',
  );
  return true;
}
