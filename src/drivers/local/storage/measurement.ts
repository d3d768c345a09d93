// One measurement of what a service (or a read replica set) holds on the
// host's disk: each node's directories (its data directory, WAL included,
// its logs and Basin's records of it; its socket directory, which its OS
// user may write to too), and the service's backup repository (its
// pgBackRest stanza's directories, and an older Basin's WAL archive).
//
// Every directory is walked with disk-usage.ts's DiskUsageWalk, a slice at
// a time, links never followed: these trees are the tenant's. What has
// been counted so far is a lower bound of what is there, so a measurement
// in progress can already tell that a service passed a threshold (the
// watch acts on it at once); only a complete one can tell that it went
// back under.

import type { StorageUsage } from '../../../domain/storage.js';
import { DiskUsageWalk } from '../metrics/disk-usage.js';

/** The directories of a target, as the layout names them. */
export interface Places {
  /** For each node: its directories. */
  nodes: string[][];
  /** The backup repository's directories (none for a replica set). */
  backups: string[];
}

interface PlaceWalk {
  /** The node's position in Places.nodes, or 'backups'. */
  place: number | 'backups';
  walk: DiskUsageWalk;
}

export class Measurement {
  private readonly walks: PlaceWalk[];
  private next = 0;

  constructor(places: Places) {
    this.walks = [
      ...places.nodes.flatMap((dirs, i) =>
        dirs.map((dir) => ({ place: i as number | 'backups', walk: new DiskUsageWalk(dir) })),
      ),
      ...places.backups.map((dir) => ({ place: 'backups' as const, walk: new DiskUsageWalk(dir) })),
    ];
  }

  get done(): boolean {
    return this.next >= this.walks.length;
  }

  /** Entries looked at so far. */
  get entries(): number {
    return this.walks.reduce((n, w) => n + w.walk.entries, 0);
  }

  /**
   * What was counted so far: `data` is the largest node's total, `backups`
   * the repository's. The totals once `done`; a lower bound before.
   */
  usage(): StorageUsage {
    const nodes = new Map<number, number>();
    let backups = 0;
    for (const { place, walk } of this.walks) {
      if (place === 'backups') backups += walk.bytes;
      else nodes.set(place, (nodes.get(place) ?? 0) + walk.bytes);
    }
    return { data: Math.max(0, ...nodes.values()), backups };
  }

  /**
   * Walks about `maxEntries` more entries, directory after directory, and
   * stops early once `now()` passes `deadline`. Resolves true when done.
   */
  async step(
    maxEntries: number,
    deadline = Infinity,
    now: () => number = () => performance.now(),
  ): Promise<boolean> {
    const limit = this.entries + maxEntries;
    while (!this.done && this.entries < limit && now() < deadline) {
      const { walk } = this.walks[this.next]!;
      try {
        if (await walk.step(limit - this.entries, deadline, now)) this.next++;
      } catch {
        // The walk leaves out what vanishes; anything else ends this directory's count.
        await walk.close();
        this.next++;
      }
    }
    return this.done;
  }

  /** Abandons the measurement and closes its directories. */
  async close(): Promise<void> {
    this.next = this.walks.length;
    await Promise.all(this.walks.map((w) => w.walk.close()));
  }
}
