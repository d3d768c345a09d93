// Where one node under Patroni keeps its files on its host, and the
// template's clone it may bootstrap from.
//
//   <dir>/               root's, 0711: Basin's record of the node
//     patroni.yml        the configuration, root's, readable by the service's user (0640)
//     patroni.json       the running Patroni's pid and start time (root's, 0600)
//     patroni.log        Patroni's output (root's, 0600)
//     data/              the service's user's, 0700: what Patroni writes
//       pgdata/          PostgreSQL's data directory (empty until bootstrap or a copy)
//       seed/            a clone of Basin's template, until the bootstrap moves it to pgdata
//       pgpass           the passwords Patroni hands to libpq
//
// The data directory and the seed are siblings in a directory of the
// user's, so that the bootstrap, run by Patroni as that user, renames one
// onto the other; Basin's own files stay where the user cannot replace them.

import { lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../host/exec.js';
import { isRoot, type OsUser } from '../host/os-user.js';
import { withSafeDir } from '../host/files/safe-dir.js';
import { chownTree, ensureOwnedDir, exists, mkdirIn, writeOwned } from '../node/node-files.js';
import { newSystemId, setSystemId } from '../node/system-id.js';

export interface PatroniFiles {
  dir: string;
  config: string;
  state: string;
  log: string;
  data: string;
  pgdata: string;
  seed: string;
  pgpass: string;
}

export function patroniFiles(dir: string): PatroniFiles {
  const data = join(dir, 'data');
  return {
    dir,
    config: join(dir, 'patroni.yml'),
    state: join(dir, 'patroni.json'),
    log: join(dir, 'patroni.log'),
    data,
    pgdata: join(data, 'pgdata'),
    seed: join(data, 'seed'),
    pgpass: join(data, 'pgpass'),
  };
}

/** The node's directories: Basin's (0711) and the user's data directory with an empty pgdata. */
export async function ensurePatroniDirs(f: PatroniFiles, user: OsUser): Promise<void> {
  await mkdirIn(f.dir, 0o711);
  await ensureOwnedDir(f.data, user);
  if (!(await exists(f.pgdata)) && !(await exists(f.seed))) await ensureOwnedDir(f.pgdata, user);
}

/**
 * Clones Basin's template (`templatePgdata`: template.ts) into the node's
 * seed, unless its data directory already holds a cluster: a copy
 * (reflinked where the file system can), with a system identifier of its
 * own (system-id.ts: every clone of the template had the template's), an
 * empty basin.conf (the template's postgresql.conf includes it; Patroni
 * gives the parameters), handed to the service's user. Made aside and
 * renamed, so a seed is never half a copy.
 */
export async function prepareSeed(
  f: PatroniFiles,
  templatePgdata: string,
  user: OsUser,
): Promise<'seeded' | 'has-data'> {
  if (await hasCluster(f.pgdata)) {
    // A replica's copy or an earlier bootstrap: the clone is not needed (any more).
    await rm(f.seed, { recursive: true, force: true });
    return 'has-data';
  }
  if (await exists(f.seed)) return 'seeded';
  const staging = `${f.seed}.basin-clone`;
  await rm(staging, { recursive: true, force: true });
  try {
    await run('cp', ['-a', '--reflink=auto', templatePgdata, staging], { timeoutMs: 120_000 });
    await withSafeDir(staging, undefined, (dir) => setSystemId(dir, newSystemId()));
    if (isRoot() && (await lstat(staging)).uid !== user.uid) await chownTree([staging], user);
    await writeOwned(join(staging, 'basin.conf'), '# Patroni gives the parameters.\n', user);
    await run('mv', ['-T', '--', staging, f.seed]);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return 'seeded';
}

/** Whether `pgdata` holds a cluster (PG_VERSION), not an empty directory or nothing. */
export async function hasCluster(pgdata: string): Promise<boolean> {
  try {
    return (await readdir(pgdata)).includes('PG_VERSION');
  } catch {
    return false;
  }
}
