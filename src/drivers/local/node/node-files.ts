// A node's files on disk: its data directory, cloned from the template, its
// socket and archive directories, and the configuration files Basin writes
// into the data directory. Everything PostgreSQL reads or writes belongs to
// the service's OS user with no access for others (PostgreSQL insists on
// 0700 for the data directory and 0600 for its key); Basin's own records
// beside it (state.json, startup.log) stay root's. What is in the service's
// directories is the service's to change, so Basin reads and writes there
// only through safe-fs.ts.

import { randomBytes } from 'node:crypto';
import {
  access,
  chmod,
  chown,
  lstat,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  writeFile,
} from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { run } from '../host/exec.js';
import type { Layout, NodeRef } from '../layout.js';
import { chownTo, isRoot, type OsUser } from '../host/os-user.js';
import { withSafeDir } from '../host/files/safe-dir.js';
import { readSmallFile, writeFileAs } from '../host/files/safe-fs.js';
import { newSystemId, recordSystemId, setSystemId } from './system-id.js';

export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** A directory owned by `user`, mode 0700. */
export async function ensureOwnedDir(path: string, user: OsUser): Promise<void> {
  await mkdirIn(path, 0o700);
  await chownTo(path, user);
}

/**
 * Makes a directory unless it exists, and gives it `mode` either way. Never
 * its parents: the layout's directories are made once, at start, so a data
 * directory removed under a running driver is an error rather than made
 * again piece by piece.
 *
 * The mode is set with chmod, never left to mkdir: mkdir's mode is filtered
 * by the process umask, and `npm start` runs with umask 077 (main.ts), which
 * would make every 0711 directory 0700 and keep PostgreSQL, running as
 * another user, out of its own data directory. It is made 0700 first, so
 * that it is never more open than `mode`, not even for a moment.
 */
export async function mkdirIn(path: string, mode: number): Promise<void> {
  try {
    await mkdir(path, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  await chmod(path, mode);
}

/**
 * Writes `content` to `path` owned by `user` unless it already holds exactly
 * that; returns whether it wrote. Written aside and renamed, so PostgreSQL
 * never reads half a file.
 */
export async function writeOwned(
  path: string,
  content: string,
  user: OsUser,
  mode = 0o600,
): Promise<boolean> {
  await sweepAside(path);
  try {
    if ((await readSmallFile(path, { owner: user.uid })) === content) return false;
  } catch {
    // Not there yet, or not a file of the user's: replaced.
  }
  await writeFileAs(path, content, user, mode);
  return true;
}

/**
 * Writes a file of Basin's own in a directory only root may write to,
 * readable by `reader` (a service's user, through its own group: 0640) and
 * nobody else, unless it already holds exactly `content`; aside and
 * renamed, so that a reader never sees half of it. Returns whether it wrote.
 */
export async function writeRootFile(
  path: string,
  content: string,
  reader: OsUser,
): Promise<boolean> {
  const mode = isRoot() ? 0o640 : 0o600;
  try {
    if ((await readFile(path, 'utf8')) === content) {
      await setOwner(path, reader, mode);
      return false;
    }
  } catch {
    // Not there yet.
  }
  const tmp = `${path}.basin-${randomBytes(6).toString('hex')}`;
  try {
    await writeFile(tmp, content, { mode: 0o600, flag: 'wx' });
    await setOwner(tmp, reader, mode);
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
  return true;
}

/** How long a file written aside may take before it is taken for a killed write's. */
const ASIDE_STALE_MS = 10_000;

/**
 * Removes what a write of `path` that Basin was killed in the middle of
 * left beside it (writeFileAs's `<name>.basin-<12 hex digits>`). Created by
 * root before it is given to the service's user, such a file may be root's
 * and 0600 in a data directory, where every base backup and rewind from
 * that node then fails on it ("Permission denied"). Only ten seconds old and
 * more: a write under way is never one. Unlinked, never followed.
 */
export async function sweepAside(path: string): Promise<void> {
  const dir = dirname(path);
  const prefix = `${basename(path)}.basin-`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !/^[0-9a-f]{12}$/.test(name.slice(prefix.length))) continue;
    const aside = join(dir, name);
    const st = await lstat(aside).catch(() => undefined);
    if (st && Date.now() - st.mtimeMs >= ASIDE_STALE_MS) await rm(aside, { force: true });
  }
}

/** root:<reader's group>, `mode` (Basin not root: its own file). */
async function setOwner(path: string, reader: OsUser, mode: number): Promise<void> {
  if (isRoot()) await chown(path, 0, reader.gid);
  await chmod(path, mode);
}

/**
 * Whether `path` is there, a link in its last component not followed (an
 * entry of a service's directory, which may be a link to anything).
 */
export async function present(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** Whether the node's data directory is complete (a clone is renamed into place only when done). */
export const nodeExists = (layout: Layout, ref: NodeRef) =>
  present(join(layout.pgdata(ref), 'PG_VERSION'));

/** Whether the data directory is a standby's (it has standby.signal). */
export const isStandbyData = (pgdata: string) => present(join(pgdata, 'standby.signal'));

/**
 * Copies the template's stopped cluster into the node's place: a copy and a
 * rename take a fraction of the time of initdb. `cp -a` keeps the modes
 * (0700, 0600) and `chown -R` hands the copy to `owner`, the service's user
 * (which may still be in the making while the files are copied). The copy
 * is made beside its final place, in a directory only root can enter, and
 * renamed once complete, so a crash mid-copy leaves a stray staging
 * directory, never a half node.
 *
 * Each clone gets a system identifier of its own before it ever starts (it
 * had the template's, which every other clone had too: system-id.ts),
 * recorded beside the service's nodes before the node appears; a clone
 * interrupted before that is made again, with another.
 */
export async function cloneNode(
  layout: Layout,
  ref: NodeRef,
  owner: OsUser | Promise<OsUser>,
): Promise<void> {
  const instance = layout.instanceDir(ref.id);
  await mkdirIn(instance, 0o711);
  // What an interrupted clone of this node left (clones of one service are
  // serialised by the driver, so none is in progress).
  for (const name of await readdir(instance)) {
    if (name.startsWith(`.clone-${ref.node}-`)) await removeTrees([join(instance, name)]);
  }
  const staging = join(instance, `.clone-${ref.node}-${randomBytes(4).toString('hex')}`);
  await mkdirIn(staging, 0o700);
  try {
    const pgdata = join(staging, 'pgdata');
    // A clone where the file system has reflinks (XFS, btrfs), a copy elsewhere: said, not left to coreutils' default.
    await run('cp', ['-a', '--reflink=auto', layout.templatePgdata, pgdata], {
      timeoutMs: 120_000,
    });
    // Still root's alone (the staging directory is 0700): the template's files, any owner.
    const systemId = newSystemId();
    await withSafeDir(pgdata, undefined, (dir) => setSystemId(dir, systemId));
    const user = await owner;
    if (isRoot() && (await lstat(pgdata)).uid !== user.uid) await chownTree([pgdata], user);
    await recordSystemId(layout.systemIdFile(ref.id), systemId);
    await chmod(staging, 0o711);
    await rename(staging, layout.nodeDir(ref));
  } catch (err) {
    if (!(await nodeExists(layout, ref))) throw err;
  } finally {
    if (await exists(staging)) await removeTrees([staging]);
  }
}

/** The uid that owns the node's data directory, undefined without one. */
export async function nodeOwner(layout: Layout, ref: NodeRef): Promise<number | undefined> {
  try {
    return (await lstat(layout.pgdata(ref))).uid;
  } catch {
    return undefined;
  }
}

/**
 * Hands a node's files to `user`: its data directory, socket and archive
 * directories, and its stanza's. For nodes made before services had OS
 * users of their own (they ran as the template user); the server must be stopped.
 */
export async function handOverNode(layout: Layout, ref: NodeRef, user: OsUser): Promise<void> {
  const paths = [
    layout.pgdata(ref),
    layout.socketDir(ref),
    layout.archiveDir(ref.id),
    ...Object.values(layout.backupDirs(ref.id)),
  ];
  const present: string[] = [];
  for (const p of paths) if (await exists(p)) present.push(p);
  await chownTree(present, user);
}

/**
 * `chown -R` without following symbolic links (-P): coreutils walks the tree
 * by descriptors, so links planted in it change nothing outside.
 */
export async function chownTree(paths: string[], user: OsUser): Promise<void> {
  if (paths.length === 0) return;
  await run('chown', ['-R', '-P', `${user.uid}:${user.gid}`, '--', ...paths], {
    timeoutMs: 120_000,
  });
}

/**
 * Removes directory trees that a service's user may have filled with
 * anything: coreutils' `rm -rf` walks by descriptors and never follows a
 * link, even one swapped in during the walk, and stays on one file system.
 */
export async function removeTrees(paths: string[]): Promise<void> {
  if (paths.length === 0) return;
  await run('rm', ['-rf', '--one-file-system', '--', ...paths], { timeoutMs: 120_000 });
}

/** The directory beside the data directory that the server writes to (its socket's). */
export async function ensureNodeDirs(layout: Layout, ref: NodeRef, user: OsUser): Promise<void> {
  await ensureOwnedDir(layout.socketDir(ref), user);
}

export interface NodeConfigFiles {
  /** basin.conf, included last by postgresql.conf. */
  conf: string;
  hba: string;
  ident: string;
}

/** Writes the node's configuration files; returns whether any changed. */
export async function writeNodeConfig(
  pgdata: string,
  files: NodeConfigFiles,
  user: OsUser,
): Promise<boolean> {
  const wrote = await Promise.all([
    writeOwned(join(pgdata, 'basin.conf'), files.conf, user),
    writeOwned(join(pgdata, 'pg_hba.conf'), files.hba, user),
    writeOwned(join(pgdata, 'pg_ident.conf'), files.ident, user),
  ]);
  return wrote.some(Boolean);
}
