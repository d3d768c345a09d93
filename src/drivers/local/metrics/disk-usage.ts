// The space a directory tree takes on disk, like `du -s`: allocated blocks,
// not apparent sizes, so sparse and preallocated files (WAL segments are
// created full size) count for what they really use.
//
// The tree is a data directory, which belongs to the service's OS user and
// so to its tenant (docs/security.md): it may hold millions of files, or
// have a directory swapped for a link to / while it is walked. So the walk
// is done a slice at a time (DiskUsageWalk.step, a bounded number of
// entries), never holds more than one directory listing open per level, and
// works through directory descriptors (/proc/self/fd/N/<name>): a name is
// looked up in the directory that was opened, never through a path that
// could lead elsewhere by the time it is used, and links are never followed.

import { constants, type Dir, type Dirent } from 'node:fs';
import { lstat, open, opendir, type FileHandle } from 'node:fs/promises';

/** lstat calls in flight at once: enough to be quick, few enough to leave libuv's threads to others. */
const PARALLEL = 8;
/** Directories deeper than this are counted but not listed (PostgreSQL's go 4 deep). */
const MAX_DEPTH = 32;
/** Hard links remembered to count once; past this many, a linked file counts its share. */
const MAX_LINKS = 100_000;

const DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** A directory being listed. */
interface Frame {
  fh: FileHandle;
  dir: Dir;
  depth: number;
  /** Subdirectories found and not walked yet (at most PARALLEL: they are walked before listing on). */
  subdirs: string[];
}

/**
 * A `du -s` of `root` that is done in slices: symbolic links are not
 * followed (a tablespace or a moved pg_wal is elsewhere); a file with several
 * hard links counts once. Files that vanish during the walk (recycled WAL,
 * temporary files) or cannot be read are left out; a missing `root` is 0.
 * Call close() to abandon a walk that is not done.
 */
export class DiskUsageWalk {
  /** Bytes allocated to what was looked at so far. */
  bytes = 0;
  /** Entries looked at so far. */
  entries = 0;
  private readonly stack: Frame[] = [];
  private readonly links = new Set<string>();
  private started = false;
  private finished = false;
  /** A step is in progress: close() leaves the closing to it. */
  private stepping = false;

  constructor(private readonly root: string) {}

  get done(): boolean {
    return this.finished;
  }

  /**
   * Looks at about `maxEntries` more entries (a batch may go PARALLEL - 1
   * over), and stops early once `now()` passes `deadline`. Resolves true
   * when the walk is complete and `bytes` is the total.
   */
  async step(
    maxEntries: number,
    deadline = Infinity,
    now: () => number = () => performance.now(),
  ): Promise<boolean> {
    this.stepping = true;
    try {
      return await this.walk(maxEntries, deadline, now);
    } finally {
      this.stepping = false;
      if (this.finished) await this.closeAll();
    }
  }

  /** Abandons the walk (at the end of a step in progress, if there is one) and closes its directories. */
  async close(): Promise<void> {
    this.finished = true;
    if (!this.stepping) await this.closeAll();
  }

  private async walk(maxEntries: number, deadline: number, now: () => number): Promise<boolean> {
    if (!this.started) await this.begin();
    const limit = this.entries + maxEntries;
    while (!this.finished && this.entries < limit && now() < deadline) {
      const top = this.stack.at(-1);
      if (top === undefined) {
        this.finished = true;
        break;
      }
      const sub = top.subdirs.shift();
      if (sub !== undefined) {
        await this.enter(top, sub);
        continue;
      }
      const batch: Dirent[] = [];
      for (let d = await top.dir.read(); d !== null; d = await top.dir.read()) {
        batch.push(d);
        if (batch.length === PARALLEL) break;
      }
      if (batch.length === 0) {
        await this.leave();
        continue;
      }
      const stats = await Promise.all(
        batch.map((d) => lstat(`/proc/self/fd/${top.fh.fd}/${d.name}`).catch(() => undefined)),
      );
      this.entries += batch.length;
      stats.forEach((st, i) => {
        if (st === undefined) return;
        if (st.isDirectory()) {
          top.subdirs.push(batch[i]!.name);
        } else if (st.nlink > 1) {
          const id = `${st.dev}:${st.ino}`;
          if (this.links.has(id)) return;
          if (this.links.size >= MAX_LINKS) {
            this.bytes += Math.round((st.blocks * 512) / st.nlink);
            return;
          }
          this.links.add(id);
        }
        this.bytes += st.blocks * 512;
      });
    }
    return this.finished;
  }

  private async closeAll(): Promise<void> {
    while (this.stack.length > 0) await this.leave();
  }

  private async begin(): Promise<void> {
    this.started = true;
    const top = await lstat(this.root).catch(() => undefined);
    if (top === undefined) {
      this.finished = true;
      return;
    }
    this.bytes += top.blocks * 512;
    if (!top.isDirectory()) {
      this.finished = true;
      return;
    }
    const frame = await openFrame(this.root, 0);
    if (frame) this.stack.push(frame);
    else this.finished = true;
  }

  /** Counts subdirectory `name` of `parent` (its blocks were counted when it was listed) and lists it next. */
  private async enter(parent: Frame, name: string): Promise<void> {
    if (parent.depth + 1 >= MAX_DEPTH) return;
    const frame = await openFrame(`/proc/self/fd/${parent.fh.fd}/${name}`, parent.depth + 1);
    if (frame) this.stack.push(frame);
  }

  private async leave(): Promise<void> {
    const frame = this.stack.pop();
    if (frame === undefined) return;
    await frame.dir.close().catch(() => {});
    await frame.fh.close().catch(() => {});
  }
}

/**
 * Opens a directory without following a link in its last component, and a
 * listing of that very directory (through its descriptor); undefined when
 * it is gone or is not a directory any more.
 */
async function openFrame(path: string, depth: number): Promise<Frame | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, DIRECTORY);
  } catch {
    return undefined;
  }
  try {
    const dir = await opendir(`/proc/self/fd/${fh.fd}`, { bufferSize: 64 });
    return { fh, dir, depth, subdirs: [] };
  } catch {
    await fh.close().catch(() => {});
    return undefined;
  }
}

/** Bytes allocated to `dir` and everything below it, walked to the end at once (see DiskUsageWalk). */
export async function diskUsageBytes(dir: string): Promise<number> {
  const walk = new DiskUsageWalk(dir);
  while (!(await walk.step(Number.MAX_SAFE_INTEGER)));
  return walk.bytes;
}
