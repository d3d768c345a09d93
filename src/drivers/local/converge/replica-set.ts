// Read replica sets on the local driver: `nodes` hot standbys of a service,
// physical (read-only by construction, not by a setting), each on a port of
// its own, behind one endpoint of the installation's HAProxy that sends
// each new connection to the node with the fewest (leastconn).
//
// - Each node streams from the service's *endpoint* (its primary, or the
//   HAProxy in front of its primary when it has HA replicas), with TLS,
//   as the service's replication role, through a slot of its own on the
//   primary (`rs_<set>_<i>`). Through a failover it follows the new
//   primary without being told: the endpoint leads there, and it follows
//   the newest timeline (unless it went past where that timeline began:
//   below).
// - A set runs as an OS user of its own (the set's id), sized by its own
//   cpu/memory, with what a hot standby needs at least as high as its
//   primary's (max_connections…) raised to the primary's.
// - A resize restarts one node at a time (the next only once the previous
//   accepts connections again), so the set stays readable.
// - A node that cannot follow the primary after a failover (it got WAL
//   past the point where the new primary's timeline began) is rewound or
//   rebuilt, one node at a time, while the others serve (follow.ts).
// - Its application_name is never `node<i>`: a read replica must never
//   count as one of the service's synchronous standbys.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DONE, type Progress, wait } from '../../../domain/progress.js';
import { DriverError, type ReplicaSetSpec, type ServiceSpec, type SpecNode } from '../../driver.js';
import { withAdmin } from '../node/admin.js';
import { dropInactiveSetSlots } from '../replication/set-slots.js';
import { admittedCidrs, postgresqlSettings, processCounts } from '../config/conf.js';
import type { ProcessCounts } from '../host/cgroups/node-bounds.js';
import { nodeIndices } from './converge-nodes.js';
import { mkdirIn, nodeExists, writeRootFile } from '../node/node-files.js';
import { postmasterPort, postmasterStatus } from '../node/postmaster.js';
import { hostSideOf, poolerSourceCidr } from '../endpoints/replica-set-pooler.js';
import { ensureSlots, replicationSecret } from '../replication/replication.js';
import { readNodeState } from '../node/node-state.js';
import { ServiceNode } from './service-node.js';
import { latestTimeline } from '../replication/timeline.js';
import { inStorageRecovery } from '../storage/node-storage.js';
import { primaryNode } from '../primary-node.js';
import type { DriverContext } from '../context.js';
import type { NodeReplication } from '../replication/replication.js';

/** A read replica node's application_name and slot on the primary. */
export const replicaName = (setId: string) => (index: number) => `rs_${setId}_${index}`;

/** What a hot standby must have at least as high as its primary (PostgreSQL refuses to start otherwise). */
export const HOT_STANDBY_FLOOR = ['max_connections', 'max_worker_processes'] as const;

/** The set as the spec of a service of its own: its nodes are standbys of the service. */
function nodesSpec(spec: ReplicaSetSpec): ServiceSpec {
  return {
    ...spec.primary,
    serviceId: spec.replicaSetId,
    size: spec.size,
    environment: spec.environment,
    port: spec.port,
    // The set's pooler does not use the nodes' sockets: it comes through the
    // endpoint (replica-set-pooler.ts), so their pg_hba.conf never changes for it.
    pooler: { enabled: false, port: null },
    allowedCidrs: spec.allowedCidrs,
    ha: { replicaCount: 0, syncReplicaCount: 0 },
    nodes: spec.nodePorts.map((port, index) => ({ index, role: 'standby' as const, port })),
    source: { kind: 'empty' },
  };
}

/**
 * What a set's nodes run with: their own size's connections and workers,
 * raised to their primary's (HOT_STANDBY_FLOOR), as their settings are.
 */
export function replicaSetCounts(spec: ReplicaSetSpec): ProcessCounts {
  const own = processCounts(nodesSpec(spec));
  const floor = processCounts(spec.primary);
  return {
    maxConnections: Math.max(own.maxConnections, floor.maxConnections),
    maxWorkerProcesses: Math.max(own.maxWorkerProcesses, floor.maxWorkerProcesses),
  };
}

/** The service primary's administrative door. */
function primaryAdmin(ctx: DriverContext, service: ServiceSpec) {
  const p = primaryNode(service);
  const ref = { id: service.serviceId, node: p.index };
  return {
    socketDir: ctx.layout.socketDir(ref),
    port: p.port,
    pgdata: ctx.layout.pgdata(ref),
    bounds: ctx.adminBounds,
  };
}

/** One step of converging a read replica set to `spec`. */
export async function convergeReplicaSet(
  ctx: DriverContext,
  spec: ReplicaSetSpec,
): Promise<Progress> {
  const id = spec.replicaSetId;
  if (spec.nodePorts.length !== spec.nodes) {
    throw new DriverError(`Read replica set ${id} has no ports for its nodes.`, false);
  }
  await mkdirIn(ctx.layout.instanceDir(id), 0o711);
  // Which service it streams from, for its delete (which is given only its id).
  await writeRootFile(
    join(ctx.layout.instanceDir(id), 'replica-set.json'),
    `${JSON.stringify({ serviceId: spec.serviceId })}\n`,
    { name: 'root', uid: 0, gid: 0 },
  );
  const secret = await replicationSecret(ctx.layout, spec.serviceId);
  const names = replicaName(id);
  const primary = primaryAdmin(ctx, spec.primary);
  const pm = await postmasterStatus(primary.pgdata);
  if (!pm.up || pm.state !== 'ready') {
    return wait(500, `waiting for the primary of service ${spec.serviceId}`);
  }
  // The primary in recovery for its storage (node-storage.ts) writes
  // nothing, roles and slots included: the set's slots are those it has.
  try {
    if (!inStorageRecovery(ctx.storage, spec.serviceId))
      await ensureSlots(
        primary,
        secret,
        spec.nodePorts.map((_, i) => names(i)),
        `rs_${id}_`,
      );
  } catch (err) {
    throw new DriverError(
      `Could not prepare replication on service ${spec.serviceId}: ${(err as Error).message}`,
      true,
    );
  }
  const nodes = nodesSpec(spec);
  const floor = postgresqlSettings(
    spec.primary,
    { socketDir: '', backupConf: '', pgbackrest: '', forkSourceConf: '', forkSourcePg: '' },
    { listenAddresses: ctx.listenAddresses, publicCidrs: ctx.publicCidrs },
  );
  const replication: NodeReplication = {
    // The service's endpoint: its primary, wherever a failover put it.
    primary: { index: primaryNode(spec.primary).index, role: 'primary', port: spec.primary.port },
    primaryAdmin: primary,
    separateUser: true,
    // From the set's own namespace, through the host (network/).
    via: hostSideOf(ctx, id),
    secret,
    synchronousStandbys: '',
    nameOf: names,
    floor: Object.fromEntries(HOT_STANDBY_FLOOR.map((k) => [k, floor[k] ?? '0'])),
  };
  // One node at a time: a resize restarts the next only once the previous is back.
  for (const n of nodes.nodes) {
    const p = await new ServiceNode(ctx, nodes, n, replication).converge();
    if (!p.done) return p;
  }
  await ctx.haproxy.ensureService(
    id,
    spec.port,
    nodes.nodes.map((n: SpecNode) => ({
      index: n.index,
      host: ctx.networks.serverHost(id),
      port: n.port,
      enabled: true,
    })),
    [
      ...admittedCidrs(nodes, ctx.publicCidrs),
      // The set's pooler is a client of the endpoint (replica-set-pooler.ts).
      ...(spec.pooler.enabled ? [poolerSourceCidr(ctx, id)] : []),
    ],
    'leastconn',
  );
  return DONE;
}

/**
 * 'running' when every node and the endpoint are up, and every node was
 * found to follow the primary's current timeline (follow.ts: a node that
 * was not is looked at by the apply this brings); 'missing' without nodes.
 */
export async function inspectReplicaSet(
  ctx: DriverContext,
  spec: ReplicaSetSpec,
): Promise<'running' | 'failed' | 'missing'> {
  const id = spec.replicaSetId;
  const indices = await nodeIndices(ctx, id);
  if (indices.length === 0) return 'missing';
  const timeline = await latestTimeline(primaryAdmin(ctx, spec.primary).pgdata);
  for (let i = 0; i < spec.nodes; i++) {
    const ref = { id, node: i };
    if (!(await nodeExists(ctx.layout, ref))) return 'failed';
    if (!(await postmasterStatus(ctx.layout.pgdata(ref))).up) return 'failed';
    if ((await readNodeState(ctx.layout.stateFile(ref))).follows !== timeline) return 'failed';
  }
  return (await ctx.haproxy.hasService(id)) ? 'running' : 'failed';
}

/**
 * Before a set's files go: its slots on the service's primary are dropped
 * (else the primary would keep WAL for it forever). Its nodes must have
 * stopped (an active slot cannot be dropped). A wait while they stop or
 * the primary does not answer.
 */
export async function dropReplicaSetSlots(
  ctx: DriverContext,
  id: string,
): Promise<Progress | undefined> {
  let serviceId: string;
  try {
    const meta = JSON.parse(
      await readFile(join(ctx.layout.instanceDir(id), 'replica-set.json'), 'utf8'),
    ) as { serviceId?: unknown };
    if (typeof meta.serviceId !== 'string' || !/^[a-z0-9]{1,32}$/.test(meta.serviceId)) {
      return undefined;
    }
    serviceId = meta.serviceId;
  } catch {
    return undefined; // never applied: no slots
  }
  // The service's node whose data is a primary's.
  for (const index of await nodeIndices(ctx, serviceId)) {
    const ref = { id: serviceId, node: index };
    const pgdata = ctx.layout.pgdata(ref);
    const pm = await postmasterStatus(pgdata);
    if (!pm.up || pm.state !== 'ready') continue;
    // The service's file, read without following a link (safe-fs.ts).
    const port = (await postmasterPort(pgdata)) ?? 0;
    const target = { socketDir: ctx.layout.socketDir(ref), port, pgdata, bounds: ctx.adminBounds };
    try {
      const left = await withAdmin(target, 'postgres', (c) => dropInactiveSetSlots(c, id));
      if (left > 0) return wait(200, 'waiting for the replica set to stop streaming');
    } catch {
      // Not the primary, or not answering: the next node, or the next call.
    }
  }
  return undefined;
}
