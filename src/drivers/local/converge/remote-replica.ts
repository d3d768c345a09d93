// Read replica sets across hosts, as the local driver of each host runs its
// part (docs/decisions.md, "Read replica sets across hosts"); the control
// plane places the set's nodes on other hosts than its service's primary
// and calls each host (drivers/hosts/replica-sets.ts):
//
// - the primary's host (admitReplicaSet): the set's addresses into the
//   service's replica-peers.json, which its pg_hba admits the replication
//   role from once the service is converged again; the role and the set's
//   slots on the primary; the role's password is the answer;
// - each node's host (applyReplicaNode): the node as a resource of its own
//   (`<set>n<i>`, its OS user, namespace and files, as an HA node across
//   hosts), a hot standby copied with pg_basebackup over TLS
//   (verify-full, the primary's host address, which its certificate names)
//   as the replication role, through its slot, then streaming the same way;
// - every database host (applyReplicaSetEndpoint): HAProxy on the set's
//   port, leastconn over the nodes at their hosts' addresses (each node's
//   port leads from its host's address into its namespace).

import { DONE, type Progress, wait } from '../../../domain/progress.js';
import {
  DriverError,
  type Health,
  patroniNodeId,
  type ReplicaNodeSpec,
  type ReplicaSetAdmission,
  type ReplicaSetServer,
  type ReplicaSetSpec,
  type ServiceSpec,
} from '../../driver.js';
import { admittedCidrs, postgresqlSettings } from '../config/conf.js';
import type { DriverContext } from '../context.js';
import { withAdmin } from '../node/admin.js';
import { dropInactiveSetSlots } from '../replication/set-slots.js';
import { nodeExists } from '../node/node-files.js';
import { postmasterStatus } from '../node/postmaster.js';
import { primaryNode } from '../primary-node.js';
import { ensureSlots, replicationSecret } from '../replication/replication.js';
import { writeReplicaPeers } from '../replication/replica-peers.js';
import type { NodeReplication } from '../replication/replication.js';
import { HOT_STANDBY_FLOOR, replicaName } from './replica-set.js';
import { ServiceNode } from './service-node.js';
import { RemoteReplicaSetPooler } from '../endpoints/replica-set-pooler.js';
import { nodePoolerRuns } from '../endpoints/patroni-pooler.js';

/** The node as the spec of a service of its own, of one standby node (index 0) on its own port. */
function nodeSpec(nodeId: string, n: ReplicaNodeSpec): ServiceSpec {
  const port = n.set.nodePorts[n.index];
  if (port === undefined) {
    throw new DriverError(`Read replica set ${n.set.replicaSetId} has no port for node ${n.index}.`, false); // prettier-ignore
  }
  return {
    ...n.set.primary,
    serviceId: nodeId,
    size: n.set.size,
    environment: n.set.environment,
    // The set's endpoint: not the node's port, so its pg_hba admits the proxies.
    port: n.set.port,
    pooler: { enabled: false, port: null },
    allowedCidrs: n.set.allowedCidrs,
    ha: { replicaCount: 0, syncReplicaCount: 0 },
    nodes: [{ index: 0, role: 'standby', port }],
    source: { kind: 'empty' },
  };
}

/** The primary's administrative door on this host. */
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

/**
 * On the primary's host, after the service was converged with the set's
 * addresses in its peers (the caller converges it): the replication role
 * with the service's secret and the set's slots. The secret is this host's
 * (replicationSecret): the role's password is set to it here.
 */
export async function ensureReplicaSetSlots(
  ctx: DriverContext,
  spec: ServiceSpec,
  admit: ReplicaSetAdmission,
): Promise<{ done: false; retryAfterMs: number; reason: string } | { done: true; secret: string }> {
  const primary = primaryAdmin(ctx, spec);
  const pm = await postmasterStatus(primary.pgdata);
  if (!pm.up || pm.state !== 'ready') {
    return wait(500, `waiting for the primary of service ${spec.serviceId}`) as {
      done: false;
      retryAfterMs: number;
      reason: string;
    };
  }
  // A service moved to this host (a drain, a lost host's) recovers its
  // archive first, accepting connections meanwhile: nothing can be
  // written (its role's password) before it is open.
  const recovering = await withAdmin(primary, 'postgres', async (c) => {
    const { rows } = await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
    return rows[0]?.r === true;
  }).catch(() => true);
  if (recovering) {
    return wait(1000, `waiting for service ${spec.serviceId} to finish its recovery`) as {
      done: false;
      retryAfterMs: number;
      reason: string;
    };
  }
  const secret = await replicationSecret(ctx.layout, spec.serviceId);
  try {
    await ensureSlots(primary, secret, admit.slots, `rs_${admit.replicaSetId}_`);
  } catch (err) {
    throw new DriverError(
      `Could not prepare replication on service ${spec.serviceId}: ${(err as Error).message}`,
      true,
    );
  }
  return { done: true, secret };
}

/** The set's addresses written into the service's peers (its pg_hba follows at its converge). */
export function admitPeers(ctx: DriverContext, serviceId: string, admit: ReplicaSetAdmission) {
  return writeReplicaPeers(ctx.layout, serviceId, admit.replicaSetId, admit.addresses);
}

/**
 * The set's slots on the primary dropped (its nodes are gone: an active
 * slot is a wait) and its addresses no longer admitted (at the service's
 * converge the caller runs next).
 */
export async function releaseReplicaSetOnPrimary(
  ctx: DriverContext,
  spec: ServiceSpec,
  setId: string,
): Promise<Progress> {
  const primary = primaryAdmin(ctx, spec);
  const pm = await postmasterStatus(primary.pgdata);
  if (pm.up && pm.state === 'ready') {
    const active = await withAdmin(primary, 'postgres', (c) =>
      dropInactiveSetSlots(c, setId),
    ).catch(() => 0);
    if (active > 0) return wait(500, "waiting for the replica set's nodes to stop streaming");
  }
  await writeReplicaPeers(ctx.layout, spec.serviceId, setId, []);
  return DONE;
}

/** One step of this host's node of a set: DONE once it runs as a hot standby of its primary. */
export async function convergeReplicaNode(
  ctx: DriverContext,
  nodeId: string,
  n: ReplicaNodeSpec,
): Promise<Progress> {
  if (!ctx.networks.enabled) {
    throw new DriverError(
      'A read replica set across hosts needs service networks (--service-network): its nodes\' ports are forwarded into their namespaces.', // prettier-ignore
      false,
    );
  }
  const spec = nodeSpec(nodeId, n);
  const port = (spec.nodes[0] as { port: number }).port;
  const poolerPort = n.pooler && n.set.pooler.port !== null ? [n.set.pooler.port] : [];
  await ctx.networks.forward(nodeId, { ports: [port, ...poolerPort] });
  const net = await ctx.networks.ensure(nodeId);
  const floor = postgresqlSettings(
    n.set.primary,
    { socketDir: '', backupConf: '', pgbackrest: '', forkSourceConf: '', forkSourcePg: '' },
    { listenAddresses: ctx.listenAddresses, publicCidrs: ctx.publicCidrs },
  );
  const replication: NodeReplication = {
    primary: { index: 0, role: 'primary', port: n.source.port },
    // Not used across hosts (NodeReplication.remote): the primary is not here.
    primaryAdmin: { socketDir: '/nonexistent', port: n.source.port, pgdata: '/nonexistent', bounds: ctx.adminBounds }, // prettier-ignore
    separateUser: true,
    secret: n.secret,
    synchronousStandbys: '',
    nameOf: () => replicaName(n.set.replicaSetId)(n.index),
    floor: Object.fromEntries(HOT_STANDBY_FLOOR.map((k) => [k, floor[k] ?? '0'])),
    remote: {
      host: n.source.host,
      names: n.names,
      // HAProxy on every database host; on this one, from the namespace's gateway.
      proxies: [...n.names, net.hostAddress],
      ...(n.noSlot ? { noSlot: true } : {}),
    },
  };
  const progress = await new ServiceNode(ctx, spec, spec.nodes[0], replication).converge();
  // Its host's pooler of the set, when this node runs it (ReplicaNodeSpec.pooler),
  // once the node runs; stopped and removed otherwise.
  if (!n.pooler) {
    const stopped = await new RemoteReplicaSetPooler(ctx, n.set, nodeId, 1).stop(true);
    if (!stopped.done) return stopped;
    return progress;
  }
  if (!progress.done) return progress;
  const pooler = new RemoteReplicaSetPooler(ctx, n.set, nodeId, n.pooler.poolers);
  return pooler.converge(await ctx.users.ensure(nodeId));
}

/** 'running' once the node's server runs and its WAL receiver streams. */
export async function inspectReplicaNode(
  ctx: DriverContext,
  nodeId: string,
  n: ReplicaNodeSpec,
): Promise<Health> {
  const ref = { id: nodeId, node: 0 };
  if (!(await nodeExists(ctx.layout, ref))) return 'missing';
  const pgdata = ctx.layout.pgdata(ref);
  const pm = await postmasterStatus(pgdata);
  if (!pm.up) return 'failed';
  const admin = {
    socketDir: ctx.layout.socketDir(ref),
    port: (nodeSpec(nodeId, n).nodes[0] as { port: number }).port,
    pgdata,
    bounds: ctx.adminBounds,
  };
  try {
    const streaming = await withAdmin(admin, 'postgres', async (c) => {
      const { rows } = await c.query<{ status: string }>('SELECT status FROM pg_stat_wal_receiver');
      return rows[0]?.status === 'streaming';
    });
    if (!streaming) return 'failed';
  } catch {
    return 'failed';
  }
  // Its host's pooler of the set, when it runs it: one that died is started again by the converge.
  return n.pooler && !(await nodePoolerRuns(ctx, nodeId)) ? 'failed' : 'running';
}

/** This host's endpoint of the set: its port, leastconn over its nodes at their hosts' addresses. */
export async function ensureReplicaSetEndpoint(
  ctx: DriverContext,
  spec: ReplicaSetSpec,
  servers: readonly ReplicaSetServer[],
): Promise<void> {
  await ctx.haproxy.ensureService(
    spec.replicaSetId,
    spec.port,
    servers.map((s) => ({
      index: s.index,
      host: s.host,
      port: s.port,
      enabled: s.enabled !== false,
    })),
    [...admittedCidrs(spec, ctx.publicCidrs), ...setPoolerSource(ctx, spec, servers)],
    'leastconn',
  );
}

/**
 * The address this host's pooler of the set comes from while the set's
 * pooler is enabled: the namespace of its node of the lowest index here
 * (the one that runs it), admitted besides the set's access rules.
 */
function setPoolerSource(
  ctx: Pick<DriverContext, 'networks' | 'publicHost'>,
  spec: ReplicaSetSpec,
  servers: readonly { index: number; host: string }[],
): string[] {
  if (!spec.pooler.enabled) return [];
  const here = servers.filter((s) => s.host === ctx.publicHost).map((s) => s.index);
  if (here.length === 0) return [];
  const net = ctx.networks.get(patroniNodeId(spec.replicaSetId, Math.min(...here)));
  return net ? [`${net.address}/32`] : [];
}
