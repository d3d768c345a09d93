// Who may connect to a service in a VPC: the VPC's block and the blocks of
// the peer networks of its active peerings (what the network provisioner
// reported of them). The driver admits these instead of the public
// endpoint's CIDRs (docs/decisions.md, VPCs and peerings).

import type { Peering, Vpc } from './types.js';

/** The blocks a service attached to `vpc` admits; `peerings` are the VPC's. */
export function vpcNetwork(vpc: Vpc, peerings: readonly Peering[]): string[] {
  const peers = peerings
    .filter((p) => p.vpcId === vpc.id && p.status === 'active')
    .flatMap((p) => p.peerCidrs ?? []);
  return [...new Set([vpc.cidr, ...peers])];
}
