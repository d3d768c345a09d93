// Restarting a node that died on its own (docs/decisions.md, Failures):
// killed (a tenant's kill -9 of its own postmaster, the kernel), crashed,
// or stopped by anyone but Basin. Basin starts it again, as it always did,
// but one that keeps dying is started less and less often: the first
// restart at once, then after `baseMs`, doubling up to `capMs`; a node that
// ran for `stableMs` before it died starts a new count. Each death is a
// `basin: …` entry of the resource's logs, with why and when the restart
// comes. This is the one path for every node the driver runs (a service's
// primary and standbys, a read replica set's nodes): ServiceNode asks here
// before each start, and whatever else comes to kill nodes (a memory bound)
// gives its reason in deathReason.
//
// What counts as "on its own" is kept in the node's state file (root's,
// so it survives Basin's restarts and no tenant changes it): `upSince` is
// set once Basin sees the server run as it should, and cleared as soon as
// Basin decides to stop it (the service is stopped, a restart for new
// settings, a rewind after a failover, a stop for its storage), so a node
// found not running while it is set was not stopped by Basin. A server a
// tenant stops with a signal is stopping on its own, even when Basin
// hurries it along.

import { nodeName } from '../../../domain/service-nodes.js';
import { type Progress, wait } from '../../../domain/progress.js';
import { duration } from '../../../lib/duration.js';
import type { NodeRef } from '../layout.js';
import { type NodeState, readNodeState, writeNodeState } from './node-state.js';
import type { Logger } from '../../../lib/logger.js';
import type { SpawnedServers } from './postmaster.js';

export interface RestartPolicy {
  /** The delay before the second restart in a row; it doubles with each further one. */
  baseMs: number;
  /** The longest delay. */
  capMs: number;
  /** A node that ran this long before it died counts as stable: its restart is a first one again. */
  stableMs: number;
}

export const DEFAULT_RESTARTS: RestartPolicy = {
  baseMs: 1_000,
  capMs: 300_000,
  stableMs: 600_000,
};

/** The delay before the `count`th restart in a row: the first at once, then baseMs doubling to capMs. */
export function restartDelayMs(policy: RestartPolicy, count: number): number {
  if (count <= 1) return 0;
  return Math.min(policy.capMs, policy.baseMs * 2 ** Math.min(count - 2, 40));
}

/**
 * Why the server of `pgdata` is gone, as far as Basin can tell: how the
 * postmaster this process started ended (Node reaped it), or, for one an
 * earlier Basin started, whose end only its parent could see, that it was
 * found not running. Never anything the server wrote: its logs are the
 * tenant's to fill, and this goes into an entry of Basin's.
 */
export function deathReason(ctx: { spawned: SpawnedServers }, pgdata: string): string {
  const exit = ctx.spawned.get(pgdata)?.proc.exit;
  if (!exit) return 'found not running';
  if (exit.signal) return `killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

/**
 * Before a node that should run but does not is started. A node that ran
 * and was not stopped by Basin died: the death is recorded, with its
 * restart due after the policy's delay, and its entry is returned with
 * the wait. A wait while a restart is not due yet; undefined when the node
 * may start now. `save` writes `state`.
 */
export async function holdRestart(
  ctx: { spawned: SpawnedServers; restarts: RestartPolicy; log: Logger },
  ref: NodeRef,
  pgdata: string,
  state: NodeState,
  save: () => Promise<void>,
  now = Date.now(),
): Promise<Progress | undefined> {
  const name = nodeName(ref.node);
  if (state.upSince !== undefined) {
    const ranMs = Math.max(0, now - state.upSince);
    delete state.upSince;
    const policy = ctx.restarts;
    const count = state.restarts && ranMs < policy.stableMs ? state.restarts.count + 1 : 1;
    const delay = restartDelayMs(policy, count);
    state.restarts = { count, dueAt: now + delay };
    await save();
    const reason = deathReason(ctx, pgdata);
    ctx.log.warn(
      { id: ref.id, node: ref.node, reason, ranMs, restarts: count, delayMs: delay },
      'PostgreSQL stopped on its own; restarting it',
    );
    const when =
      count === 1
        ? 'restarting it'
        : `restart ${count} in a row, in ${duration(delay)} (each waits twice as long, up to ${duration(policy.capMs)}, until it runs for ${duration(policy.stableMs)})`;
    return wait(
      delay,
      delay === 0 ? `restarting ${name}` : `restarting ${name} in ${duration(delay)}`,
      {
        severity: 'WARNING',
        message: `basin: ${name} stopped on its own (${reason}) after running ${duration(ranMs)}; ${when}`,
      },
    );
  }
  // A restart due further ahead than the longest delay was scheduled by a
  // clock that has since been set back: due now.
  const left = (state.restarts?.dueAt ?? 0) - now;
  if (left > 0 && left <= ctx.restarts.capMs) {
    return wait(left, `restarting ${name} in ${duration(left)}`);
  }
  return undefined;
}

/**
 * Records that Basin stopped the node whose state is `file` other than
 * through its converge (the storage stop kills every process of its
 * service outright: storage/storage-watch.ts): no death, so its next
 * start, once it may, is no crash loop's restart.
 */
export async function stoppedByBasin(file: string): Promise<void> {
  const state = await readNodeState(file);
  if (state.upSince === undefined) return;
  delete state.upSince;
  await writeNodeState(file, state);
}
