// Every PostgreSQL node gets the CPU, the memory and the processes its size
// says, as a managed cloud's node gets those of its machine: a node of
// `cpu_millis: 1000, memory_gbs: 4` runs in cgroups of its own whose CPU
// quota is one CPU (100 ms of CPU time per 100 ms), whose memory bound is
// 4 GiB (swap included), and whose pids bound is what a full load of it
// needs (node-bounds.ts), however much the host has free. `shared` nodes get
// no CPU quota (they share the host) and share one memory bound, their
// parent cgroup's. A service's (or set's) PgBouncer and the helpers Basin
// runs as its user (backups, restores, base backups, rewinds) get memory
// and pids cgroups of their own, so that no process of a tenant's uid runs
// unbounded. The hierarchies, the names and the limit files are
// cgroup-hierarchy.ts's.
//
// Basin, as root, moves each such process into its cgroups before it
// becomes the service's user (exec.ts, withPrelude), so the postmaster and
// everything it starts (backends, walsenders, the archiver and pgBackRest's
// archive-push, whatever a tenant runs with COPY … PROGRAM, and the pages
// it writes into its private /tmp, which the kernel charges to the writer's
// cgroup) stay in them; cgroup files are root's, so the service's user can
// neither leave nor raise a bound. A resize writes the new bounds: the
// running processes get them at once, without a restart (a memory bound
// below what a v1 cgroup holds is refused by the kernel: the old one stays
// until the node's restart frees the memory, and the next write takes).
// A node an older Basin started outside its cgroups is moved in (its
// postmaster first, so that what it forks meanwhile follows, then every
// process of its cluster). HAProxy stays outside: it is Basin's.

import { readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Logger } from '../../../../lib/logger.js';
import { DriverError } from '../../../driver.js';
import {
  type Bounds,
  type Controller,
  controllersOf,
  cgroupOfProcess,
  detectCgroups,
  type Hierarchy,
  limitFiles,
  oomFile,
  parseMemoryLimit,
  parseOomKills,
  parseUnitCgroupName,
  sharedCgroupName,
  type Unit,
  unitCgroupName,
} from './cgroup-hierarchy.js';
import type { Layout, NodeRef } from '../../layout.js';
import { nodeBounds, type ProcessCounts, TASKS_BOUNDS } from './node-bounds.js';
import type { Prelude } from '../exec.js';
import type { OomScores } from './oom-scores.js';
import { isRoot } from '../os-user.js';
import { exists } from '../../node/node-files.js';
import { mkdirOnce, pidsIn, pidsInNow, removed, writeLimits } from './cgroup-files.js';
import { postmasterStatus } from '../../node/postmaster.js';
import { clusterProcesses, signalAll } from '../processes.js';
import type { Size } from '../../../../domain/types.js';

/** What a missing controller leaves unbounded, for the warning. */
const WITHOUT: Record<Controller, string> = {
  cpu: 'a CPU budget',
  memory: 'a memory bound',
  pids: 'a bound on their processes',
};

export interface NodeCgroupsOptions {
  /** The bound of every `shared` node together (node-bounds.ts, sharedMemoryBytes). */
  sharedMemoryBytes?: number;
  log?: Logger;
  /** /proc but in unit tests. */
  procRoot?: string;
}

/**
 * The installation's cgroups, in the host's hierarchies; for each
 * controller there is none of (or Basin is not root), a warning, once:
 * every node then runs without that bound.
 */
export async function startNodeCgroups(
  installation: string,
  log: Logger,
  sharedMemoryBytes: number,
): Promise<NodeCgroups> {
  const detected = isRoot()
    ? await detectCgroups()
    : {
        hierarchies: [],
        missing: (['cpu', 'memory', 'pids'] as const).map((controller) => ({
          controller,
          why: 'Basin does not run as root, and only root can make cgroups',
        })),
      };
  const hierarchies: Hierarchy[] = [];
  const missing = [...detected.missing];
  for (const h of detected.hierarchies) {
    const unusable = await probeCgroups(h, installation);
    if (unusable === undefined) hierarchies.push(h);
    else missing.push(...h.controllers.map((controller) => ({ controller, why: unusable })));
  }
  if (missing.length > 0) {
    const what = missing.map((m) => WITHOUT[m.controller]);
    const whats = what.length > 1 ? `${what.slice(0, -1).join(', ')} and ${what.at(-1)}` : what[0];
    const why = [...new Set(missing.map((m) => m.why))].join('; ');
    log.warn(
      { reason: why },
      `WARNING: PostgreSQL nodes run without ${whats} (${why}): a node of any size can use ` +
        'as much of it as the host has. Run Basin as root on a host with cgroup v2, or cgroup v1 ' +
        "with the cpu, memory and pids controllers, to hold each node to its size's " +
        'cpu_millis and memory_gbs (docs/security.md).',
    );
  }
  return new NodeCgroups(hierarchies, installation, { sharedMemoryBytes, log });
}

/**
 * Whether a cgroup can be made in `hierarchy`: a controller that can be
 * read is not one that can be written (a container's cgroup file system
 * mounted read-only), and then every node's start would fail. A probe,
 * named like a node's cgroup, made and removed at once (a leftover of a
 * kill in between is swept at the next start, its node being absent).
 */
export async function probeCgroups(
  hierarchy: Pick<Hierarchy, 'dir'>,
  installation: string,
): Promise<string | undefined> {
  const dir = join(hierarchy.dir, unitCgroupName(installation, { id: 'probe', part: 0 }));
  try {
    await mkdirOnce(dir);
    await rmdir(dir);
    return undefined;
  } catch (err) {
    return `no cgroup can be made in ${hierarchy.dir} (${(err as Error).message})`;
  }
}

/**
 * Every running node of `id` (a service or a read replica set) in its
 * cgroups, with the bounds of `size` and `counts` (its settings: conf.ts,
 * processCounts). Its apply does this as well; here, at each look of the
 * reconciler, it reaches the nodes no operation touches: one an older
 * Basin started without cgroups is moved in at once, without a restart. A
 * failure is logged, not thrown: a bound is not the node's health.
 */
export async function keepBounds(
  ctx: { cgroups: NodeCgroups; layout: Layout; log: Logger },
  id: string,
  size: Size,
  counts: ProcessCounts,
  indices: number[],
): Promise<void> {
  if (!ctx.cgroups.enabled) return;
  for (const node of indices) {
    const ref = { id, node };
    const pgdata = ctx.layout.pgdata(ref);
    const pm = await postmasterStatus(pgdata);
    if (!pm.up) continue;
    try {
      const unit = nodeUnit(ref);
      await ctx.cgroups.ensure(unit, nodeBounds(size, counts), size.shared);
      if (await ctx.cgroups.place(unit, pm.pid, size.shared, pgdata)) {
        ctx.log.info({ serviceId: id, node }, 'moved PostgreSQL into its cgroups');
      }
    } catch (err) {
      ctx.log.warn(
        { serviceId: id, node, err: (err as Error).message },
        'could not keep a node in its cgroups',
      );
    }
  }
}

/** A node's unit. */
export const nodeUnit = (ref: NodeRef): Unit => ({ id: ref.id, part: ref.node });

/**
 * How a helper Basin runs as the OS user of `id` starts (a backup, a
 * restore, a base backup, a rewind): in the service's `tasks` cgroups,
 * bounded, on the tenant's side of the OOM killer (oom-scores.ts). The
 * tenant can trace it, being its uid: it is bounded as the tenant's other
 * processes are.
 */
export async function helperPrelude(
  ctx: { cgroups: NodeCgroups; oom: OomScores },
  id: string,
): Promise<Prelude> {
  return {
    cgroups: await ctx.cgroups.ensure({ id, part: 'tasks' }, TASKS_BOUNDS),
    oomScoreAdj: ctx.oom.tenant,
  };
}

export class NodeCgroups {
  private readonly procRoot: string;
  /** Bounds the kernel refused for now (a v1 memory bound below usage), said once each. */
  private readonly refused = new Set<string>();

  /**
   * No `hierarchies`: nodes run without bounds (not root, no controllers),
   * and every method does nothing.
   */
  constructor(
    readonly hierarchies: readonly Hierarchy[],
    private readonly installation: string,
    private readonly options: NodeCgroupsOptions = {},
  ) {
    this.procRoot = options.procRoot ?? '/proc';
  }

  /** Whether any controller is used. */
  get enabled(): boolean {
    return this.hierarchies.length > 0;
  }

  /** Whether `controller` bounds what runs here. */
  has(controller: Controller): boolean {
    return this.hierarchies.some((h) => h.controllers.includes(controller));
  }

  /**
   * Makes the unit's cgroups where they are not, and writes `bounds` into
   * them (a shared node: its parent's shared bound too); returns their
   * directories, for its start to join. A limit file is written only when
   * it holds something else: the kernel refills a throttled CPU group's
   * time at every write, so rewriting the same quota at each step of an
   * operation would loosen it.
   */
  async ensure(unit: Unit, bounds: Bounds, shared = false): Promise<string[]> {
    const out: string[] = [];
    for (const { h, dir } of this.placed(unit, shared)) {
      try {
        if (dirname(dir) !== h.dir) await this.ensureShared(h);
        await mkdirOnce(dir);
        await this.write(h, dir, bounds, controllersOf(unit), describeUnit(unit));
      } catch (err) {
        throw new DriverError(
          `Could not set the bounds of ${describeUnit(unit)} (${dir}): ${(err as Error).message}`,
          true,
        );
      }
      out.push(dir);
    }
    return out;
  }

  /**
   * Moves the running process `pid` of the unit (for a node, its
   * postmaster, then every process of its cluster in `pgdata`) into the
   * unit's cgroups, in each hierarchy where it is not in it already.
   * Returns whether it moved it. The cgroups must exist (ensure).
   */
  async place(unit: Unit, pid: number, shared = false, pgdata?: string): Promise<boolean> {
    let text: string;
    try {
      text = await readFile(join(this.procRoot, String(pid), 'cgroup'), 'utf8');
    } catch {
      return false; // it exited meanwhile
    }
    let moved = false;
    for (const { h, dir } of this.placed(unit, shared)) {
      const path = cgroupOfProcess(text, h);
      // Compared by name (and whether below the shared parent): where the
      // hierarchy is mounted from a cgroup of a container's, /proc shows a
      // longer path than the mount does.
      const sharedName = sharedCgroupName(this.installation);
      if (
        path !== undefined &&
        basename(path) === basename(dir) &&
        (basename(dirname(path)) === sharedName) === (dirname(dir) !== h.dir)
      ) {
        continue;
      }
      const procs = join(dir, 'cgroup.procs');
      try {
        await writeFile(procs, String(pid));
      } catch (err) {
        // It exited since its cgroup was read (a server stopping or dying):
        // nothing to move; the caller sees it gone on its next look.
        if ((err as NodeJS.ErrnoException).code === 'ESRCH') return moved;
        throw new DriverError(
          `Could not move ${describeUnit(unit)} into its cgroup (${dir}): ${(err as Error).message}`,
          true,
        );
      }
      for (const child of pgdata ? await clusterProcesses(pgdata) : []) {
        if (child !== pid) await writeFile(procs, String(child)).catch(() => {}); // exited meanwhile
      }
      // A resize between shared and dedicated: the other place is left empty.
      for (const other of this.places(h, unit, dir).slice(1)) await rmdir(other).catch(() => {});
      moved = true;
    }
    return moved;
  }

  /**
   * Removes the unit's cgroups. Returns false when processes still run in
   * one: they are sent SIGKILL (a unit's cgroup holds only its own
   * processes, and it is removed only once those are stopped), and the
   * caller tries again once they are gone.
   */
  async remove(unit: Unit): Promise<boolean> {
    let done = true;
    for (const { h, dir } of this.placed(unit, false)) {
      for (const d of this.places(h, unit, dir)) {
        try {
          await rmdir(d);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') continue;
          if (code !== 'EBUSY') throw err;
          signalAll(await pidsIn(d), 'SIGKILL');
          done = false;
        }
      }
    }
    return done;
  }

  /**
   * SIGKILL to every process in the cgroups of `id` (a service or a read
   * replica set): its nodes' (`nodes`), its pooler's and its helpers', so
   * every process of its OS user, none of which can leave them. The
   * storage stop's first move (storage/storage-watch.ts), and synchronous
   * on purpose: a read of a few small kernel files, no scan of /proc,
   * nothing queued behind the disk walks that keep libuv's threads busy
   * meanwhile. Returns how many processes it signalled.
   */
  killAllNow(id: string, nodes: readonly number[]): number {
    return this.killNow([
      ...nodes.map((part) => ({ id, part })),
      { id, part: 'pooler' },
      { id, part: 'tasks' },
    ]);
  }

  /** SIGKILL to every process in the units' cgroups, at once (as killAllNow); how many it signalled. */
  killNow(units: readonly Unit[]): number {
    const pids = new Set(units.flatMap((unit) => this.pidsNow(unit)));
    signalAll([...pids], 'SIGKILL');
    return pids.size;
  }

  /**
   * The processes in the unit's cgroups now: every hierarchy, and both
   * places of a node's memory cgroup (a process is in one cgroup of each,
   * whichever was joined).
   */
  pidsNow(unit: Unit): number[] {
    const pids = new Set<number>();
    for (const { h, dir } of this.placed(unit, false)) {
      for (const d of this.places(h, unit, dir)) for (const pid of pidsInNow(d)) pids.add(pid);
    }
    return [...pids];
  }

  /** Removes the cgroups of every unit of `id` (a service or a read replica set), as remove; false while some still hold processes. */
  async removeAll(id: string): Promise<boolean> {
    let done = true;
    for (const unit of await this.list()) {
      if (unit.id === id && !(await this.remove(unit))) done = false;
    }
    return done;
  }

  /**
   * Removes the cgroups of this installation whose unit `has` no longer
   * finds (Basin was killed between a node's delete and its cgroups'), only
   * when they are empty: one that still holds processes stays; then the
   * shared nodes' parent, if no shared node is left in it. Returns the
   * directories removed.
   */
  async removeLeft(has: (unit: Unit) => Promise<boolean>): Promise<string[]> {
    const gone: string[] = [];
    for (const unit of await this.list()) {
      if (await has(unit)) continue;
      for (const { h, dir } of this.placed(unit, false)) {
        for (const d of this.places(h, unit, dir)) {
          if (await removed(d)) gone.push(d);
        }
      }
    }
    for (const h of this.hierarchies.filter((x) => x.controllers.includes('memory'))) {
      const shared = join(h.dir, sharedCgroupName(this.installation));
      if (await removed(shared)) gone.push(shared);
    }
    return gone;
  }

  /** The units of this installation that have a cgroup. */
  async list(): Promise<Unit[]> {
    const seen = new Map<string, Unit>();
    for (const h of this.hierarchies) {
      for (const dir of [h.dir, join(h.dir, sharedCgroupName(this.installation))]) {
        for (const name of await readdir(dir).catch(() => [] as string[])) {
          const unit = parseUnitCgroupName(this.installation, name);
          if (unit) seen.set(name, unit);
        }
      }
    }
    return [...seen.values()];
  }

  /**
   * How many of the unit's processes the kernel has killed for lack of
   * memory, as its memory cgroup counts them; undefined without one.
   */
  async oomKills(unit: Unit): Promise<number | undefined> {
    const found = await this.memoryDir(unit);
    if (!found) return undefined;
    const text = await readFile(join(found.dir, oomFile(found.h.version)), 'utf8').catch(() => '');
    return parseOomKills(text);
  }

  /** The memory bound the unit is held to: its own, or the shared nodes' parent's. */
  async memoryBound(unit: Unit): Promise<{ bytes: number; shared: boolean } | undefined> {
    const found = await this.memoryDir(unit);
    if (!found) return undefined;
    const file = found.h.version === 2 ? 'memory.max' : 'memory.limit_in_bytes';
    const read = async (dir: string) =>
      parseMemoryLimit(await readFile(join(dir, file), 'utf8').catch(() => ''));
    const own = await read(found.dir);
    if (own !== undefined) return { bytes: own, shared: false };
    if (dirname(found.dir) === found.h.dir) return undefined;
    const parent = await read(dirname(found.dir));
    return parent === undefined ? undefined : { bytes: parent, shared: true };
  }

  /** What the log says at start. */
  describe(): string {
    if (!this.enabled) return 'none';
    const on = this.hierarchies.flatMap((h) => h.controllers).join(', ');
    const at = this.hierarchies.map((h) => h.dir).join(', ');
    return `cgroup v${this.hierarchies[0]!.version} (${on}) at ${at}, per node`;
  }

  /** The unit's memory cgroup that exists (a node's may be in either place), with its hierarchy. */
  private async memoryDir(unit: Unit): Promise<{ h: Hierarchy; dir: string } | undefined> {
    const h = this.hierarchies.find((x) => x.controllers.includes('memory'));
    if (!h) return undefined;
    const dir = join(h.dir, unitCgroupName(this.installation, unit));
    for (const d of this.places(h, unit, dir)) {
      if (await exists(d)) return { h, dir: d };
    }
    return undefined;
  }

  /** The hierarchies that bound the unit, and its cgroup's directory in each. */
  private placed(unit: Unit, shared: boolean): { h: Hierarchy; dir: string }[] {
    const name = unitCgroupName(this.installation, unit);
    const wanted = controllersOf(unit);
    return this.hierarchies
      .filter((h) => h.version === 2 || wanted.includes(h.controllers[0]!))
      .map((h) => {
        const below = shared && typeof unit.part === 'number' && h.controllers.includes('memory');
        return {
          h,
          dir: below ? join(h.dir, sharedCgroupName(this.installation), name) : join(h.dir, name),
        };
      });
  }

  /**
   * Where the unit's cgroup in `h` may be: `dir`, and for a node in a
   * hierarchy with the memory controller also the other place (below the
   * shared parent, or not), where it was before a resize between `shared`
   * and a dedicated size.
   */
  private places(h: Hierarchy, unit: Unit, dir: string): string[] {
    if (typeof unit.part !== 'number' || !h.controllers.includes('memory')) return [dir];
    const name = basename(dir);
    return dirname(dir) === h.dir
      ? [dir, join(h.dir, sharedCgroupName(this.installation), name)]
      : [dir, join(h.dir, name)];
  }

  /** The shared nodes' parent: made, given the shared bound, its controllers given to its children (v2). */
  private async ensureShared(h: Hierarchy): Promise<void> {
    const dir = join(h.dir, sharedCgroupName(this.installation));
    await mkdirOnce(dir);
    if (h.version === 2) {
      const subtree = join(dir, 'cgroup.subtree_control');
      const enabled = (await readFile(subtree, 'utf8').catch(() => '')).split(/\s+/);
      for (const c of h.controllers.filter((x) => !enabled.includes(x))) {
        await writeFile(subtree, `+${c}`);
      }
    }
    const bound = this.options.sharedMemoryBytes;
    const bounds = bound === undefined ? {} : { memoryBytes: bound };
    await this.write(h, dir, bounds, ['memory'], 'the shared services');
  }

  /** Writes the limit files that differ; a memory bound the kernel refuses for now is said once, and left. */
  private async write(
    h: Hierarchy,
    dir: string,
    bounds: Bounds,
    controllers: readonly Controller[],
    what: string,
  ): Promise<void> {
    const refused = await writeLimits(dir, limitFiles(h, bounds, controllers));
    const key = `${dir}:${refused.map((f) => f.value).join()}`;
    if (refused.length === 0 || this.refused.has(key)) return;
    this.refused.add(key);
    this.options.log?.warn(
      { cgroup: dir, bound: refused[0]!.value },
      `the kernel keeps the memory bound of ${what} while it holds more than the new one; ` +
        'it is written again at the next step',
    );
  }
}

/** "node 1", "the connection pooler", "the service's helpers", "the service's repository". */
function describeUnit(unit: Unit): string {
  if (typeof unit.part === 'number') return `node ${unit.part}`;
  if (unit.part === 'repo') return "the service's repository";
  return unit.part === 'pooler' ? 'the connection pooler' : "the service's helpers";
}
