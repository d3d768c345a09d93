// Files in directories that a service's OS user owns (its data directory,
// socket and archive directories) are under the control of that service's
// tsdbadmin, who can run programs as that user (COPY … TO PROGRAM, see
// docs/security.md). Basin runs as root, so it must never trust what it
// finds there: a symbolic link to another service's files or to
// /etc/shadow, a FIFO that blocks a read forever, /dev/zero behind a file
// name, a file swapped between a check and a use. These helpers
// - never follow a symbolic link in the last component (O_NOFOLLOW), never
//   block on a FIFO (O_NONBLOCK), and create only new files (O_EXCL);
// - check what they opened on the open descriptor (a regular file, not too
//   big, owned by whom it must be), so no swap after the check matters;
// - set the owner and mode through that descriptor, never by path.
// The directories above these files belong to root, so the path up to
// them is Basin's own.

import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { isRoot, type OsUser } from '../os-user.js';

/** What a file in a service's directory turned out to be instead of what was expected. */
export class UnsafeFileError extends Error {
  readonly code = 'EUNSAFE';
  constructor(path: string, why: string) {
    super(`${path}: ${why}`);
    this.name = 'UnsafeFileError';
  }
}

export interface OpenChecks {
  /** The file must belong to this uid (the service's OS user: the file is then theirs to read anyway). */
  owner?: number;
  /** The name errors give the file (safe-dir.ts opens files by a descriptor's path). */
  shown?: string;
}

/** The flags every read of a service's file opens with: no link, no waiting on a FIFO, no terminal. */
export const READ_FLAGS =
  constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/**
 * Opens `path` for reading: a regular file reached without a symbolic link
 * in its last component, owned by `checks.owner` when given. Rejects with
 * the open's error (ENOENT, ELOOP for a link…) or an UnsafeFileError.
 */
export async function openRegularFile(path: string, checks: OpenChecks = {}): Promise<FileHandle> {
  return openChecked(path, READ_FLAGS, checks);
}

/**
 * Opens `path` with `flags` (which must hold O_NOFOLLOW) and checks on the
 * descriptor that it is a regular file, owned by `checks.owner` when given.
 */
export async function openChecked(
  path: string,
  flags: number,
  checks: OpenChecks = {},
): Promise<FileHandle> {
  const fh = await open(path, flags);
  try {
    const st = await fh.stat();
    const shown = checks.shown ?? path;
    if (!st.isFile()) throw new UnsafeFileError(shown, 'not a regular file');
    checkOwner(shown, st.uid, checks.owner);
    return fh;
  } catch (err) {
    await fh.close();
    throw err;
  }
}

/** Throws an UnsafeFileError unless `uid` is `owner` (or no owner is expected). */
export function checkOwner(shown: string, uid: number, owner: number | undefined): void {
  if (owner !== undefined && uid !== owner) {
    throw new UnsafeFileError(shown, `owned by uid ${uid}, not ${owner}`);
  }
}

/**
 * The text of a small regular file (at most `maxBytes`, 1 MiB by default),
 * read as openRegularFile opens it. Bigger files are refused, not truncated.
 */
export async function readSmallFile(
  path: string,
  checks: OpenChecks & { maxBytes?: number } = {},
): Promise<string> {
  const fh = await openRegularFile(path, checks);
  try {
    return await readAllBounded(fh, checks.shown ?? path, checks.maxBytes ?? 1024 * 1024);
  } finally {
    await fh.close();
  }
}

/** The text of an open file, at most `maxBytes` (bigger files are refused, not truncated). */
export async function readAllBounded(
  fh: FileHandle,
  shown: string,
  maxBytes: number,
): Promise<string> {
  // One byte more than allowed tells a file that is too big (or growing).
  const buf = Buffer.allocUnsafe(maxBytes + 1);
  let len = 0;
  for (;;) {
    const { bytesRead } = await fh.read(buf, len, buf.length - len, len);
    if (bytesRead === 0) break;
    len += bytesRead;
    if (len > maxBytes) throw new UnsafeFileError(shown, `larger than ${maxBytes} bytes`);
  }
  return buf.toString('utf8', 0, len);
}

/**
 * Writes `content` to `path`, owned by `user` with `mode`: into a new file
 * with a random name beside it (O_EXCL: never an existing file or link),
 * then renamed over `path` (a rename replaces a link, it does not follow it),
 * so readers never see half a file.
 */
export async function writeFileAs(
  path: string,
  content: string | Buffer,
  user: OsUser,
  mode: number,
): Promise<void> {
  const tmp = `${path}.basin-${randomBytes(6).toString('hex')}`;
  const fh = await open(
    tmp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    mode,
  );
  try {
    try {
      await fh.chmod(mode);
      if (isRoot()) await fh.chown(user.uid, user.gid);
      await fh.writeFile(content);
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
