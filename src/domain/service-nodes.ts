// A service's nodes, as recorded state (docs/architecture.md §9, "nodes are state"):
// its primary and its HA standbys, each with a stable index and name, a role,
// a port of its own, and what the driver last observed of it. Which node is
// the primary is written here and changes only through `promoteNode`; it is
// never implied by an index. Pure functions, no I/O.
//
// A service without HA replicas has one node, its primary, listening on the
// service's endpoint port itself (exactly as before nodes were recorded). A
// service with HA replicas has every node on a port of its own, and the
// endpoint port is the installation's proxy (HAProxy), which routes to the
// recorded primary: the endpoint survives a failover.

import type { NodeObservation, NodeRole, ServiceNode } from './node-records.js';
import type { HaConfig, Service } from './types.js';

export type { NodeObservation, NodeRole, ServiceNode };

/** A node's name: its application_name, replication slot and HAProxy server name. */
export const nodeName = (index: number) => `node${index}`;

/** The service's nodes; a service recorded before nodes were has its primary on its port. */
export function nodesOf(svc: Pick<Service, 'port' | 'nodes'>): ServiceNode[] {
  return svc.nodes && svc.nodes.length > 0
    ? svc.nodes
    : [{ index: 0, role: 'primary', port: svc.port, observed: null }];
}

/** The recorded primary (a service always has exactly one). */
export function primaryOf(svc: Pick<Service, 'port' | 'nodes'>): ServiceNode {
  const nodes = nodesOf(svc);
  return nodes.find((n) => n.role === 'primary') ?? (nodes[0] as ServiceNode);
}

/** Whether the endpoint is the proxy in front of several nodes. */
export const isProxied = (ha: HaConfig) => ha.replicaCount > 0;

/**
 * The nodes a service should have for `ha`: the primary and the standbys it
 * keeps, lowest indices first; new standbys get the next free indices. Ports
 * come from `portFor` (the command allocates them, one owner per node); with
 * no replica the primary goes back to the service's port.
 */
export async function planNodes(
  svc: Pick<Service, 'port' | 'nodes'>,
  ha: HaConfig,
  portFor: (index: number) => Promise<number>,
): Promise<ServiceNode[]> {
  const current = nodesOf(svc);
  const primary = primaryOf(svc);
  const standbys = current.filter((n) => n.index !== primary.index).slice(0, ha.replicaCount);
  let next = Math.max(...current.map((n) => n.index)) + 1;
  while (standbys.length < ha.replicaCount) {
    standbys.push({ index: next++, role: 'standby', port: 0, observed: null });
  }
  const nodes = [primary, ...standbys];
  const out: ServiceNode[] = [];
  for (const n of nodes) {
    out.push({ ...n, port: isProxied(ha) ? await portFor(n.index) : svc.port });
  }
  return out;
}

/** The nodes that `planned` drops from `svc`: their ports go back. */
export function droppedNodes(svc: Pick<Service, 'port' | 'nodes'>, planned: ServiceNode[]) {
  const kept = new Set(planned.map((n) => n.index));
  return nodesOf(svc).filter((n) => !kept.has(n.index));
}

/**
 * Records what the driver observed of the nodes (by index); nodes it did not
 * report keep their last observation. Undefined when nothing changed but the
 * time of observation, so that an idle service is not rewritten at every look.
 */
export function observeNodes(
  svc: Service,
  seen: ReadonlyMap<number, NodeObservation>,
): Service | undefined {
  let changed = false;
  const nodes = nodesOf(svc).map((n) => {
    const o = seen.get(n.index);
    if (!o) return n;
    if (!sameObservation(n.observed, o)) changed = true;
    return { ...n, observed: o };
  });
  return changed ? { ...svc, nodes } : undefined;
}

function sameObservation(a: NodeObservation | null, b: NodeObservation): boolean {
  return (
    a !== null &&
    a.ready === b.ready &&
    a.actsAs === b.actsAs &&
    a.timeline === b.timeline &&
    a.lsn === b.lsn &&
    a.lagBytes === b.lagBytes
  );
}

/**
 * The standby `index` becomes the primary and the old primary a standby (to
 * be rewound or rebuilt). The one write that decides a failover: from here
 * on every converge treats `index` as the primary. Undefined when `index` is
 * the primary already or no standby of the service.
 */
export function promoteNode(svc: Service, index: number): Service | undefined {
  const nodes = nodesOf(svc);
  const target = nodes.find((n) => n.index === index);
  if (!target || target.role === 'primary') return undefined;
  return {
    ...svc,
    nodes: nodes.map((n) => ({
      ...n,
      role: n.index === index ? 'primary' : 'standby',
    })),
  };
}

/**
 * The standby a failover promotes: among the standbys that answered, the one
 * that received the most WAL (with `ANY k` quorum commit, whichever standby
 * acknowledged a commit, the most advanced one has it). Undefined when none
 * answered. `lsnOf` reads a standby's position, as observed just now.
 */
export function failoverCandidate(
  standbys: readonly { index: number; lsn: string | null }[],
): number | undefined {
  let best: { index: number; lsn: bigint } | undefined;
  for (const s of standbys) {
    if (s.lsn === null) continue;
    const lsn = lsnValue(s.lsn);
    if (lsn === undefined) continue;
    if (!best || lsn > best.lsn || (lsn === best.lsn && s.index < best.index)) {
      best = { index: s.index, lsn };
    }
  }
  return best?.index;
}

/** An LSN as PostgreSQL prints it ("16/B374D848") as a number. */
export function lsnValue(lsn: string): bigint | undefined {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn);
  if (!m) return undefined;
  return (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`);
}
