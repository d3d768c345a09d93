// A node's files on disk: its data directory, cloned from the template, its
// socket and archive directories, and the configuration files Basin writes
// into the data directory. Everything PostgreSQL reads or writes belongs to
// the PostgreSQL OS user with no access for others (PostgreSQL insists on
// 0700 for the data directory and 0600 for its key).

import { randomBytes } from 'node:crypto';
import { access, chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.js';
import type { Layout, NodeRef } from './layout.js';
import { chownTo, type OsUser } from './os-user.js';

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
  await mkdir(path, { recursive: true, mode: 0o700 });
  await chmod(path, 0o700);
  await chownTo(path, user);
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
  try {
    if ((await readFile(path, 'utf8')) === content) return false;
  } catch {
    // Not there yet.
  }
  const tmp = `${path}.basin-tmp`;
  await writeFile(tmp, content, { mode });
  await chmod(tmp, mode);
  await chownTo(tmp, user);
  await rename(tmp, path);
  return true;
}

/** Whether the node's data directory is complete (a clone is renamed into place only when done). */
export const nodeExists = (layout: Layout, ref: NodeRef) =>
  exists(join(layout.pgdata(ref), 'PG_VERSION'));

/**
 * Copies the template's stopped cluster into the node's place: a copy and a
 * rename take a fraction of the time of initdb. `cp -a` keeps ownership and
 * modes. The copy is made beside its final place and renamed, so a crash
 * mid-copy leaves a stray staging directory, never a half node.
 *
 * Clones share the template's system identifier (pg_controldata); that only
 * matters to replication between them, which never happens: each service
 * streams and archives only to its own nodes and archive.
 */
export async function cloneNode(layout: Layout, ref: NodeRef): Promise<void> {
  const instance = layout.instanceDir(ref.id);
  await mkdir(instance, { recursive: true, mode: 0o711 });
  // What an interrupted clone of this node left (clones of one service are
  // serialised by the driver, so none is in progress).
  for (const name of await readdir(instance)) {
    if (name.startsWith(`.clone-${ref.node}-`)) {
      await rm(join(instance, name), { recursive: true, force: true });
    }
  }
  const staging = join(instance, `.clone-${ref.node}-${randomBytes(4).toString('hex')}`);
  await mkdir(staging, { mode: 0o711 });
  try {
    await run('cp', ['-a', layout.templatePgdata, join(staging, 'pgdata')], { timeoutMs: 120_000 });
    await rename(staging, layout.nodeDir(ref));
  } catch (err) {
    if (!(await nodeExists(layout, ref))) throw err;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** The directories beside the data directory that the server writes to. */
export async function ensureNodeDirs(layout: Layout, ref: NodeRef, user: OsUser): Promise<void> {
  await ensureOwnedDir(layout.socketDir(ref), user);
  await ensureOwnedDir(layout.archiveDir(ref.id), user);
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
