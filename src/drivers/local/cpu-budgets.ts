// Every PostgreSQL node gets the CPU its size says, as a managed cloud's
// node gets the CPUs of its machine: a node of `cpu_millis: 1000` runs in a
// cgroup of its own whose quota is one CPU (100 ms of CPU time per 100 ms),
// however many cores the host has and however idle they are; a `shared`
// size gets a cgroup without a quota (it shares the host). The
// hierarchy, the names and the limit files are cpu-hierarchy.ts's.
//
// Basin, as root, moves the node's first process into the cgroup before
// it becomes the service's user (joiningCgroup), so the postmaster and
// everything it starts (backends, walsenders, the archiver and
// pgBackRest's archive-push, whatever a tenant runs with COPY … PROGRAM)
// stay in it; cgroup files are root's, so the service's user can neither
// leave nor raise its quota. A resize writes the new quota: the running
// processes get it at once, without a restart. A node an older Basin
// started outside any cgroup is moved in (its postmaster first, so that
// what it forks meanwhile follows, then every process of its cluster).
// PgBouncer and HAProxy stay outside: they are Basin's infrastructure, at
// their own priority (docs/security.md).

import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Size } from '../../domain/types.js';
import type { Logger } from '../../lib/logger.js';
import { DriverError } from '../driver.js';
import {
  cgroupOfProcess,
  cpuQuotaUs,
  type CpuHierarchy,
  detectCpuHierarchy,
  limitFiles,
  nodeCgroupName,
  parseNodeCgroupName,
} from './cpu-hierarchy.js';
import type { Layout, NodeRef } from './layout.js';
import { isRoot } from './os-user.js';
import { postmasterStatus } from './postmaster.js';
import { clusterProcesses, signalAll } from './processes.js';

/**
 * The installation's budgets, in the host's cpu hierarchy; where there is
 * none (or Basin is not root), a warning, once: every node then runs
 * without a budget.
 */
export async function startCpuBudgets(installation: string, log: Logger): Promise<CpuBudgets> {
  const detected = isRoot()
    ? await detectCpuHierarchy()
    : { none: 'Basin does not run as root, and only root can make cgroups' };
  const unusable = 'none' in detected ? undefined : await probeCgroups(detected, installation);
  const found = unusable === undefined ? detected : { none: unusable };
  if ('none' in found) {
    log.warn(
      { reason: found.none },
      `WARNING: PostgreSQL nodes run without a CPU budget (${found.none}): a node of any size ` +
        'can use every CPU of the host. Run Basin as root on a host with cgroup v2 or cgroup v1 ' +
        "with the cpu controller to hold each node to its size's cpu_millis (docs/security.md).",
    );
    return new CpuBudgets(undefined, installation);
  }
  return new CpuBudgets(found, installation);
}

/**
 * Whether a cgroup can be made in `hierarchy`: a controller that can be
 * read is not one that can be written (a container's cgroup file system
 * mounted read-only), and then every node's start would fail. A probe,
 * named like a node's cgroup, made and removed at once (a leftover of a
 * kill in between is swept at the next start, its node being absent).
 */
export async function probeCgroups(
  hierarchy: CpuHierarchy,
  installation: string,
): Promise<string | undefined> {
  const dir = join(hierarchy.dir, nodeCgroupName(installation, { id: 'probe', node: 0 }));
  try {
    await mkdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await rmdir(dir);
    return undefined;
  } catch (err) {
    return `no cgroup can be made in ${hierarchy.dir} (${(err as Error).message})`;
  }
}

/**
 * Every running node of `id` (a service or a read replica set) in its
 * cgroup, with `size`'s quota. Its apply does this as well; here, at each
 * look of the reconciler, it reaches the nodes no operation touches: one
 * an older Basin started without a budget is moved in at once, without a
 * restart. A failure is logged, not thrown: a budget is not the node's
 * health.
 */
export async function keepBudgets(
  ctx: { cpu: CpuBudgets; layout: Layout; log: Logger },
  id: string,
  size: Size,
  indices: number[],
): Promise<void> {
  if (!ctx.cpu.hierarchy) return;
  for (const node of indices) {
    const ref = { id, node };
    const pgdata = ctx.layout.pgdata(ref);
    const pm = await postmasterStatus(pgdata);
    if (!pm.up) continue;
    try {
      await ctx.cpu.ensure(ref, size);
      if (await ctx.cpu.place(ref, pm.pid, pgdata)) {
        ctx.log.info({ serviceId: id, node }, 'moved PostgreSQL into its CPU cgroup');
      }
    } catch (err) {
      ctx.log.warn(
        { serviceId: id, node, err: (err as Error).message },
        'could not keep a node in its CPU cgroup',
      );
    }
  }
}

export class CpuBudgets {
  /**
   * `hierarchy` undefined: nodes run without a budget (not root, no cpu
   * controller), and every method does nothing. `procRoot` is /proc but in
   * unit tests.
   */
  constructor(
    readonly hierarchy: CpuHierarchy | undefined,
    private readonly installation: string,
    private readonly procRoot = '/proc',
  ) {}

  /** The directory of the node's cgroup, whether or not it exists; undefined without a hierarchy. */
  dir(ref: NodeRef): string | undefined {
    return this.hierarchy && join(this.hierarchy.dir, nodeCgroupName(this.installation, ref));
  }

  /**
   * Makes the node's cgroup if it is not there, and gives it `size`'s
   * quota; returns its directory. A limit file is written only when it
   * holds something else: the kernel refills a throttled group's time at
   * every write, so rewriting the same quota at each step of an operation
   * would loosen it.
   */
  async ensure(ref: NodeRef, size: Size): Promise<string | undefined> {
    const dir = this.dir(ref);
    if (!dir || !this.hierarchy) return undefined;
    try {
      // Root's alone: the tenant has nothing to read or write there.
      await mkdir(dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      for (const [file, value] of limitFiles(this.hierarchy.version, cpuQuotaUs(size))) {
        const path = join(dir, file);
        const now = await readFile(path, 'utf8').catch(() => '');
        if (now.trim() !== value) await writeFile(path, value);
      }
    } catch (err) {
      throw new DriverError(
        `Could not set the CPU budget of node ${ref.node} (${dir}): ${(err as Error).message}`,
        true,
      );
    }
    return dir;
  }

  /**
   * Moves the running postmaster `pid` of the node (and every process of
   * its cluster, in `pgdata`) into the node's cgroup, unless it is in it
   * already. Returns whether it moved it. The cgroup must exist (ensure).
   */
  async place(ref: NodeRef, pid: number, pgdata: string): Promise<boolean> {
    const dir = this.dir(ref);
    if (!dir || !this.hierarchy) return false;
    let text: string;
    try {
      text = await readFile(join(this.procRoot, String(pid), 'cgroup'), 'utf8');
    } catch {
      return false; // it exited meanwhile
    }
    // Compared by name: where the hierarchy is mounted from a cgroup of a
    // container's, /proc shows a longer path than the mount does.
    const path = cgroupOfProcess(text, this.hierarchy.version);
    if (path !== undefined && basename(path) === basename(dir)) return false;
    const procs = join(dir, 'cgroup.procs');
    try {
      await writeFile(procs, String(pid));
    } catch (err) {
      throw new DriverError(
        `Could not move node ${ref.node} into its CPU cgroup (${dir}): ${(err as Error).message}`,
        true,
      );
    }
    for (const child of await clusterProcesses(pgdata)) {
      if (child !== pid) await writeFile(procs, String(child)).catch(() => {}); // exited meanwhile
    }
    return true;
  }

  /**
   * SIGKILL to every process in the node's cgroup: the node's and whatever
   * its tenant started, none of which can leave it. The storage stop's
   * first move, and synchronous on purpose: one read of a small kernel
   * file, no scan of /proc, nothing queued behind the disk walks that
   * keep libuv's threads busy meanwhile.
   */
  killAllNow(ref: NodeRef): void {
    const dir = this.dir(ref);
    if (!dir) return;
    let text = '';
    try {
      text = readFileSync(join(dir, 'cgroup.procs'), 'utf8');
    } catch {
      return; // no cgroup (a node that never ran)
    }
    signalAll(pidsOf(text), 'SIGKILL');
  }

  /** The processes in a cgroup (none when it is not there). */
  private async procs(dir: string): Promise<number[]> {
    return pidsOf(await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => ''));
  }

  /**
   * Removes the node's cgroup. Returns false when processes still run in it:
   * they are sent SIGKILL (a node's cgroup holds only the node's processes,
   * and it is removed only once its node is stopped), and the caller
   * tries again once they are gone.
   */
  async remove(ref: NodeRef): Promise<boolean> {
    const dir = this.dir(ref);
    if (!dir) return true;
    try {
      await rmdir(dir);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return true;
      if (code !== 'EBUSY') throw err;
    }
    signalAll(await this.procs(dir), 'SIGKILL');
    return false;
  }

  /** Removes the cgroups of every node of `id` (a service or a read replica set), as remove; false while some still hold processes. */
  async removeAll(id: string): Promise<boolean> {
    let done = true;
    for (const ref of await this.list()) {
      if (ref.id === id && !(await this.remove(ref))) done = false;
    }
    return done;
  }

  /**
   * Removes the cgroups of this installation whose node `has` no longer
   * finds (Basin was killed between a node's delete and its cgroup's), only
   * when they are empty: one that still holds processes stays. Returns the
   * directories removed.
   */
  async removeLeft(has: (ref: NodeRef) => Promise<boolean>): Promise<string[]> {
    const removed: string[] = [];
    for (const ref of await this.list()) {
      if (await has(ref)) continue;
      const dir = this.dir(ref)!;
      try {
        await rmdir(dir);
        removed.push(dir);
      } catch {
        // Not empty: processes run in it.
      }
    }
    return removed;
  }

  /** The nodes of this installation that have a cgroup. */
  async list(): Promise<NodeRef[]> {
    if (!this.hierarchy) return [];
    let names: string[];
    try {
      names = await readdir(this.hierarchy.dir);
    } catch {
      return [];
    }
    return names.flatMap((n) => parseNodeCgroupName(this.installation, n) ?? []);
  }

  /** What the log says at start. */
  describe(): string {
    return this.hierarchy
      ? `cgroup v${this.hierarchy.version} at ${this.hierarchy.dir}, one cgroup per node`
      : 'none';
  }
}

/** The pids of a cgroup.procs file's text. */
const pidsOf = (text: string) =>
  text
    .split('\n')
    .filter((l) => /^\d+$/.test(l))
    .map(Number);
