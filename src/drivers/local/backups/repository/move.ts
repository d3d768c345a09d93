// A service's local repository (backup/<id>/repo, its own user's: the path
// of Basin before repository servers, or of a service made with them off)
// moved into a repository of its repository user's (repositories.ts), with
// every backup and archived segment in it: the recovery window the service
// had is still there after the move, and the backup labels the API lists
// still name backups (docs/decisions.md, Backups and forks).
//
// Three steps, each one a rename in backup/<id> (root's, 0711: no tenant
// renames there), so that the files say how far a move got and a Basin
// killed at any moment finishes it on its next converge:
//
//   repo          the local repository, the tenant's, archived into;
//   repo-moving   renamed: archiving into it has stopped. The archiver's
//                 pgBackRest (and an asynchronous pusher still running with
//                 the old configuration, or a backup a killed Basin left)
//                 reaches the repository by its path, and that path is gone
//                 and cannot be made again (backup/<id> is root's): every
//                 write fails, the server keeps the segment and tries it
//                 again, into the new repository once the configuration
//                 names it. What a tenant's own process still holds open in
//                 it is the tenant's: it only changes what is copied of its
//                 own backups.
//                 Copied by root without following a link (safe-copy.ts:
//                 the tenant's files only, a link or anything else refused)
//                 into repos/<id>/incoming (root's, 0700), handed to the
//                 repository's user (chown -P), and put in place as
//                 repos/<id>/repo (the repository's server does not run
//                 yet: nothing archives into it before the switch);
//   repo-moved    renamed again: the copy is in place. The service's side is
//                 written for its repository's server (sides.ts: the same
//                 archive_command, now pushing over TLS) and the server
//                 started; then repo-moved goes.
//
// A copy is done again from the start until repo-moved is there (the
// repository it replaces holds nothing new: nothing archives into it yet);
// never after (archiving has gone on in the new repository by then).

import { chmod, mkdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Layout } from '../../layout.js';
import { chownTree, exists, removeTrees } from '../../node/node-files.js';
import { run } from '../../host/exec.js';
import type { OsUser } from '../../host/os-user.js';
import { copyEntries } from '../../host/files/safe-copy.js';
import { withSafeDir } from '../../host/files/safe-dir.js';
import type { Repositories } from './repositories.js';

/** Where a local repository is on its way (see the top of this file). */
export function movePaths(layout: Layout, id: string) {
  const dir = layout.backupDir(id);
  return {
    local: layout.backupDirs(id).repo,
    moving: join(dir, 'repo-moving'),
    moved: join(dir, 'repo-moved'),
    incoming: join(layout.repository(id).dir, 'incoming'),
  };
}

/** How far the service's move is: none to do, to start or finish copying, or to switch to its server. */
export async function moveStage(
  layout: Layout,
  id: string,
  serversOn: boolean,
): Promise<'none' | 'copy' | 'switch'> {
  const p = movePaths(layout, id);
  if (await exists(p.moving)) return 'copy';
  if (await exists(p.moved)) return 'switch';
  // A local repository stays local while servers are off (a move started stays started).
  return serversOn && (await exists(p.local)) ? 'copy' : 'none';
}

/**
 * Steps one and two (see the top of this file): archiving into the local
 * repository stopped, its files copied into the repository user's, and
 * repo-moved there. `tenant` owns the local repository.
 */
export async function copyLocalRepository(
  layout: Layout,
  repositories: Repositories,
  id: string,
  tenant: OsUser,
): Promise<void> {
  const p = movePaths(layout, id);
  if (await exists(p.local)) await rename(p.local, p.moving);
  const owner = await repositories.prepare(id);
  await removeTrees([p.incoming]);
  await mkdir(p.incoming, { mode: 0o700 });
  await withSafeDir(p.moving, tenant.uid, async (from) => {
    const names = (await from.list()).map((d) => d.name);
    // pgBackRest's own link to the newest backup set is recreated as a
    // link (never followed), then dropped below: the next backup makes it.
    const latest = join('backup', id, 'latest');
    await copyEntries(from, names, p.incoming, {
      owner: tenant.uid,
      keepLink: (rel) => rel === latest,
    });
  });
  // Neither links nor the temporary file of a push a rename cut short
  // (not a segment) go into the repository; root's staging, so no walk
  // through them.
  await run(
    'find',
    [p.incoming, '-xdev', '(', '-type', 'l', '-o', '-name', '*.pgbackrest.tmp', ')', '-delete'],
    {
      timeoutMs: 120_000,
    },
  );
  await chmod(p.incoming, 0o700);
  await chownTree([p.incoming], owner);
  const repo = layout.repository(id).repo;
  await removeTrees([repo]);
  await rename(p.incoming, repo);
  await rename(p.moving, p.moved);
}

/** Step three's end: the local repository's last copy goes. */
export async function dropMovedRepository(layout: Layout, id: string): Promise<void> {
  await removeTrees([movePaths(layout, id).moved]);
}
