// The space a directory tree takes on disk, like `du -s`: allocated blocks,
// not apparent sizes, so sparse and preallocated files (WAL segments are
// created full size) count for what they really use.

import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** lstat calls in flight at once: enough to be quick, few enough to leave libuv's threads to others. */
const PARALLEL = 16;

/**
 * Bytes allocated to `dir` and everything below it. Symbolic links are not
 * followed (a tablespace or a moved pg_wal is elsewhere); a file with several
 * hard links counts once. Files that vanish during the walk (recycled WAL,
 * temporary files) or cannot be read are left out; a missing `dir` is 0.
 */
export async function diskUsageBytes(dir: string): Promise<number> {
  const top = await lstat(dir).catch(() => undefined);
  if (top === undefined) return 0;
  if (!top.isDirectory()) return top.blocks * 512;
  const seen = new Set<string>();
  let total = top.blocks * 512;
  // Directories still to list; one at a time, its entries PARALLEL at a time.
  const pending = [dir];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const parent = next;
    const names = await readdir(parent).catch(() => [] as string[]);
    for (let i = 0; i < names.length; i += PARALLEL) {
      const batch = names.slice(i, i + PARALLEL).map(async (name) => {
        const path = join(parent, name);
        const stat = await lstat(path).catch(() => undefined);
        if (stat === undefined) return 0;
        if (stat.isDirectory()) {
          pending.push(path);
        } else if (stat.nlink > 1) {
          const id = `${stat.dev}:${stat.ino}`;
          if (seen.has(id)) return 0;
          seen.add(id);
        }
        return stat.blocks * 512;
      });
      for (const size of await Promise.all(batch)) total += size;
    }
  }
  return total;
}
