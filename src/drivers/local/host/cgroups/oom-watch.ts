// Noticing what the kernel killed for lack of memory. Every memory cgroup
// of the installation's (node-cgroups.ts: nodes, poolers, helpers) counts
// the processes the kernel killed in it (v1 `memory.oom_control`, v2
// `memory.events`: `oom_kill`); every few seconds this looks at the counts,
// and each one that grew becomes a `basin: …` entry in the logs of the
// service (or read replica set) it belongs to, naming the node and its
// bound. What the kill did is handled elsewhere, as for any crash: a killed
// backend is PostgreSQL's own business (it ends the other sessions and
// recovers); a dead postmaster or pooler is found by the reconciler and
// started again (or the primary failed over, where it has standbys).
//
// But one: what a node's private /tmp, /var/tmp, /dev/shm and /run/lock
// hold is charged to its memory cgroup and belongs to no process, so no
// kill frees it. A tenant that fills them to the bound leaves the kernel
// killing whatever its node starts next, for as long as the postmaster
// lives (the last it kills: oom-scores.ts), and the node neither serves nor
// dies. So when the kernel killed in a node whose private directories hold
// at least half its bound, Basin kills every process of that node: its
// mount namespace, and those files with it, go, and the reconciler starts
// it again with empty ones, as after any crash; the entry says so.
//
// The counts last reported are kept in `instances/<id>/oom-kills.json`
// (root's, 0600), so that a restarted Basin reports only kills that
// happened since, and none twice; a count found lower than the one kept
// (the cgroup was made anew: a node removed and added again, a reboot) is
// taken as it is, silently.

import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Target } from '../../../../domain/logs.js';
import type { ProgressNote } from '../../../../domain/progress.js';
import { nodeName } from '../../../../domain/service-nodes.js';
import type { Logger } from '../../../../lib/logger.js';
import type { Unit } from './cgroup-hierarchy.js';
import type { KeyedLock } from '../../keyed-lock.js';
import type { Layout } from '../../layout.js';
import { exists } from '../../node/node-files.js';
import type { NodeCgroups } from './node-cgroups.js';
import { formatBytes } from './node-bounds.js';
import { postmasterStatus } from '../../node/postmaster.js';
import { privateTmpBytes } from '../private-tmp-usage.js';

/** How often the counts are read: a few small files per service. */
export const OOM_WATCH_MS = 2_000;

export interface OomWatchContext {
  cgroups: NodeCgroups;
  layout: Layout;
  locks: KeyedLock;
  log: Logger;
}

export class OomWatch {
  private timer: NodeJS.Timeout | undefined;
  private looking = false;

  constructor(
    private readonly ctx: () => OomWatchContext,
    private readonly report: (target: Target, note: ProgressNote) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.look(), OOM_WATCH_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One look at every memory cgroup of the installation (start's timer; tests call it). */
  async look(): Promise<void> {
    if (this.looking) return;
    this.looking = true;
    try {
      const ctx = this.ctx();
      if (!ctx.cgroups.has('memory')) return;
      const byId = new Map<string, Unit[]>();
      for (const unit of await ctx.cgroups.list()) {
        byId.set(unit.id, [...(byId.get(unit.id) ?? []), unit]);
      }
      // Under each service's lock (its delete removes the directory the
      // counts are kept in), all at once: one whose lock is held long (a
      // fork copying from it) holds back no other.
      await Promise.all(
        [...byId].map(([id, units]) =>
          ctx.locks
            .run(id, () => this.lookAt(ctx, id, units))
            .catch((err: Error) => {
              ctx.log.warn({ id, err: err.message }, 'could not read the OOM kills of a service');
            }),
        ),
      );
    } finally {
      this.looking = false;
    }
  }

  private async lookAt(ctx: OomWatchContext, id: string, units: Unit[]): Promise<void> {
    const dir = ctx.layout.instanceDir(id);
    if (!(await exists(dir))) return; // deleted, or not made yet
    const file = ctx.layout.oomKillsFile(id);
    const kept = await readCounts(file);
    let changed = false;
    const target: Target = (await exists(join(dir, 'replica-set.json')))
      ? { kind: 'replicaSet', id }
      : { kind: 'service', id };
    for (const unit of units) {
      const count = await ctx.cgroups.oomKills(unit);
      if (count === undefined) continue;
      const key = String(unit.part);
      const before = kept[key] ?? 0;
      if (count === before) continue;
      kept[key] = count;
      changed = true;
      if (count < before) continue;
      const message =
        (await describeKills(ctx, id, unit, count - before)) + (await freeHeld(ctx, unit));
      ctx.log.warn({ [`${target.kind}Id`]: id, part: unit.part, killed: count - before }, message);
      this.report(target, { severity: 'WARNING', message });
    }
    if (changed) await writeCounts(file, kept);
  }
}

/**
 * `basin: node0 ran out of memory (its bound: 1 GiB, its size's): the
 * kernel killed 1 of its processes; PostgreSQL is down and is restarted`.
 */
export async function describeKills(
  ctx: Pick<OomWatchContext, 'cgroups' | 'layout'>,
  id: string,
  unit: Unit,
  killed: number,
): Promise<string> {
  const bound = await ctx.cgroups.memoryBound(unit);
  const node = typeof unit.part === 'number';
  const what = node
    ? nodeName(unit.part as number)
    : unit.part === 'pooler'
      ? 'the connection pooler'
      : 'a backup, restore or base backup of the service';
  const limit = !bound
    ? ''
    : bound.shared
      ? ` (the bound of all shared services together: ${formatBytes(bound.bytes)})`
      : ` (its bound: ${formatBytes(bound.bytes)}${node ? ", its size's memory" : ''})`;
  let after = '';
  if (node) {
    const pm = await postmasterStatus(ctx.layout.pgdata({ id, node: unit.part as number }));
    after = pm.up ? '' : '; PostgreSQL is down and is restarted';
  } else if (unit.part === 'pooler') {
    after = '; a pooler that died is restarted';
  }
  const processes = killed === 1 ? '1 of its processes' : `${killed} of its processes`;
  return `basin: ${what} ran out of memory${limit}: the kernel killed ${processes}${after}`;
}

/**
 * Kills every process of a node (not its pooler or helpers) whose private
 * directories hold at least half its bound; what to add to the entry then.
 */
async function freeHeld(ctx: OomWatchContext, unit: Unit): Promise<string> {
  if (typeof unit.part !== 'number') return '';
  const bound = await ctx.cgroups.memoryBound(unit);
  const pid = ctx.cgroups.pidsNow(unit)[0];
  if (!bound || pid === undefined) return '';
  const held = await privateTmpBytes(pid);
  if (held === undefined || held < bound.bytes / 2) return '';
  const killed = ctx.cgroups.killNow([unit]);
  ctx.log.warn(
    { id: unit.id, part: unit.part, held, killed },
    'stopped a node its private /tmp filled',
  );
  const node = nodeName(unit.part);
  return (
    `; its private /tmp, /var/tmp, /dev/shm and /run/lock held ${formatBytes(held)}, ` +
    `which no process's death frees: Basin stopped ${node}, and it is started again with them empty`
  );
}

async function readCounts(file: string): Promise<Record<string, number>> {
  try {
    const raw = JSON.parse(await readFile(file, 'utf8')) as unknown;
    if (typeof raw !== 'object' || raw === null) return {};
    // Root's own file (0600 in a root directory): trusted as written, numbers only.
    return Object.fromEntries(
      Object.entries(raw).filter((e): e is [string, number] => Number.isInteger(e[1])),
    );
  } catch {
    return {};
  }
}

/** Written to a temporary name and renamed, so a crash leaves the old or the new file. */
async function writeCounts(file: string, counts: Record<string, number>): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${JSON.stringify(counts)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}
