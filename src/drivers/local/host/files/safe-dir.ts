// Root inside a tree that a service's OS user can write (its data
// directory, its log directory, its pgBackRest repository), without ever
// following a link the tenant planted there, in the last component or in
// any other, even one swapped in while Basin is at work (docs/security.md,
// "Basin (root) in directories a service controls").
//
// Node has no openat(2), but `/proc/self/fd/<fd>/<name>` resolves `<fd>` as
// a magic link to the very directory that descriptor holds (its inode, not
// its path: renaming the directory, or putting a link in its place, changes
// nothing), and O_NOFOLLOW refuses `<name>` when it is a link. Opening each
// component that way, from a directory opened the same way, is openat(2)
// with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, one component at a time; a
// name is one component (no `/`, never `.` or `..`). Each opened entry is
// then checked on its descriptor (fstat): a directory or a regular file, of
// the expected owner. So whatever root reads here, the tenant could have
// read itself: a file of its uid, reached from its own directory by names
// alone (fs.protected_hardlinks=1 keeps it from linking files it does not
// own; the owner check catches the rest).
//
// The root of a walk is opened by path with O_NOFOLLOW: every component
// above its last must be root's (the layout's directories are), so that
// only the last could be a tenant's entry, and that one is not followed.
// All of it is async fs calls (libuv's threads), a bounded number at once.

import { constants, type Dirent } from 'node:fs';
import { lstat, open, opendir, readdir, readlink, type FileHandle } from 'node:fs/promises';
import {
  checkOwner,
  openChecked,
  READ_FLAGS,
  readAllBounded,
  UnsafeFileError,
  type OpenChecks,
} from './safe-fs.js';

const DIRECTORY_FLAGS =
  constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** A directory held open by its descriptor, whose entries are opened through it (see the top of this file). */
export class SafeDir {
  private closed = false;

  private constructor(
    readonly fh: FileHandle,
    /** Its path as it was reached, for messages only: never opened again. */
    readonly shown: string,
    /** The uid every entry opened through it must belong to (none: any). */
    readonly owner: number | undefined,
  ) {}

  /**
   * Opens the directory `path`, not following a link in its last component
   * (those above must be root's), owned by `owner` when given. Rejects with
   * ENOENT when it is not there, an UnsafeFileError when it is a link,
   * not a directory, or someone else's.
   */
  static async open(path: string, owner?: number): Promise<SafeDir> {
    return SafeDir.openAt(path, path, owner);
  }

  /** `path` opened as a directory (see open), shown as `shown`. */
  private static async openAt(
    path: string,
    shown: string,
    owner: number | undefined,
  ): Promise<SafeDir> {
    let fh: FileHandle;
    try {
      fh = await open(path, DIRECTORY_FLAGS);
    } catch (err) {
      // O_DIRECTORY | O_NOFOLLOW answers ENOTDIR for a link as for a file.
      if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') {
        throw new UnsafeFileError(
          shown,
          'not a directory (a file, or a symbolic link: not followed)',
        );
      }
      throw explained(err, shown);
    }
    try {
      const st = await fh.stat();
      if (!st.isDirectory()) throw new UnsafeFileError(shown, 'not a directory');
      checkOwner(shown, st.uid, owner);
      return new SafeDir(fh, shown, owner);
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /**
   * A directory already open as `fh` (a walk that opened an entry before
   * knowing what it is); its owner was checked by the caller.
   */
  static adopt(fh: FileHandle, shown: string, owner: number | undefined): SafeDir {
    return new SafeDir(fh, shown, owner);
  }

  /** The path that reaches entry `name` through this directory's descriptor. */
  at(name: string): string {
    if (this.closed) throw new Error(`${this.shown} is closed`);
    if (name === '' || name === '.' || name === '..' || /[/\0]/.test(name)) {
      throw new UnsafeFileError(`${this.shown}/${name}`, 'not a single name');
    }
    return `/proc/self/fd/${this.fh.fd}/${name}`;
  }

  /** How entry `name` is named in messages. */
  show(name: string): string {
    return `${this.shown}/${name}`;
  }

  /** Subdirectory `name`, opened as open() opens a directory. */
  async dir(name: string): Promise<SafeDir> {
    return SafeDir.openAt(this.at(name), this.show(name), this.owner);
  }

  /**
   * The directory reached by `names`, one component at a time (the ones in
   * between are closed); this one for no names.
   */
  async dirPath(names: readonly string[]): Promise<SafeDir> {
    const [first, ...rest] = names;
    if (first === undefined) return this;
    let dir = await this.dir(first);
    for (const name of rest) {
      const above = dir;
      dir = await above.dir(name).finally(() => above.close());
    }
    return dir;
  }

  /** Regular file `name`, open for reading (see safe-fs.ts openRegularFile). */
  async file(name: string, checks: OpenChecks = {}): Promise<FileHandle> {
    return this.fileWith(name, READ_FLAGS, checks);
  }

  /** Regular file `name`, open for reading and writing in place (Basin's own changes to a staged copy). */
  async fileForUpdate(name: string): Promise<FileHandle> {
    return this.fileWith(name, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK, {});
  }

  private async fileWith(name: string, flags: number, checks: OpenChecks): Promise<FileHandle> {
    const shown = this.show(name);
    try {
      return await openChecked(this.at(name), flags, {
        owner: checks.owner ?? this.owner,
        shown,
      });
    } catch (err) {
      throw explained(err, shown);
    }
  }

  /** The text of regular file `name`, at most `maxBytes` (bigger is refused, not cut). */
  async readSmall(name: string, maxBytes = 1024 * 1024): Promise<string> {
    const fh = await this.file(name);
    try {
      return await readAllBounded(fh, this.show(name), maxBytes);
    } finally {
      await fh.close();
    }
  }

  /** Whether entry `name` is there (a link counts: it is not followed). */
  async has(name: string): Promise<boolean> {
    try {
      await lstat(this.at(name));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw explained(err, this.show(name));
    }
  }

  /** The target of symbolic link `name` (never followed). */
  async readlink(name: string): Promise<string> {
    try {
      return await readlink(this.at(name));
    } catch (err) {
      throw explained(err, this.show(name));
    }
  }

  /** The entries, with the types the listing gives (a hint only: what an entry is, opening it says). */
  async list(): Promise<Dirent[]> {
    return readdir(this.self(), { withFileTypes: true });
  }

  /** At most `max` entry names, in the order the file system gives them. */
  async names(max = Infinity): Promise<string[]> {
    const out: string[] = [];
    let seen = 0;
    for await (const entry of await opendir(this.self(), { bufferSize: 64 })) {
      if (++seen > max) break;
      out.push(entry.name);
    }
    return out;
  }

  /** The path of this very directory, through its descriptor. */
  private self(): string {
    if (this.closed) throw new Error(`${this.shown} is closed`);
    return `/proc/self/fd/${this.fh.fd}`;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.fh.close().catch(() => {});
  }
}

/**
 * Opens the directory `root` (see SafeDir.open), runs `work` on it, and
 * closes it, whatever happens.
 */
export async function withSafeDir<T>(
  root: string,
  owner: number | undefined,
  work: (dir: SafeDir) => Promise<T>,
): Promise<T> {
  const dir = await SafeDir.open(root, owner);
  try {
    return await work(dir);
  } finally {
    await dir.close();
  }
}

/**
 * The text of the file reached from the directory `root` by `names` (the
 * last is the file), every component opened without following a link and
 * owned by `owner`; at most `maxBytes`.
 */
export async function readBeneath(
  root: string,
  names: readonly string[],
  owner: number | undefined,
  maxBytes: number,
): Promise<string> {
  const file = names.at(-1);
  if (file === undefined) throw new Error('readBeneath needs a file name');
  return withSafeDir(root, owner, async (top) => {
    const dir = await top.dirPath(names.slice(0, -1));
    try {
      return await dir.readSmall(file, maxBytes);
    } finally {
      if (dir !== top) await dir.close();
    }
  });
}

/** Whether the entry reached from `root` by `names` is there, without following a link on the way. */
export async function existsBeneath(
  root: string,
  names: readonly string[],
  owner: number | undefined,
): Promise<boolean> {
  const last = names.at(-1);
  if (last === undefined) throw new Error('existsBeneath needs a name');
  try {
    return await withSafeDir(root, owner, async (top) => {
      const dir = await top.dirPath(names.slice(0, -1));
      try {
        return await dir.has(last);
      } finally {
        if (dir !== top) await dir.close();
      }
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * An error of an open through /proc/self/fd, said of the path it was
 * reached by: a link that O_NOFOLLOW refused (ELOOP) becomes an
 * UnsafeFileError; other system errors keep their code, with the shown
 * path in their message instead of the descriptor's.
 */
export function explained(err: unknown, shown: string): Error {
  if (err instanceof UnsafeFileError) return err;
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'ELOOP') return new UnsafeFileError(shown, 'a symbolic link (not followed)');
  if (typeof e.code !== 'string') return err as Error;
  // "ENOENT: no such file or directory, open '/proc/self/fd/21/x'"
  const said = e.message.replace(/, \w+ '[^']*'(?: -> '[^']*')?$/, '');
  const out: NodeJS.ErrnoException = new Error(`${shown}: ${said}`);
  out.code = e.code;
  return out;
}
