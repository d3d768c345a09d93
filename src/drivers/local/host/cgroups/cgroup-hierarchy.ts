// Where and how the kernel bounds what Basin runs for a tenant
// (node-cgroups.ts uses it): the cgroup hierarchies that carry the cpu,
// memory and pids controllers, the names of Basin's cgroups, and what their
// limit files say. The file logic is kept here, apart from the driver, so
// that it can be unit-tested against a directory laid out like either
// hierarchy.
//
// Two layouts exist on Linux hosts:
// - cgroup v2 (unified; most current distributions, Debian bookworm among
//   them): one hierarchy at /sys/fs/cgroup, one cgroup holding every
//   controller. The controllers must be enabled for the root's children in
//   the root's `cgroup.subtree_control` ("+cpu +memory +pids"); systemd
//   usually has done so. Limits: `cpu.max`, `memory.max`,
//   `memory.swap.max`, `pids.max`; kills: `memory.events`.
// - cgroup v1 (this project's development VM): one hierarchy per
//   controller, at /sys/fs/cgroup/cpu (or a link to cpu,cpuacct),
//   /sys/fs/cgroup/memory and /sys/fs/cgroup/pids; a process is in one
//   cgroup of each. Limits: `cpu.cfs_quota_us` per `cpu.cfs_period_us`,
//   `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes` (memory and
//   swap together; only with swap accounting), `pids.max`; kills:
//   `memory.oom_control`.
// A hybrid host (v1 controllers, plus an empty v2 hierarchy at
// /sys/fs/cgroup/unified) uses v1's.
//
// What gets a cgroup (a "unit"), named `basin-<installation>-<id>-<part>`:
// each PostgreSQL node (`<part>` its index: every controller), and per
// service or read replica set its PgBouncer (`pooler`), the helpers
// Basin runs as its OS user (`tasks`: backups, restores, base backups,
// rewinds) and a service's repository user's processes (`repo`: its
// pgBackRest server, and the backups and expiry run as that user), those
// three in the memory and pids hierarchies (on v2, where
// one cgroup has every controller, with a CPU weight of their own). The
// installation tag (16 random hex digits, service-users.ts) keeps two Basin
// installations on one host apart, so that neither ever lists, changes or
// removes the other's. Every unit is a child of the hierarchy's root, so
// that each node competes for CPU with the host's other processes with
// the default weight, as the postmaster's own session did before (each
// postmaster is started in a session of its own); but where a hierarchy
// has the memory controller, the nodes of `shared` sizes are children of
// one parent, `basin-<installation>-shared`, whose memory bound they share.

import { existsSync, readdirSync, rmdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Where cgroup file systems are mounted. */
export const CGROUP_ROOT = '/sys/fs/cgroup';
/** The period of every node's CPU quota, in µs (the kernel's default). */
export const CPU_PERIOD_US = 100_000;
/** The kernel refuses quotas under 1 ms. */
const MIN_QUOTA_US = 1_000;

export type Controller = 'cpu' | 'memory' | 'pids';
export const CONTROLLERS: readonly Controller[] = ['cpu', 'memory', 'pids'];

/**
 * A hierarchy Basin makes cgroups in: cgroup v2's one (every controller
 * enabled there), or one of v1's (one controller each).
 */
export interface Hierarchy {
  version: 1 | 2;
  dir: string;
  controllers: Controller[];
}

/** The hierarchy that has the cpu controller (the CPU budgets' name for it). */
export type CpuHierarchy = Hierarchy;

/** What the host offers: the hierarchies, and why each controller that is not there is not. */
export interface DetectedCgroups {
  hierarchies: Hierarchy[];
  missing: { controller: Controller; why: string }[];
}

/** What each v1 controller's hierarchy has in its root, to be told apart from an empty mount point. */
const V1_MARKER: Record<Controller, string> = {
  cpu: 'cpu.cfs_quota_us',
  memory: 'memory.limit_in_bytes',
  pids: 'cgroup.procs',
};

/**
 * The host's cpu, memory and pids controllers, where Basin can use them:
 * cgroup v2's when `root` is a unified hierarchy (each controller enabled
 * for the root's children if it is not yet), v1's at `root`/<controller>
 * otherwise. What is missing says why, for the one warning at start.
 */
export async function detectCgroups(root: string = CGROUP_ROOT): Promise<DetectedCgroups> {
  const available = await readWords(join(root, 'cgroup.controllers'));
  if (available !== undefined) {
    const subtree = join(root, 'cgroup.subtree_control');
    const enabled = (await readWords(subtree)) ?? [];
    const absent = CONTROLLERS.filter((c) => !available.includes(c));
    const toEnable = CONTROLLERS.filter((c) => available.includes(c) && !enabled.includes(c));
    for (const c of toEnable) await writeFile(subtree, `+${c}`).catch(() => {});
    const now = toEnable.length > 0 ? ((await readWords(subtree)) ?? []) : enabled;
    const controllers = CONTROLLERS.filter((c) => now.includes(c));
    return {
      hierarchies: controllers.length > 0 ? [{ version: 2, dir: root, controllers }] : [],
      missing: CONTROLLERS.filter((c) => !controllers.includes(c)).map((controller) => ({
        controller,
        why: absent.includes(controller)
          ? `cgroup v2 at ${root} offers no ${controller} controller`
          : `the ${controller} controller could not be enabled for the cgroups below ${root} (${subtree})`,
      })),
    };
  }
  const hierarchies: Hierarchy[] = [];
  const missing: DetectedCgroups['missing'] = [];
  for (const controller of CONTROLLERS) {
    const dir = join(root, controller);
    if (existsSync(join(dir, V1_MARKER[controller]))) {
      hierarchies.push({ version: 1, dir, controllers: [controller] });
    } else {
      missing.push({
        controller,
        why: `no cgroup ${controller} controller at ${root} (neither cgroup v2's nor v1's)`,
      });
    }
  }
  return { hierarchies, missing };
}

/** The hierarchy with the cpu controller, or why there is none (for tests and benchmarks). */
export async function detectCpuHierarchy(
  root: string = CGROUP_ROOT,
): Promise<CpuHierarchy | { none: string }> {
  const found = await detectCgroups(root);
  const h = found.hierarchies.find((x) => x.controllers.includes('cpu'));
  return h ?? { none: found.missing.find((m) => m.controller === 'cpu')?.why ?? 'no cpu' };
}

/** What a cgroup of Basin's holds: a node (its index), a service's or set's pooler or helpers, a service's repository. */
export type UnitPart = number | 'pooler' | 'tasks' | 'repo';

export interface Unit {
  /** A service's or read replica set's id. */
  id: string;
  part: UnitPart;
}

/** The controllers a unit is bounded by: a node all three; a pooler and the helpers memory and processes. */
export function controllersOf(unit: Unit): Controller[] {
  return typeof unit.part === 'number' ? ['cpu', 'memory', 'pids'] : ['memory', 'pids'];
}

/** The name of a unit's cgroup. */
export function unitCgroupName(installation: string, unit: Unit): string {
  return `${prefix(installation)}${unit.id}-${unit.part}`;
}

/** The name of a node's cgroup. */
export function nodeCgroupName(installation: string, ref: { id: string; node: number }): string {
  return unitCgroupName(installation, { id: ref.id, part: ref.node });
}

/** The parent of the `shared` nodes' cgroups, where a hierarchy has the memory controller. */
export function sharedCgroupName(installation: string): string {
  return `${prefix(installation)}shared`;
}

/** The unit whose cgroup of this installation `name` is; undefined for any other name. */
export function parseUnitCgroupName(installation: string, name: string): Unit | undefined {
  if (!name.startsWith(prefix(installation))) return undefined;
  const m = /^([a-z0-9]{1,32})-(\d{1,6}|pooler|tasks|repo)$/.exec(
    name.slice(prefix(installation).length),
  );
  if (!m) return undefined;
  const part = m[2]!;
  return {
    id: m[1]!,
    part: /^\d+$/.test(part) ? Number(part) : (part as Exclude<UnitPart, number>),
  };
}

const prefix = (installation: string) => `basin-${installation}-`;

/** What a unit's cgroup holds it to; an absent bound is none (`shared` nodes: their parent's memory). */
export interface Bounds {
  /** CPU time per CPU_PERIOD_US. */
  cpuQuotaUs?: number;
  /** Memory, and memory with swap where the host accounts it. */
  memoryBytes?: number;
  /** Processes and threads. */
  pidsMax?: number;
  /**
   * cgroup v2 only: the CPU weight of a pooler's or the helpers' cgroup,
   * as a nice value (cpu.weight.nice). On v1 they stay out of the cpu
   * hierarchy, with their processes' own priority.
   */
  cpuNice?: number;
}

/**
 * A size's CPU time per period (µs): `cpu_millis` × 100, so 1000 millis is
 * one CPU. A `shared` size has none: it shares the host.
 */
export function cpuQuotaUs(size: { shared: boolean; cpuMillis: number }): number | undefined {
  if (size.shared) return undefined;
  return Math.max(MIN_QUOTA_US, Math.round((size.cpuMillis * CPU_PERIOD_US) / 1000));
}

/** A limit file and the value it must hold; `optional`: written only where the kernel has it. */
export interface LimitFile {
  file: string;
  value: string;
  optional?: boolean;
}

/**
 * The limit files of a unit's cgroup in `hierarchy` for `bounds`, for the
 * controllers the unit is bounded by (`controllers`). On v1 the memory
 * limit and the memory+swap limit must be written in the order that keeps
 * the second at least the first, which the caller finds by trying
 * (node-cgroups.ts).
 */
export function limitFiles(
  hierarchy: Pick<Hierarchy, 'version' | 'controllers'>,
  bounds: Bounds,
  controllers: readonly Controller[] = CONTROLLERS,
): LimitFile[] {
  const has = (c: Controller) => hierarchy.controllers.includes(c) && controllers.includes(c);
  const out: LimitFile[] = [];
  if (hierarchy.version === 2) {
    // v2: one cgroup has every enabled controller, whether it bounds it or not.
    const on = (c: Controller) => hierarchy.controllers.includes(c);
    if (on('cpu')) {
      out.push({ file: 'cpu.max', value: `${bounds.cpuQuotaUs ?? 'max'} ${CPU_PERIOD_US}` });
      if (bounds.cpuNice !== undefined) {
        out.push({ file: 'cpu.weight.nice', value: String(bounds.cpuNice) });
      }
    }
    if (on('memory')) {
      out.push({ file: 'memory.max', value: String(bounds.memoryBytes ?? 'max') });
      // The bound is all the memory there is: none of it may be swap.
      const swap = bounds.memoryBytes === undefined ? 'max' : '0';
      out.push({ file: 'memory.swap.max', value: swap, optional: true });
    }
    if (on('pids')) out.push({ file: 'pids.max', value: String(bounds.pidsMax ?? 'max') });
    return out;
  }
  if (has('cpu')) {
    out.push({ file: 'cpu.cfs_period_us', value: String(CPU_PERIOD_US) });
    out.push({ file: 'cpu.cfs_quota_us', value: String(bounds.cpuQuotaUs ?? -1) });
  }
  if (has('memory')) {
    const value = String(bounds.memoryBytes ?? -1);
    out.push({ file: 'memory.limit_in_bytes', value });
    out.push({ file: 'memory.memsw.limit_in_bytes', value, optional: true });
  }
  if (has('pids')) out.push({ file: 'pids.max', value: String(bounds.pidsMax ?? 'max') });
  return out;
}

/** The file that counts a memory cgroup's OOM kills. */
export const oomFile = (version: 1 | 2) => (version === 2 ? 'memory.events' : 'memory.oom_control');

/**
 * How many processes the kernel killed in a memory cgroup for lack of
 * memory, from its `memory.oom_control` (v1) or `memory.events` (v2): both
 * have an `oom_kill <n>` line. Undefined when there is none (a kernel
 * before 4.13 has no such count).
 */
export function parseOomKills(text: string): number | undefined {
  const m = /^oom_kill (\d+)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** A memory limit as read back: bytes, or undefined for none ("max", or v1's page-rounded 2^63). */
export function parseMemoryLimit(text: string): number | undefined {
  const t = text.trim();
  if (t === 'max' || t === '' || !/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  return n >= 2 ** 62 ? undefined : n;
}

/**
 * The path of a process's cgroup in `hierarchy`, from its
 * /proc/<pid>/cgroup: v2's line is `0::<path>`, v1's the one whose
 * controllers include the hierarchy's (`4:cpu,cpuacct:<path>`).
 */
export function cgroupOfProcess(
  procCgroup: string,
  hierarchy: Pick<Hierarchy, 'version' | 'controllers'> | 1 | 2,
): string | undefined {
  const h =
    typeof hierarchy === 'number'
      ? { version: hierarchy, controllers: ['cpu'] as Controller[] }
      : hierarchy;
  for (const line of procCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    const [, id, controllers, path] = m;
    const listed = controllers!.split(',');
    if (h.version === 2 ? id === '0' && controllers === '' : listed.includes(h.controllers[0]!)) {
      return path;
    }
  }
  return undefined;
}

/**
 * Removes every cgroup of `installation` that holds no process, in either
 * hierarchy, the shared nodes' parent last (for tools, tests and
 * benchmarks that remove an installation: synchronous, so that exit
 * handlers can call it).
 */
export function removeInstallationCgroups(installation: string, root: string = CGROUP_ROOT): void {
  const shared = sharedCgroupName(installation);
  for (const dir of [root, ...CONTROLLERS.map((c) => join(root, c))]) {
    for (const parent of [join(dir, shared), dir]) {
      let names: string[];
      try {
        names = readdirSync(parent);
      } catch {
        continue;
      }
      for (const name of names) {
        if (parseUnitCgroupName(installation, name) === undefined) continue;
        try {
          rmdirSync(join(parent, name));
        } catch {
          // Processes still run in it.
        }
      }
    }
    try {
      rmdirSync(join(dir, shared));
    } catch {
      // Not there, or a shared node still runs.
    }
  }
}

/** The words of a small file, or undefined when it cannot be read. */
export async function readWords(path: string): Promise<string[] | undefined> {
  try {
    return (await readFile(path, 'utf8')).split(/\s+/).filter(Boolean);
  } catch {
    return undefined;
  }
}
