// One step of converging all the nodes of a service: its recorded primary,
// its standbys, the nodes it no longer has, and its endpoint. The order is
// what keeps it available and correct at every step:
//
//   without HA replicas: the proxy's frontend goes first (the primary takes
//     the endpoint port back), then the primary, then the standbys it no
//     longer has and their slots;
//   with: the primary (on its own port, naming as synchronous only the
//     standbys that exist, so that no commit waits for one still being
//     built, Basin's own included), the nodes it no longer has, the
//     replication role and slots, each standby (built from the running
//     primary), the primary again (now naming every standby), and last the
//     proxy, routing the endpoint to the primary.
//   stopping: the standbys first, the primary last (its stop sweeps every
//     process of the service's OS user).

import { sourcePort } from '../backups/repository/remote.js';
import { readdir } from 'node:fs/promises';
import { nodeName, type NodeRole } from '../../../domain/service-nodes.js';
import { DONE, type Progress, sooner, wait } from '../../../domain/progress.js';
import type { ObservedNode, ServiceSpec, SpecNode } from '../../driver.js';
import { isStandbyData, nodeExists, removeTrees } from '../node/node-files.js';
import { readNodeState } from '../node/node-state.js';
import { postmasterStatus } from '../node/postmaster.js';
import { clusterProcesses, signalAll } from '../host/processes.js';
import {
  ensureReplicationOnPrimary,
  nodeStatus,
  replicationSecret,
  standbyLag,
  synchronousStandbyNames,
} from '../replication/replication.js';
import { admittedCidrs } from '../config/conf.js';
import { ServiceNode } from './service-node.js';
import { exists } from '../node/node-files.js';
import { nodeUnit } from '../host/cgroups/node-cgroups.js';
import { join } from 'node:path';
import { inStorageRecovery } from '../storage/node-storage.js';
import { primaryNode } from '../primary-node.js';
import type { DriverContext } from '../context.js';
import type { NodeReplication } from '../replication/replication.js';

const standbysOf = (spec: ServiceSpec) => spec.nodes.filter((n) => n.role === 'standby');

/**
 * The host ports that lead into the service's network namespace
 * (network/): each node's own, the endpoint's when no HAProxy serves it
 * (without HA replicas the primary listens on it), and the pooler's.
 */
export function namespacePorts(spec: ServiceSpec): number[] {
  const proxied = spec.nodes.some((n) => n.port !== spec.port);
  return [
    ...spec.nodes.map((n) => n.port),
    ...(proxied ? [] : [spec.port]),
    ...(spec.pooler.port === null ? [] : [spec.pooler.port]),
    // A backup on the repository host reads it through its own pgBackRest server (repository/remote.ts).
    ...(spec.repository ? [sourcePort(spec)] : []),
  ];
}

/** One step towards `spec` for every node of the service; see the order above. */
export async function convergeNodes(ctx: DriverContext, spec: ServiceSpec): Promise<Progress> {
  const primary = primaryNode(spec);
  const standbys = standbysOf(spec);
  const proxied = standbys.length > 0;
  const id = spec.serviceId;

  if (!spec.running) {
    for (const s of standbys) {
      if (!(await nodeExists(ctx.layout, { id, node: s.index }))) continue;
      const p = await new ServiceNode(ctx, spec, s, await replicationFor(ctx, spec, [])).converge();
      if (!p.done) return p;
    }
    const removing = await removeSurplusNodes(ctx, spec);
    if (removing) return removing;
    return new ServiceNode(ctx, spec, primary).converge();
  }

  if (!proxied) {
    await ctx.haproxy.removeService(id);
    const p = await new ServiceNode(ctx, spec, primary).converge();
    if (!p.done) return p;
    const removing = await removeSurplusNodes(ctx, spec);
    if (removing) return removing;
    if (
      !inStorageRecovery(ctx.storage, id) &&
      (await exists(join(ctx.layout.instanceDir(id), 'replication.secret')))
    ) {
      // Drops the slots of the standbys it had.
      await ensureReplicationOnPrimary(
        adminOf(ctx, id, primary),
        await replicationSecret(ctx.layout, id),
        [],
      );
    }
    return DONE;
  }

  // Two primaries never accept writes: a former primary that still runs (a
  // switchover: nothing killed it) stops before the new one is promoted.
  const fencing = await fenceFormerPrimaries(ctx, spec);
  if (fencing) return fencing;
  const built = await streamingStandbys(ctx, spec);
  let p = await new ServiceNode(
    ctx,
    spec,
    primary,
    await replicationFor(ctx, spec, built),
  ).converge();
  if (!p.done) return p;
  // The endpoint routes to the primary as soon as it accepts writes (after
  // a failover: before the old primary is rewound, which takes a while).
  await routeEndpoint(ctx, spec);
  const removing = await removeSurplusNodes(ctx, spec);
  if (removing) return removing;
  const secret = await replicationSecret(ctx.layout, id);
  // A primary in recovery for its storage (storage/node-storage.ts) writes
  // nothing, roles and slots included: its standbys use the slots it has.
  const slotsDone =
    inStorageRecovery(ctx.storage, id) ||
    (await ensureReplicationOnPrimary(
      adminOf(ctx, id, primary),
      secret,
      standbys.map((s) => s.index),
    ));
  const all = await replicationFor(ctx, spec, built);
  // Each standby takes its step, whatever the others do (one may back off
  // its restarts while another is being built): called again when the
  // soonest is due, with what each has to tell.
  let pending: (Progress & { done: false }) | undefined;
  for (const s of standbys) {
    const step = await new ServiceNode(ctx, spec, s, all).converge();
    if (!step.done) pending = pending ? sooner(pending, step) : step;
  }
  if (pending) return pending;
  const after = await replicationFor(ctx, spec, await streamingStandbys(ctx, spec));
  p = await new ServiceNode(ctx, spec, primary, after).converge();
  if (!p.done) return p;
  await routeEndpoint(ctx, spec);
  if (!slotsDone) return wait(200, 'dropping the slots of removed standbys');
  return DONE;
}

/**
 * Stops every node recorded as a standby whose data is a primary's and that
 * runs: a fast shutdown, so that its walsenders send the standbys every WAL
 * record it wrote before it exits (a switchover loses nothing), escalated
 * by the Stopper if it hangs. A wait while one stops.
 */
async function fenceFormerPrimaries(
  ctx: DriverContext,
  spec: ServiceSpec,
): Promise<Progress | undefined> {
  for (const s of standbysOf(spec)) {
    const ref = { id: spec.serviceId, node: s.index };
    const pgdata = ctx.layout.pgdata(ref);
    if (!(await nodeExists(ctx.layout, ref)) || (await isStandbyData(pgdata))) continue;
    const pm = await postmasterStatus(pgdata);
    if (!pm.up) continue;
    if (!ctx.stopper.stopping(pgdata, pm.pid)) {
      ctx.log.info({ serviceId: spec.serviceId, node: s.index }, 'fencing the former primary');
    }
    return wait(await ctx.stopper.step(pgdata, pm.pid, 'fast'), 'fencing the former primary');
  }
  return undefined;
}

/**
 * The standbys that can acknowledge commits now: built, standbys (not a
 * former primary waiting to be rewound, nor one marked to be rewound),
 * running. Only these are named in synchronous_standby_names, so that a
 * standby being built, rewound or restarted never holds every commit
 * until it is back: as Patroni's (non-strict) synchronous mode does,
 * availability first, and the standby counts again as soon as it streams
 * (docs/decisions.md, HA replicas). Basin's own commits never wait for a
 * standby (admin.ts).
 */
async function streamingStandbys(ctx: DriverContext, spec: ServiceSpec): Promise<number[]> {
  const out: number[] = [];
  for (const s of standbysOf(spec)) {
    const ref = { id: spec.serviceId, node: s.index };
    const pgdata = ctx.layout.pgdata(ref);
    if (!(await nodeExists(ctx.layout, ref)) || !(await isStandbyData(pgdata))) continue;
    // One found unable to follow is about to stop for its rewind (follow.ts).
    if ((await readNodeState(ctx.layout.stateFile(ref))).rewind) continue;
    if ((await postmasterStatus(pgdata)).up) out.push(s.index);
  }
  return out;
}

/** HAProxy's frontend on the service's port, to its nodes, the primary alone enabled. */
function routeEndpoint(ctx: DriverContext, spec: ServiceSpec): Promise<void> {
  return ctx.haproxy.ensureService(
    spec.serviceId,
    spec.port,
    spec.nodes.map((n) => ({
      index: n.index,
      host: ctx.networks.serverHost(spec.serviceId),
      port: n.port,
      enabled: n.role === 'primary',
    })),
    admittedCidrs(spec, ctx.publicCidrs),
  );
}

async function replicationFor(
  ctx: DriverContext,
  spec: ServiceSpec,
  syncCandidates: number[],
): Promise<NodeReplication> {
  return {
    primary: primaryNode(spec),
    primaryAdmin: adminOf(ctx, spec.serviceId, primaryNode(spec)),
    secret: await replicationSecret(ctx.layout, spec.serviceId),
    synchronousStandbys: synchronousStandbyNames(spec.ha.syncReplicaCount, syncCandidates),
  };
}

/** The administrative connection to one node of a service (admin.ts). */
export function adminOf(ctx: DriverContext, id: string, node: SpecNode) {
  const ref = { id, node: node.index };
  return {
    socketDir: ctx.layout.socketDir(ref),
    port: node.port,
    pgdata: ctx.layout.pgdata(ref),
    bounds: ctx.adminBounds,
  };
}

/** The node directories of service `id` (their indices). */
export async function nodeIndices(ctx: DriverContext, id: string): Promise<number[]> {
  try {
    return (await readdir(ctx.layout.instanceDir(id)))
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .sort((a, b) => a - b);
  } catch {
    return [];
  }
}

/**
 * Stops (immediately: their data is going away) and removes the nodes the
 * spec no longer has; a wait while one still stops.
 */
async function removeSurplusNodes(
  ctx: DriverContext,
  spec: ServiceSpec,
): Promise<Progress | undefined> {
  const wanted = new Set(spec.nodes.map((n) => n.index));
  const id = spec.serviceId;
  for (const index of await nodeIndices(ctx, id)) {
    if (wanted.has(index)) continue;
    const ref = { id, node: index };
    const pgdata = ctx.layout.pgdata(ref);
    const pm = await postmasterStatus(pgdata);
    const why = `removing standby ${nodeName(index)}`;
    if (pm.up) return wait(await ctx.stopper.step(pgdata, pm.pid, 'immediate'), why);
    const starting = ctx.spawned.get(pgdata);
    if (starting && !starting.proc.exit) {
      signalAll([starting.proc.pid], 'SIGQUIT');
      return wait(100, why);
    }
    const left = await clusterProcesses(pgdata);
    if (left.length > 0) {
      signalAll(left, 'SIGKILL');
      return wait(100, why);
    }
    if (!(await ctx.cgroups.remove(nodeUnit(ref)))) return wait(100, why);
    ctx.stopper.forget(pgdata);
    ctx.spawned.delete(pgdata);
    await removeTrees([ctx.layout.socketDir(ref), ctx.layout.nodeDir(ref)]);
    ctx.log.info({ serviceId: id, node: index }, 'removed a standby');
  }
  return undefined;
}

/**
 * What each node of the service is now. A node that does not answer is
 * reported not ready, with no role; lag comes from the primary's
 * pg_stat_replication.
 */
export async function observeNodes(ctx: DriverContext, spec: ServiceSpec): Promise<ObservedNode[]> {
  const out: ObservedNode[] = [];
  const primary = primaryNode(spec);
  let lag = new Map<string, { lagBytes: number }>();
  for (const n of spec.nodes) {
    const ref = { id: spec.serviceId, node: n.index };
    const pm = await postmasterStatus(ctx.layout.pgdata(ref));
    const none: ObservedNode = {
      index: n.index,
      ready: false,
      actsAs: null,
      timeline: null,
      lsn: null,
      lagBytes: null,
    };
    if (!pm.up || (pm.state !== 'ready' && pm.state !== 'standby')) {
      out.push(none);
      continue;
    }
    try {
      const target = adminOf(ctx, spec.serviceId, n);
      const st = await nodeStatus(target);
      if (n.index === primary.index && !st.standby && spec.nodes.length > 1) {
        lag = await standbyLag(target);
      }
      const actsAs: NodeRole = st.standby ? 'standby' : 'primary';
      out.push({ ...none, ready: true, actsAs, timeline: st.timeline, lsn: st.lsn });
    } catch {
      out.push(none);
    }
  }
  return out.map((o) =>
    o.actsAs === 'standby' ? { ...o, lagBytes: lag.get(nodeName(o.index))?.lagBytes ?? null } : o,
  );
}
