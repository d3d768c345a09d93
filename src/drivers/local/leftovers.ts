// What a Basin killed in the middle of its work leaves in the driver's tree,
// removed at the next start. Everything Basin stages lives in directories
// named as staging (a template or CA being built, a certificate being
// issued, a clone, a base backup, a rewind's passfile, a fork's restore and the part of its
// parent's repository it restores from), published by a rename only once
// complete. Basin holds its data directory's lock (lib/data-dir-lock.ts), so
// at start no other Basin can be staging anything here: whatever is staged
// belongs to a Basin that no longer runs and goes at once, whatever its age.
// A process still working in it (a template's postmaster and its children,
// an initdb, a pg_basebackup) is killed first; the helpers Basin waits for
// die with it anyway (exec.ts, diesWithBasin). Socket directories that no
// node owns go too: a template's, and those of nodes whose directory is gone.
//
// Never removed here: what an unfinished operation resumes from (a node's
// data, a fork's restored data awaiting promotion). The engine resumes those
// operations and their own steps start over cleanly.
//
// The cgroups of this installation (node-cgroups.ts) whose node directory
// is gone, or for a pooler's and the helpers', whose service's or set's
// instance directory is (Basin killed between a removal and its cgroups'),
// go too, once empty: a cgroup that still holds processes stays.
// The network namespaces and veths of services and sets whose instance
// directory is gone are swept the same way, by ServiceNetworks.start
// (network/service-networks.ts), before it checks the host's routes.

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../lib/logger.js';
import type { NodeCgroups } from './host/cgroups/node-cgroups.js';
import type { Layout } from './layout.js';
import { exists, removeTrees } from './node/node-files.js';
import { processesUnder, signalAll } from './host/processes.js';

/** Staging names: `<directory>/<prefix>…` for each place Basin stages in. */
const ROOT_STAGING = '.staging-';
const INSTANCE_STAGING = ['.clone-', '.restore-'];
const NODE_STAGING = ['.basebackup', '.rewind'];
const BACKUP_STAGING = ['.source-'];
const TEMPLATE_SOCKETS = 'tpl-';

/** Removes every staged directory and ownerless socket directory; returns what it removed. */
export async function removeLeftovers(layout: Layout, log: Logger): Promise<string[]> {
  const staged = await stagedPaths(layout);
  const sockets = await ownerlessSockets(layout);
  const paths = [...staged, ...sockets];
  if (paths.length === 0) return [];
  // Processes first: a postmaster would recreate files in what is removed.
  for (let i = 0; ; i++) {
    const pids = await processesUnder(staged);
    if (pids.length === 0) break;
    if (i >= 100)
      throw new Error(`processes ${pids.join(', ')} keep running in ${staged.join(', ')}`);
    signalAll(pids, 'SIGKILL');
    await sleep(20);
  }
  await removeTrees(paths);
  log.info({ removed: paths }, 'removed what a stopped Basin left staged');
  return paths;
}

/** Removes the empty cgroups of this installation whose node or service no longer exists; returns their directories. */
export async function removeLeftCgroups(
  layout: Layout,
  cgroups: NodeCgroups,
  log: Logger,
): Promise<string[]> {
  const removed = await cgroups.removeLeft((unit) =>
    exists(
      typeof unit.part === 'number'
        ? layout.nodeDir({ id: unit.id, node: unit.part })
        : layout.instanceDir(unit.id),
    ),
  );
  if (removed.length > 0) log.info({ removed }, 'removed the cgroups of nodes that are gone');
  return removed;
}

async function stagedPaths(layout: Layout): Promise<string[]> {
  const out = matching(layout.root, await list(layout.root), [ROOT_STAGING]);
  for (const id of await list(layout.instancesDir)) {
    const instance = layout.instanceDir(id);
    const names = await list(instance);
    out.push(...matching(instance, names, INSTANCE_STAGING));
    for (const node of names.filter((n) => /^\d+$/.test(n))) {
      const dir = join(instance, node);
      out.push(...matching(dir, await list(dir), NODE_STAGING));
    }
  }
  for (const id of await list(layout.backupsDir)) {
    const dir = layout.backupDir(id);
    out.push(...matching(dir, await list(dir), BACKUP_STAGING));
  }
  return out;
}

/** `s/tpl-*`, and `s/<id>-<node>` whose node directory does not exist. */
async function ownerlessSockets(layout: Layout): Promise<string[]> {
  const out: string[] = [];
  for (const name of await list(layout.socketsDir)) {
    const node = /^([a-z0-9]+)-(\d+)$/.exec(name);
    const owned = node && (await exists(layout.nodeDir({ id: node[1]!, node: Number(node[2]) })));
    if (name.startsWith(TEMPLATE_SOCKETS) || !owned) out.push(join(layout.socketsDir, name));
  }
  return out;
}

function matching(dir: string, names: string[], prefixes: string[]): string[] {
  return names.filter((n) => prefixes.some((p) => n.startsWith(p))).map((n) => join(dir, n));
}

async function list(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}
