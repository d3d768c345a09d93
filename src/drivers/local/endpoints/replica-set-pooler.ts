// A read replica set's connection pooler: a PgBouncer like a service's
// (pooler.ts), run as the set's OS user (its nodes' user), showing the set's
// certificate (node 0's, issued by the installation's CA for the public host
// and loopback, like every node's), taking the service's tsdbadmin password
// (the set's nodes are standbys: they have the primary's pg_authid, so
// PgBouncer's SCRAM pass-through works against them with the service's
// verifier). It reaches the set's nodes through the set's endpoint, the
// installation's HAProxy (leastconn), over TCP with TLS: both pools spread
// over the nodes as direct clients do, and what a set's nodes refuse (any
// write: they are in recovery) is refused through the pooler alike.
//
// Behind HAProxy the pooler is a client of the set's frontend like any
// other, from the address it connects from: the set's network namespace's
// own address (where services have namespaces: it reaches the frontend at
// its gateway, an address of the host), or loopback when Basin listens on
// every address: the frontend admits that address besides the set's
// access rules while the pooler is enabled (replica-set.ts)
// (docs/security.md).

import { isIP } from 'node:net';
import type { ReplicaSetSpec } from '../../driver.js';
import { Pooler, pgdataTls, type PoolerCtx } from './pooler.js';
import { replicaSetPoolSizes } from '../config/pooler-conf.js';
import type { DriverContext } from '../context.js';
import { nodePoolSizes } from './patroni-pooler.js';

/** What this part needs of the driver (context.ts): a pooler's. */
type Ctx = PoolerCtx;

export class ReplicaSetPooler extends Pooler {
  constructor(ctx: Ctx, spec: ReplicaSetSpec) {
    super(ctx, {
      id: spec.replicaSetId,
      kind: 'replicaSetId',
      port: spec.pooler.port,
      sizes: replicaSetPoolSizes(spec),
      size: spec.size,
      server: {
        host: hostSideOf(ctx, spec.replicaSetId) ?? endpointHost(ctx.listenAddresses),
        port: spec.port,
        caFile: ctx.layout.pooler(spec.replicaSetId).caFile,
      },
      tls: pgdataTls(ctx.layout.pgdata({ id: spec.replicaSetId, node: 0 })),
      passwordVerifier: spec.primary.passwordVerifier,
      allowedCidrs: spec.allowedCidrs,
    });
  }
}

/**
 * Where a set's pooler reaches the set's endpoint on this host: the first of
 * the listen addresses HAProxy binds (haproxy.ts), loopback for every
 * address. A connection to a local address comes from that address too.
 */
export function endpointHost(listenAddresses: string): string {
  const first = listenAddresses.split(',')[0]?.trim() ?? '*';
  if (first === '' || first === '*' || first === '0.0.0.0' || first === 'localhost') {
    return '127.0.0.1';
  }
  return first === '::' ? '::1' : first;
}

/**
 * Where the processes of `id` (a read replica set's), in its network
 * namespace, reach this host's endpoints: the first address HAProxy
 * binds, or the namespace's gateway when it binds every address (where a
 * service's endpoint, translated, leads too). Undefined without
 * namespaces, or before the set's is made (endpointHost then).
 */
export function hostSideOf(ctx: Ctx, id: string): string | undefined {
  const gateway = ctx.networks.get(id)?.hostAddress;
  if (gateway === undefined) return undefined;
  const host = endpointHost(ctx.listenAddresses);
  return host === '127.0.0.1' || host === '::1' ? gateway : host;
}

/** The block the set's frontend admits for its pooler: that one address. */
export function poolerSourceCidr(ctx: Ctx, id: string): string {
  const net = ctx.networks.get(id);
  if (net) return `${net.address}/32`;
  const host = endpointHost(ctx.listenAddresses);
  return isIP(host) === 6 ? `${host}/128` : `${host}/32`;
}

/**
 * A read replica set's pooler across hosts (docs/decisions.md, "Read
 * replica sets across hosts": the pooler): on each host of the set's nodes,
 * run as one node of it there (`nodeId`, `<set>n<i>`, the lowest index on
 * the host), in that node's namespace; its server is the set's endpoint on
 * this host (HAProxy, leastconn over every node of the set) at the host's
 * own address, over TLS with verify-full (every set node's certificate
 * names every database host's address); the node's certificate shown to
 * clients; the service's tsdbadmin verifier (SCRAM pass-through: the
 * nodes are standbys of the primary, with its pg_authid). The set's pools
 * are divided among its `poolers` (hosts).
 */
export class RemoteReplicaSetPooler extends Pooler {
  constructor(
    ctx: Ctx & Pick<DriverContext, 'publicHost'>,
    spec: ReplicaSetSpec,
    nodeId: string,
    poolers: number,
  ) {
    super(ctx, {
      id: nodeId,
      kind: 'replicaSetId',
      port: spec.pooler.port,
      sizes: nodePoolSizes(replicaSetPoolSizes(spec), poolers),
      size: spec.size,
      server: {
        host: ctx.publicHost,
        port: spec.port,
        caFile: ctx.layout.pooler(nodeId).caFile,
        verifyFull: true,
      },
      tls: pgdataTls(ctx.layout.pgdata({ id: nodeId, node: 0 })),
      passwordVerifier: spec.primary.passwordVerifier,
      allowedCidrs: spec.allowedCidrs,
    });
  }
}
