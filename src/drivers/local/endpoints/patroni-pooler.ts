// The connection pooler of an HA service across hosts (docs/decisions.md,
// "HA across hosts": the pooler), on each host that runs a node of the
// service: a PgBouncer like a service's (pooler.ts), run as the node's OS
// user (`<service>n<i>`: its files, cgroups and processes go with the
// node's), in the node's network namespace, on the pooler's port
// forwarded there from the host's address like the node's own
// (patroni/node-archive.ts nodePorts).
//
// Its server is this host's endpoint of the service (patroni-endpoint.ts:
// HAProxy, routing to whichever node Patroni made the leader by its
// checks), so the pooler follows a failover or a switchover without Basin,
// as a client of the endpoint does. It reaches it at the host's own
// address, which every node's certificate names (ha-nodes.ts gives every
// database host's address), over TLS with verify-full against the host's
// CA file (its CA, then the installation's services root: the leader's
// certificate, from another host's CA, chains to that root). HAProxy sees
// it come from the node's namespace address, which the frontend admits
// besides the service's access rules while the pooler is enabled.
//
// Clients are shown the node's certificate (it names every database
// host's address, so verify-full holds through any host's pooler), log in
// as tsdbadmin with the service's SCRAM verifier, replayed to the leader
// (SCRAM pass-through: the leader holds the same verifier, set by the
// node's apply, applySql), from the CIDRs the service admits, as on one host.
//
// Every host's pooler reaches the same leader: the server connections one
// pooler would take (poolSizes: half of max_connections) are divided
// among the service's nodes, so all of them together take what one takes.

import type { ServiceSpec } from '../../driver.js';
import { poolSizes, type PoolSizes } from '../config/pooler-conf.js';
import type { DriverContext } from '../context.js';
import type { OsUser } from '../host/os-user.js';
import type { Progress } from '../../../domain/progress.js';
import { Pooler, type PoolerCtx, PoolerProcesses } from './pooler.js';

/** What this part needs of the driver (context.ts): a pooler's, and the public host. */
type Ctx = PoolerCtx & Pick<DriverContext, 'publicHost'>;

/** The node's certificate and key (patroni-node.ts: tls/node.crt, tls/node.key). */
export interface NodeTls {
  certFile: string;
  keyFile: string;
}

/** One pooler's pools divided among `nodes` poolers, at least one server connection each. */
export function nodePoolSizes(whole: PoolSizes, nodes: number): PoolSizes {
  const n = Math.max(1, nodes);
  return {
    session: Math.max(1, Math.floor(whole.session / n)),
    transaction: Math.max(1, Math.floor(whole.transaction / n)),
    maxClients: whole.maxClients,
  };
}

export class PatroniPooler extends Pooler {
  /** `local`: the node's resource on this host (patroniNodeId). */
  constructor(ctx: Ctx, spec: ServiceSpec, local: string, tls: NodeTls) {
    super(ctx, {
      id: local,
      kind: 'serviceId',
      port: spec.pooler.port,
      sizes: nodePoolSizes(poolSizes(spec), spec.nodes.length),
      size: spec.size,
      server: {
        host: ctx.publicHost,
        port: spec.port,
        caFile: ctx.layout.pooler(local).caFile,
        verifyFull: true,
      },
      tls,
      passwordVerifier: spec.passwordVerifier,
      allowedCidrs: spec.allowedCidrs,
    });
  }
}

/**
 * One step of this host's pooler of the service towards the spec: running
 * while the service runs with its pooler enabled (the node's apply calls
 * it once its node runs as Patroni says), stopped otherwise, its files
 * removed when it is disabled.
 */
export async function convergeNodePooler(
  ctx: Ctx,
  spec: ServiceSpec,
  local: string,
  tls: NodeTls,
  user: OsUser,
): Promise<Progress> {
  const pooler = new PatroniPooler(ctx, spec, local, tls);
  if (!spec.running || !spec.pooler.enabled) return pooler.stop(!spec.pooler.enabled);
  return pooler.converge(user);
}

/** One step of stopping the node's pooler (the service stops), its files kept. */
export function stopNodePooler(ctx: Ctx, local: string): Promise<Progress> {
  return new PoolerProcesses(ctx, { id: local, kind: 'serviceId' }).stop(false);
}

/**
 * Whether the node's pooler runs whole (every process it was started
 * with); its log is cut meanwhile, as a service's at each inspection.
 */
export async function nodePoolerRuns(ctx: Ctx, local: string): Promise<boolean> {
  const p = new PoolerProcesses(ctx, { id: local, kind: 'serviceId' });
  await p.trimLog();
  const pids = await p.pids();
  return pids.length > 0 && pids.every((x) => x !== undefined);
}
