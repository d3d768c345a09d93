// A peering's statuses: created `pending`, then `active` or `failed` (with
// its error message) once the network provisioner answers or gives up.
// Undefined means the move does not apply (the peering is no longer pending).

import { format, parseVpcCidr } from './cidr.js';
import type { Peering, PeeringStatus } from './types.js';

export const NEW_PEERING_STATUS: PeeringStatus = 'pending';

/** Where a pending peering goes once the provisioner has answered. */
export type SettledPeeringStatus = Exclude<PeeringStatus, typeof NEW_PEERING_STATUS>;

export interface PeeringOutcome {
  status: SettledPeeringStatus;
  provisionedId: string | null;
  errorMessage: string | null;
  /**
   * The peer network's blocks, when the provisioner learns them (an AWS
   * accepter VPC's CIDRs, say): the VPC's services admit them while the
   * peering is active. Only private IPv4 blocks are kept.
   */
  peerCidrs?: string[];
}

/**
 * pending → active | failed, as the provisioner answered. Of the peer's
 * blocks, only private IPv4 blocks a VPC could have are kept (a provisioner
 * is not trusted to open a service to the internet).
 */
export function settlePeering(p: Peering, outcome: PeeringOutcome): Peering | undefined {
  if (p.status !== 'pending') return undefined;
  const { peerCidrs, ...rest } = outcome;
  const kept = rest.status === 'active' ? (peerCidrs ?? []).filter(isVpcCidr) : [];
  return { ...p, ...rest, ...(kept.length > 0 ? { peerCidrs: kept } : {}) };
}

function isVpcCidr(text: string): boolean {
  try {
    return format(parseVpcCidr(text)) === text;
  } catch {
    return false;
  }
}

/** pending → failed: provisioning failed for good (or keeps failing). */
export function failPeering(p: Peering, reason: string): Peering | undefined {
  return settlePeering(p, { status: 'failed', provisionedId: null, errorMessage: reason });
}
