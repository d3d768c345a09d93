// What a host has and has free, as it reports them: CPUs, memory and the
// disk of its data directory.

import { statfsSync } from 'node:fs';
import { availableParallelism, freemem, loadavg, totalmem } from 'node:os';
import type { HostCapacity, HostUsage } from '../domain/hosts.js';

export function hostCapacity(dataDir: string): HostCapacity {
  const fs = statfsSync(dataDir);
  return { cpus: availableParallelism(), memoryBytes: totalmem(), diskBytes: fs.blocks * fs.bsize };
}

export function hostUsage(dataDir: string): HostUsage {
  const fs = statfsSync(dataDir);
  return {
    memoryFreeBytes: freemem(),
    diskFreeBytes: fs.bavail * fs.bsize,
    load1: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  };
}

/** The wire's names (the control plane's host listener). */
export const wireCapacity = (c: HostCapacity) => ({
  cpus: c.cpus,
  memory_bytes: c.memoryBytes,
  disk_bytes: c.diskBytes,
});
export const wireUsage = (u: HostUsage) => ({
  memory_free_bytes: u.memoryFreeBytes,
  disk_free_bytes: u.diskFreeBytes,
  load1: u.load1,
});
