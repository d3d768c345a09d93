// What the resource attack tests read of a node's cgroups from the host,
// the witness beside the API: where this machine's cgroup v1 hierarchies
// put an installation's cgroups, what the kernel counts in them, and which
// of them a process is in. (cpu-budgets.test.ts reads the cpu hierarchy
// through cgroup-hierarchy.ts's detection, as it runs on either version.)

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  cgroupOfProcess,
  type Controller,
  detectCgroups,
  type Hierarchy,
  sharedCgroupName,
  type Unit,
  unitCgroupName,
} from '../../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import type { Layout } from '../../src/drivers/local/layout.js';

/** The installation's tag, which names its cgroups. */
export const tagOf = (layout: Layout): string =>
  readFileSync(layout.installationFile, 'utf8').trim();

/** The host's hierarchy of `controller`; the test fails without one. */
export async function hierarchyOf(controller: Controller): Promise<Hierarchy> {
  const found = await detectCgroups();
  const h = found.hierarchies.find((x) => x.controllers.includes(controller));
  assert.ok(h, `this host has a cgroup ${controller} controller (${JSON.stringify(found)})`);
  return h;
}

/** The directory of a unit's cgroup in `h` (a shared node's below the shared parent, with memory). */
export function unitDir(h: Hierarchy, tag: string, unit: Unit, shared = false): string {
  const name = unitCgroupName(tag, unit);
  return shared && typeof unit.part === 'number' && h.controllers.includes('memory')
    ? join(h.dir, sharedCgroupName(tag), name)
    : join(h.dir, name);
}

/** The name of the cgroup of `h` that `pid` is in ('' for the root). */
export function cgroupNameOf(h: Hierarchy, pid: number): string {
  return basename(cgroupOfProcess(readFileSync(`/proc/${pid}/cgroup`, 'utf8'), h) ?? '');
}

/** A control file of a cgroup, trimmed. */
export const control = (dir: string, file: string): string =>
  readFileSync(join(dir, file), 'utf8').trim();

/** One `key value` line of a flat-keyed control file (memory.stat, memory.oom_control, pids.events). */
export function counter(dir: string, file: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(control(dir, file));
  assert.ok(m, `${file} of ${dir} has ${key}`);
  return Number(m[1]);
}

/** The pids in a cgroup. */
export const pidsIn = (dir: string): number[] =>
  control(dir, 'cgroup.procs').split('\n').filter(Boolean).map(Number);

/** A process's oom_score_adj. */
export const oomScoreAdj = (pid: number): number =>
  Number(readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8').trim());

/**
 * Whether this process may lower an OOM score: CAP_SYS_RESOURCE (bit 24)
 * in its effective set. Basin, as root on the same host, has it or not
 * alike: it decides whether Basin protects its processes or raises the
 * tenants' (oom-scores.ts).
 */
export function maySetLowerScores(): boolean {
  const hex = /^CapEff:\s+([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return hex !== undefined && (BigInt(`0x${hex}`) & (1n << 24n)) !== 0n;
}

/** The live processes of `uid`. */
export function processesOfUid(uid: number): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => {
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        return new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status) && !/^State:\s+Z/m.test(status);
      } catch {
        return false;
      }
    });
}
