// The modes of the local driver's tree (docs/security.md, "Who owns what"),
// set again at every start: directories and files made by an older Basin,
// or loosened by hand, are brought back to them. What belongs to a service's
// OS user is its own to loosen while it runs; its top directories (data,
// socket, archive, pgBackRest's) are still set back to 0700 here, so that
// a server run by an older Basin does not start with them open.
//
// Everything here lies in directories only root may write to (local/,
// instances/, s/, archive/), so no entry can be swapped for a link
// meanwhile; links are skipped all the same (chmod would follow them).

import { chmod, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Layout } from '../layout.js';

/** Sets the mode of every directory and file of the driver's own in `layout`. */
export async function tightenLayout(layout: Layout): Promise<void> {
  const known = new Map<string, number>([
    [layout.instancesDir, 0o711],
    [layout.socketsDir, 0o711],
    [layout.archivesDir, 0o711],
    [layout.backupsDir, 0o711],
    [layout.repositoriesDir, 0o711],
    [layout.installationFile, 0o600],
    [layout.caDir, 0o700],
    [layout.templateDir, 0o711],
  ]);
  for (const name of await list(layout.root)) {
    const path = join(layout.root, name);
    // A build in progress (template, CA, certificate) sets its own modes.
    if (name.startsWith('.staging-')) continue;
    await setMode(path, known.get(path) ?? 'private');
  }
  await setMode(layout.caKey, 0o600);
  await setMode(layout.caCert, 0o644);
  await setMode(layout.templateMarker, 0o644);
  await setMode(layout.templatePgdata, 0o700);
  for (const id of await list(layout.instancesDir)) {
    const instance = layout.instanceDir(id);
    await setMode(instance, 0o711);
    for (const node of await list(instance)) {
      if (!/^\d+$/.test(node)) continue; // .clone-* staging: made 0700, removed by the next clone
      const ref = { id, node: Number(node) };
      await setMode(layout.nodeDir(ref), 0o711);
      await setMode(layout.pgdata(ref), 0o700);
      for (const file of await list(layout.nodeDir(ref))) {
        if (file !== 'pgdata') await setMode(join(layout.nodeDir(ref), file), 'private');
      }
    }
  }
  for (const dir of [layout.socketsDir, layout.archivesDir]) {
    for (const name of await list(dir)) await setMode(join(dir, name), 0o700);
  }
  // A stanza: root's directory, configuration and identity files (its
  // user's group reads them), the service user's repository, spool, locks
  // and logs. A repository with a server (repository/) the same way, with
  // root's record of the server and its output private.
  for (const [top, dirOf] of [
    [layout.backupsDir, (id: string) => layout.backupDir(id)],
    [layout.repositoriesDir, (id: string) => layout.repository(id).dir],
  ] as const) {
    for (const id of await list(top)) {
      const dir = dirOf(id);
      await setMode(dir, 0o711);
      for (const name of await list(dir)) {
        const path = join(dir, name);
        const isDir = (await lstat(path).catch(() => undefined))?.isDirectory() === true;
        await setMode(path, isDir ? 0o700 : READ_BY_GROUP.test(name) ? 0o640 : 'private');
      }
    }
  }
}

/** Files of root's that a stanza's or repository's user reads through its group. */
const READ_BY_GROUP = /\.(conf|crt|key)$/;

/** The names in a directory; none when it is not there. */
async function list(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/**
 * Gives `path` `mode` ('private': its owner's permissions alone, for what
 * the layout does not name: state.json, startup.log, strays). Nothing when
 * it is missing or a link.
 */
async function setMode(path: string, mode: number | 'private'): Promise<void> {
  const st = await lstat(path).catch(() => undefined);
  if (!st || st.isSymbolicLink()) return;
  const wanted = mode === 'private' ? st.mode & 0o700 : mode;
  if ((st.mode & 0o7777) !== wanted) await chmod(path, wanted);
}
