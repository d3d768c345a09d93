// Root copying out of a tree a service's OS user can write (a parent's data
// directory for a NOW fork, the part of its pgBackRest repository a
// LAST_SNAPSHOT or PITR fork restores) into a directory only root can
// enter, as `cp -R -P` did but through safe-dir.ts: every entry is opened
// from its directory's descriptor without following a link, and checked on
// its own descriptor before a byte is copied (docs/security.md, Forks).
//
// - Directories and regular files of the expected owner are copied; the
//   bytes only: no owner, no mode beyond 0700/0600, no ACL or extended
//   attribute, hard links as separate files. A file's content is copied
//   from the checked descriptor itself (`/proc/self/fd/N`), with
//   COPYFILE_FICLONE: a reflink on XFS and btrfs, an in-kernel copy
//   (copy_file_range) elsewhere.
// - Symbolic links are recreated as links, never followed, where the
//   caller says PostgreSQL keeps its own (pg_tblspc); anywhere else a link
//   is refused, and the copy fails naming it.
// - Anything else (a FIFO, a socket, a device, a file or directory of
//   another uid, a tree deeper than MAX_DEPTH) is refused the same way: in
//   a data directory or a repository, PostgreSQL and pgBackRest make none,
//   so one is the tenant's doing, and a copy without it would be a copy
//   with a hole.
// - Entries that vanish while they are copied are skipped when the caller
//   says so (a running server drops and recycles files; the WAL replayed
//   over the copy makes up for them).
//
// Off the event loop as the rest of the driver's file work: async calls on
// libuv's threads, at most FILES_IN_FLIGHT file copies at once (each holds
// one thread for the length of its file), so that the other tenants' reads
// still find threads free.

import { constants, type Dirent } from 'node:fs';
import { chmod, copyFile, mkdir, open, symlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { explained, SafeDir } from './safe-dir.js';
import { checkOwner, READ_FLAGS, UnsafeFileError } from './safe-fs.js';

/** File copies in flight at once. */
const FILES_IN_FLIGHT = 2;
/** PostgreSQL's deepest is 4 (pg_tblspc/<oid>/<version>/<db>/); a pgBackRest backup set's ~8. */
const MAX_DEPTH = 16;

export interface CopyOptions {
  /** The uid every directory and file copied must belong to (undefined: Basin not root, its own). */
  owner: number | undefined;
  /** Whether a link at `rel` (relative to the copy's source directory) is recreated; refused otherwise. */
  keepLink?: (rel: string) => boolean;
  /** Entries that vanish during the copy are skipped instead of failing it. */
  vanishedOk?: boolean;
  signal?: AbortSignal;
}

/**
 * Copies the entries `names` of `from` (files, directories with all they
 * hold, links where kept) into the existing directory `dest`, of root's, as
 * the top of this file says. Rejects with an UnsafeFileError naming the
 * first entry refused, a system error, or the signal's reason; what was
 * copied by then stays in `dest` (the caller's staging, removed by it).
 */
export async function copyEntries(
  from: SafeDir,
  names: readonly string[],
  dest: string,
  options: CopyOptions,
): Promise<void> {
  const copier = new Copier(options);
  // The listing says which are files, to copy in parallel; what a name is
  // when it is opened decides (a name missing from it is opened, and so
  // found missing, or there after all).
  const listed = new Map((await from.list()).map((d) => [d.name, d]));
  const entries = names.map((name) => listed.get(name) ?? name);
  await copier.entries(from, entries, dest, '', 0);
}

/** An entry to copy: as a listing gave it (its type a hint), or a bare name. */
type Entry = Dirent | string;

class Copier {
  constructor(private readonly o: CopyOptions) {}

  /** Files in flight, over the whole copy. */
  private running = 0;
  private readonly freed: (() => void)[] = [];

  /**
   * Copies `entries` of `dir` into `dest`: directories here, one after the
   * other; files in the background, FILES_IN_FLIGHT at most, all of this
   * directory's done (or failed) before it returns, as they are opened
   * through `dir`, which the caller then closes.
   */
  async entries(dir: SafeDir, entries: readonly Entry[], dest: string, rel: string, depth: number) {
    const files: Promise<void>[] = [];
    let failure: { error: unknown } | undefined;
    try {
      for (const entry of entries) {
        this.o.signal?.throwIfAborted();
        if (failure) break;
        const name = typeof entry === 'string' ? entry : entry.name;
        const where = { dest: join(dest, name), rel: rel === '' ? name : `${rel}/${name}` };
        if (typeof entry !== 'string' && entry.isFile()) {
          await this.slot();
          const copy = this.file(dir, name, where).finally(() => this.release());
          copy.catch((error: unknown) => (failure ??= { error }));
          files.push(copy);
        } else {
          await this.entry(dir, name, where, depth);
        }
      }
    } finally {
      await Promise.allSettled(files);
    }
    if (failure) throw failure.error;
  }

  /** A file the listing said is one: opened, checked, copied. */
  private async file(dir: SafeDir, name: string, where: Where): Promise<void> {
    const fh = await this.open(dir, name, where);
    if (fh === undefined) return;
    try {
      const st = await fh.stat();
      checkOwner(dir.show(name), st.uid, this.o.owner);
      if (!st.isFile()) throw new UnsafeFileError(dir.show(name), 'not a regular file (any more)');
      await copyFileOut(fh, st.mode, where.dest);
    } finally {
      await fh.close();
    }
  }

  /** Anything else: what it is when opened decides. */
  private async entry(dir: SafeDir, name: string, where: Where, depth: number) {
    const shown = dir.show(name);
    const fh = await this.open(dir, name, where);
    if (fh === undefined) return;
    let handedOver = false;
    try {
      const st = await fh.stat();
      checkOwner(shown, st.uid, this.o.owner);
      if (st.isDirectory()) {
        if (depth + 1 >= MAX_DEPTH) throw new UnsafeFileError(shown, `deeper than ${MAX_DEPTH}`);
        const sub = SafeDir.adopt(fh, shown, this.o.owner);
        handedOver = true;
        try {
          await mkdir(where.dest, { mode: 0o700 });
          await this.entries(sub, await sub.list(), where.dest, where.rel, depth + 1);
        } finally {
          await sub.close();
        }
      } else if (st.isFile()) {
        await this.slot();
        try {
          await copyFileOut(fh, st.mode, where.dest);
        } finally {
          this.release();
        }
      } else {
        throw new UnsafeFileError(shown, 'not a regular file or directory');
      }
    } finally {
      if (!handedOver) await fh.close();
    }
  }

  /**
   * Entry `name` of `dir`, opened without following it; undefined when it
   * was a link (recreated where kept, else refused) or vanished (if that
   * is fine).
   */
  private async open(dir: SafeDir, name: string, where: Where): Promise<FileHandle | undefined> {
    try {
      return await open(dir.at(name), READ_FLAGS);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && this.o.vanishedOk) return undefined;
      if (code === 'ELOOP') {
        await this.link(dir, name, where);
        return undefined;
      }
      // A socket cannot be opened (ENXIO): refused as any other special file.
      if (code === 'ENXIO') {
        throw new UnsafeFileError(dir.show(name), 'not a regular file or directory');
      }
      throw explained(err, dir.show(name));
    }
  }

  /** A link: recreated where kept, else refused. */
  private async link(dir: SafeDir, name: string, where: Where) {
    if (!this.o.keepLink?.(where.rel)) {
      throw new UnsafeFileError(dir.show(name), 'a symbolic link (not followed)');
    }
    let target: string;
    try {
      target = await dir.readlink(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && this.o.vanishedOk) return;
      throw err;
    }
    await symlink(target, where.dest);
  }

  /** Waits until fewer than FILES_IN_FLIGHT files are being copied, and takes a place. */
  private async slot() {
    while (this.running >= FILES_IN_FLIGHT) {
      await new Promise<void>((resolve) => this.freed.push(resolve));
    }
    this.running++;
  }

  private release() {
    this.running--;
    this.freed.shift()?.();
  }
}

interface Where {
  /** Where the entry goes. */
  dest: string;
  /** Its path relative to the copy's source directory (for CopyOptions.keepLink). */
  rel: string;
}

/**
 * The content of the checked, open file `fh` (of mode `mode`) into a new
 * file `dest`, 0600: copyFile gives the new file the source's mode, setuid
 * bits and all, so any other mode is taken away (before anyone but root
 * could reach it: the destination is root's alone). PostgreSQL's and
 * pgBackRest's files are 0600 already, which spares a call per file.
 */
async function copyFileOut(fh: FileHandle, mode: number, dest: string): Promise<void> {
  await copyFile(
    `/proc/self/fd/${fh.fd}`,
    dest,
    constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE,
  );
  if ((mode & 0o7777) !== 0o600) await chmod(dest, 0o600);
}
