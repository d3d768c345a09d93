// Keeping a standby on its primary's timeline (a service's HA standby, or a
// read replica set's node). After a failover a standby follows the new
// primary on its own (recovery_target_timeline = latest) unless it got WAL
// past the point where the new primary's timeline forked off (timeline.ts):
// then it never will. Such a standby is found when its primary's timeline
// changes, stopped, and rewound onto the new timeline with pg_rewind, or
// rebuilt from a base backup when that fails (standby.ts). A node is
// repaired at a time (the callers converge one node after another), so the
// others keep serving meanwhile.

import { nodeName } from '../../../domain/service-nodes.js';
import { type Progress, wait } from '../../../domain/progress.js';
import type { ServiceSpec, SpecNode } from '../../driver.js';
import type { AdminTarget } from '../node/admin.js';
import { type NodeState } from '../node/node-state.js';
import type { OsUser } from '../host/os-user.js';
import { postmasterStatus, prepareStart } from '../node/postmaster.js';
import { removeTrees } from '../node/node-files.js';
import { rewindToStandby } from './standby.js';
import { latestTimeline, standbyDivergence } from './timeline.js';
import type { DriverContext } from '../context.js';
import type { NodeReplication } from './replication.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<DriverContext, 'cgroups' | 'layout' | 'log' | 'oom' | 'pg' | 'spawned' | 'stopper'>;

/**
 * For a standby that runs: whether it can follow its primary, looked at
 * only when the primary's timeline is not the one it was last found to
 * follow. One that cannot is marked to be rewound (`state.rewind`), and
 * the wait returned says so in the resource's logs; the next call stops it
 * (rewindStandby). A primary or standby that does not answer is looked at
 * again at the next apply.
 */
export async function checkFollows(
  ctx: Ctx,
  spec: ServiceSpec,
  node: SpecNode,
  replication: NodeReplication,
  standby: AdminTarget,
  state: NodeState,
  save: () => Promise<void>,
): Promise<Progress | undefined> {
  const timeline = await latestTimeline(replication.primaryAdmin.pgdata);
  if (state.follows === timeline) return undefined;
  let verdict: Awaited<ReturnType<typeof standbyDivergence>>;
  try {
    verdict = await standbyDivergence(standby, replication.primaryAdmin);
  } catch (err) {
    ctx.log.warn(
      { serviceId: spec.serviceId, node: node.index, err: (err as Error).message },
      'could not tell whether the standby follows its primary; looking again later',
    );
    return undefined;
  }
  if (!verdict.why) {
    state.follows = timeline;
    await save();
    return undefined;
  }
  // Rewound for this timeline already, and still behind: rebuilt instead.
  const again = state.rewoundFor === verdict.primaryTimeline;
  state.rewind = again ? 'rebuild' : 'wanted';
  delete state.follows;
  await save();
  const what = again ? 'rebuilt from a base backup' : 'rewound (pg_rewind)';
  const message = `basin: ${nodeName(node.index)} cannot follow the primary on timeline ${verdict.primaryTimeline}: ${verdict.why}; it is ${what} while the other nodes serve`;
  ctx.log.warn({ serviceId: spec.serviceId, node: node.index, why: verdict.why }, message);
  return wait(0, 'a standby cannot follow its primary', { severity: 'WARNING', message });
}

/**
 * A node recorded as a standby that is not yet one of its primary's: a
 * former primary (a failover or a switchover promoted another node; it
 * must never accept another write, and converge-nodes.ts stops it before
 * the new primary is promoted), or a standby marked by checkFollows. It is
 * stopped if it runs, then rewound from the primary (or removed, to be
 * rebuilt). A wait while it stops; undefined once its files are done.
 */
export async function rewindStandby(
  ctx: Ctx,
  spec: ServiceSpec,
  node: SpecNode,
  replication: NodeReplication,
  user: OsUser,
  state: NodeState,
  save: () => Promise<void>,
): Promise<Progress | undefined> {
  const ref = { id: spec.serviceId, node: node.index };
  const pgdata = ctx.layout.pgdata(ref);
  const why = state.rewind ? 'stopping a standby to rewind it' : 'fencing the former primary';
  const pm = await postmasterStatus(pgdata);
  if (pm.up) {
    if (!ctx.stopper.stopping(pgdata, pm.pid)) {
      ctx.log.info({ serviceId: spec.serviceId, node: node.index }, why);
    }
    return wait(await ctx.stopper.step(pgdata, pm.pid, 'fast'), why);
  }
  const starting = ctx.spawned.get(pgdata);
  if (starting && !starting.proc.exit) return wait(50, why);
  // What a killed postmaster left: its children, and its postmaster.pid,
  // whose pid a zombie may still answer for (postmaster.ts): pg_rewind's
  // single-user recovery of an unclean node would take it for a running server.
  if (!(await prepareStart(pgdata, ctx.layout.socketDir(ref)))) return wait(50, why);
  // Stopped (or fenced, a failed-over primary) by Basin: its start after the
  // rewind is no restart after a death (restarts.ts); the failover says why.
  if (state.upSince !== undefined) {
    delete state.upSince;
    await save();
  }
  ctx.stopper.forget(pgdata);
  ctx.spawned.delete(pgdata);
  const timeline = await latestTimeline(replication.primaryAdmin.pgdata);
  if (state.rewind === 'rebuild') {
    await removeTrees([pgdata]);
    delete state.rewind;
    await save();
    return wait(0, 'rebuilding a standby', {
      severity: 'LOG',
      message: `basin: ${nodeName(node.index)} is rebuilt from a base backup of the primary`,
    });
  }
  const rewound = await rewindToStandby(ctx, spec, node, replication, user, state, save);
  if (!rewound) {
    return wait(0, 'rebuilding a standby', {
      severity: 'WARNING',
      message: `basin: pg_rewind could not rewind ${nodeName(node.index)}; it is rebuilt from a base backup of the primary`,
    });
  }
  state.rewoundFor = timeline;
  await save();
  return wait(0, 'starting a rewound standby', {
    severity: 'LOG',
    message: `basin: ${nodeName(node.index)} was rewound onto the primary's timeline ${timeline}; it starts as a standby`,
  });
}
