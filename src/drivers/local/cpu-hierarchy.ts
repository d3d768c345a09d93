// Where and how the kernel bounds a PostgreSQL node's CPU (cpu-budgets.ts
// uses it): the cgroup hierarchy that has the cpu controller, the name of a
// node's cgroup, and what its limit files say. The file logic is kept here,
// apart from the driver, so that it can be unit-tested against a directory
// laid out like either hierarchy.
//
// Two layouts exist on Linux hosts:
// - cgroup v2 (unified; most current distributions, Debian bookworm among
//   them): one hierarchy at /sys/fs/cgroup; a cgroup's CPU limit is
//   `cpu.max`, "<quota> <period>" in µs, or "max <period>" for none. The
//   cpu controller must be enabled for the root's children in the root's
//   `cgroup.subtree_control` ("+cpu"); systemd usually has done so.
// - cgroup v1 (this project's development VM): one hierarchy per
//   controller, the cpu one at /sys/fs/cgroup/cpu (or a link to
//   cpu,cpuacct); the limit is `cpu.cfs_quota_us` (-1 for none) per
//   `cpu.cfs_period_us`.
// A hybrid host (v1 controllers, plus an empty v2 hierarchy at
// /sys/fs/cgroup/unified) uses v1's.
//
// Every node's cgroup is a child of the hierarchy's root, named
// `basin-<installation>-<id>-<node>`: the installation tag (16 random hex
// digits, service-users.ts) keeps two Basin installations on one host
// apart, so that neither ever lists, changes or removes the other's, and a
// child of the root competes with the host's other processes with the
// default weight, as the postmaster's own session did before (each
// postmaster is started in a session of its own). Nesting the nodes below
// one parent per installation would have made all of an installation's
// nodes weigh as much as one session under contention.

import { existsSync, readdirSync, rmdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Size } from '../../domain/types.js';
import type { Command } from './exec.js';
import type { NodeRef } from './layout.js';

/** Where cgroup file systems are mounted. */
export const CGROUP_ROOT = '/sys/fs/cgroup';
/** The period of every node's CPU quota, in µs (the kernel's default). */
export const CPU_PERIOD_US = 100_000;
/** The kernel refuses quotas under 1 ms. */
const MIN_QUOTA_US = 1_000;

/** The hierarchy whose cgroups carry the cpu controller, and the directory of its root. */
export interface CpuHierarchy {
  version: 1 | 2;
  dir: string;
}

/**
 * The host's cpu controller, where Basin can use it: cgroup v2's when
 * `root` is a unified hierarchy (the controller enabled for the root's
 * children if it is not yet), v1's at `root`/cpu otherwise. `none` says
 * why not, for the one warning at start.
 */
export async function detectCpuHierarchy(
  root: string = CGROUP_ROOT,
): Promise<CpuHierarchy | { none: string }> {
  const controllers = await readWords(join(root, 'cgroup.controllers'));
  if (controllers !== undefined) {
    if (!controllers.includes('cpu')) {
      return { none: `cgroup v2 at ${root} offers no cpu controller` };
    }
    const subtree = join(root, 'cgroup.subtree_control');
    if (!(await readWords(subtree))?.includes('cpu')) {
      await writeFile(subtree, '+cpu').catch(() => {});
      if (!(await readWords(subtree))?.includes('cpu')) {
        return {
          none: `the cpu controller could not be enabled for the cgroups below ${root} (${subtree})`,
        };
      }
    }
    return { version: 2, dir: root };
  }
  if (existsSync(join(root, 'cpu', 'cpu.cfs_quota_us')))
    return { version: 1, dir: join(root, 'cpu') };
  return {
    none: `no cgroup cpu controller at ${root} (neither cgroup v2's nor v1's, with CPU bandwidth control)`,
  };
}

/** The name of a node's cgroup, a child of the hierarchy's root. */
export function nodeCgroupName(installation: string, ref: NodeRef): string {
  return `${prefix(installation)}${ref.id}-${ref.node}`;
}

/** The node whose cgroup of this installation `name` is; undefined for any other name. */
export function parseNodeCgroupName(installation: string, name: string): NodeRef | undefined {
  if (!name.startsWith(prefix(installation))) return undefined;
  const m = /^([a-z0-9]{1,32})-(\d{1,6})$/.exec(name.slice(prefix(installation).length));
  return m ? { id: m[1]!, node: Number(m[2]) } : undefined;
}

const prefix = (installation: string) => `basin-${installation}-`;

/**
 * A size's CPU time per period (µs): `cpu_millis` × 100, so 1000 millis is
 * one CPU. A `shared` size has none: it shares the host.
 */
export function cpuQuotaUs(size: Size): number | undefined {
  if (size.shared) return undefined;
  return Math.max(MIN_QUOTA_US, Math.round((size.cpuMillis * CPU_PERIOD_US) / 1000));
}

/** The limit files of a cgroup and what each must hold for `quotaUs` (undefined: no limit), in writing order. */
export function limitFiles(version: 1 | 2, quotaUs: number | undefined): [string, string][] {
  if (version === 2) return [['cpu.max', `${quotaUs ?? 'max'} ${CPU_PERIOD_US}`]];
  return [
    ['cpu.cfs_period_us', String(CPU_PERIOD_US)],
    ['cpu.cfs_quota_us', String(quotaUs ?? -1)],
  ];
}

/**
 * The path of a process's cgroup in the hierarchy, from its
 * /proc/<pid>/cgroup: v2's line is `0::<path>`, v1's the one whose
 * controllers include cpu (`4:cpu,cpuacct:<path>`).
 */
export function cgroupOfProcess(procCgroup: string, version: 1 | 2): string | undefined {
  for (const line of procCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    const [, id, controllers, path] = m;
    if (
      version === 2 ? id === '0' && controllers === '' : controllers!.split(',').includes('cpu')
    ) {
      return path;
    }
  }
  return undefined;
}

/**
 * `cmd`, started by a root shell that first moves itself into the cgroup
 * `dir`, then execs it: the process keeps its pid (a postmaster stays the
 * one spawned), and everything it starts inherits the cgroup. The path
 * reaches the shell only as an argument. When the move fails:
 * - 'fail': the start fails, with a FATAL line in its output that the
 *   start's error quotes (postmaster.ts, startFailure): a node never runs
 *   outside its budget unnoticed;
 * - 'run anyway': it runs where it is (a backup, bounded by its priority
 *   alone then: backup-cgroup.ts).
 */
export function joiningCgroup(
  dir: string,
  cmd: Command,
  onFailure: 'fail' | 'run anyway' = 'fail',
): Command {
  return {
    file: 'sh',
    args: ['-c', onFailure === 'fail' ? JOIN : TRY_JOIN, dir, cmd.file, ...cmd.args],
  };
}

const JOIN =
  'echo $$ >"$0/cgroup.procs" || { echo "FATAL: basin: could not join the CPU cgroup $0" >&2; exit 70; }; exec "$@"';
const TRY_JOIN = 'echo $$ 2>/dev/null >"$0/cgroup.procs"; exec "$@"';

/**
 * Removes every cgroup of `installation` that holds no process, in either
 * hierarchy (for tools, tests and benchmarks that remove an installation:
 * synchronous, so that exit handlers can call it).
 */
export function removeInstallationCgroups(installation: string, root: string = CGROUP_ROOT): void {
  for (const dir of [root, join(root, 'cpu')]) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      if (parseNodeCgroupName(installation, name) === undefined) continue;
      try {
        rmdirSync(join(dir, name));
      } catch {
        // Processes still run in it.
      }
    }
  }
}

/** The words of a small file, or undefined when it cannot be read. */
async function readWords(path: string): Promise<string[] | undefined> {
  try {
    return (await readFile(path, 'utf8')).split(/\s+/).filter(Boolean);
  } catch {
    return undefined;
  }
}
