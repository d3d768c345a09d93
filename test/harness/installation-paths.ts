// Where a Basin installation keeps a service's things on this host, from
// its data directory and the service's id: what the benchmarks read beside
// the API (a node's pgdata and socket, its backup configuration, its
// network namespace, its CPU cgroup). An operator finds them the same way:
// the data directory's layout is documented (src/drivers/local/layout.ts),
// the installation tag is in `<data-dir>/local/installation`, and names
// derive from the tag and the service's id. It is the one place outside
// src/ that the benchmarks take these from, so that bench/ imports nothing
// of the local driver (.dependency-cruiser.mjs, "bench-through-harness"):
// when the driver moves a file, this module changes, not every benchmark.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CpuHierarchy,
  detectCpuHierarchy,
  nodeCgroupName,
} from '../../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { namespaceName, namespacePath } from '../../src/drivers/local/network/addresses.js';

export type { CpuHierarchy };

/** A service's files and names in the installation at `dataDir`. */
export class InstallationPaths {
  private readonly layout: Layout;

  constructor(readonly dataDir: string) {
    this.layout = new Layout(dataDir);
  }

  /** The CA certificate clients verify the installation's services with. */
  caCert(): string {
    return this.layout.caCert;
  }

  /** The installation's tag, which its OS users, cgroups and namespaces are named by. */
  tag(): string {
    return readFileSync(this.layout.installationFile, 'utf8').trim();
  }

  /** The indexes of a service's nodes that have a directory (0: its first primary). */
  nodes(serviceId: string): number[] {
    return readdirSync(this.layout.instanceDir(serviceId))
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .sort((a, b) => a - b);
  }

  /** A node's PostgreSQL data directory (postmaster.pid, standby.signal). */
  pgdata(serviceId: string, node = 0): string {
    return this.layout.pgdata({ id: serviceId, node });
  }

  /** The directory of a node's Unix socket (root's way in as `postgres`). */
  socketDir(serviceId: string, node = 0): string {
    return this.layout.socketDir({ id: serviceId, node });
  }

  /** A service's pgBackRest configuration, its side. */
  backupConf(serviceId: string): string {
    return this.layout.backupConf(serviceId);
  }

  /** A service's repository directory, where it has a repository server. */
  repository(serviceId: string): string {
    return this.layout.repository(serviceId).repo;
  }

  /** Where the installation's HAProxy processes keep their files (their command lines name it). */
  haproxyDir(): string {
    return join(this.layout.root, 'haproxy');
  }

  /** A service's network namespace: its name (`ip -n`) and file (`nsenter --net=`). */
  namespace(serviceId: string): { name: string; path: string } {
    const name = namespaceName(this.tag(), serviceId);
    return { name, path: namespacePath(name) };
  }

  /**
   * The host's CPU hierarchy and the cgroup directories of a service's
   * `nodes` in it, or why the host has none.
   */
  async nodeCpuCgroups(
    serviceId: string,
    nodes: readonly number[],
  ): Promise<{ hierarchy: CpuHierarchy; dirs: string[] } | { none: string }> {
    const found = await detectCpuHierarchy();
    if ('none' in found) return found;
    const tag = this.tag();
    return {
      hierarchy: found,
      dirs: nodes.map((node) => join(found.dir, nodeCgroupName(tag, { id: serviceId, node }))),
    };
  }
}
