// How much a node's private /tmp, /var/tmp, /dev/shm and /run/lock hold.
// confine.ts mounts them (tmpfs named `basin-private`) in the mount
// namespace of the node's postmaster, which every process of the node
// shares; the pages written there are charged to the node's memory cgroup
// but belong to no process, so no kill at the bound frees them (oom-watch.ts
// stops such a node). Read as root through one of the node's processes,
// found in its cgroup (where the tenant cannot place another's): its
// `/proc/<pid>/mountinfo` names the namespace's mounts, and statfs of
// `/proc/<pid>/root/<dir>` measures each one. No private directories (the
// host does not allow them, or `--service-private-tmp off`): 0.

import { readFile, statfs } from 'node:fs/promises';

/** The source name confine.ts gives each private tmpfs. */
export const PRIVATE_TMPFS_SOURCE = 'basin-private';

/** The bytes used in the private tmpfs of the namespace `pid` lives in; undefined when it is gone. */
export async function privateTmpBytes(pid: number): Promise<number | undefined> {
  let mountinfo: string;
  try {
    mountinfo = await readFile(`/proc/${pid}/mountinfo`, 'utf8');
  } catch {
    return undefined;
  }
  let bytes = 0;
  for (const point of privateMountPoints(mountinfo)) {
    try {
      const fs = await statfs(`/proc/${pid}/root${point}`);
      bytes += (fs.blocks - fs.bfree) * fs.bsize;
    } catch {
      return undefined; // the process ended meanwhile
    }
  }
  return bytes;
}

/**
 * The mount points of the private tmpfs in a mountinfo text (proc(5): the
 * fifth field is the mount point, the fields after ` - ` the type and the
 * source). A mount point with a space in it is written `\040`: none of
 * confine.ts's has one.
 */
export function privateMountPoints(mountinfo: string): string[] {
  const points: string[] = [];
  for (const line of mountinfo.split('\n')) {
    const [mine, theirs] = line.split(' - ');
    if (!mine || !theirs) continue;
    const [type, source] = theirs.split(' ');
    const point = mine.split(' ')[4];
    if (type === 'tmpfs' && source === PRIVATE_TMPFS_SOURCE && point) points.push(point);
  }
  return points;
}
