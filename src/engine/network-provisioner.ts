// VPC peerings connect a VPC to a network in another cloud account. One host
// cannot build such a link, so Basin's default provisioner records the
// peering and accepts it; an operator with a real network can plug in a
// provisioner that creates the link (and fails it with a reason when it can't),
// and reports the peer network's blocks, which the VPC's services then admit.
// The recording provisioner knows no peer network, so it opens nothing.

import { randomBytes } from 'node:crypto';
import type { PeeringOutcome } from '../domain/peering-transitions.js';
import type { Peering, Vpc } from '../domain/types.js';
import type { Progress } from '../domain/progress.js';

/** The peering settled (its statuses are the domain's), or not yet. */
export type ProvisionResult =
  ({ done: true } & PeeringOutcome) | Extract<Progress, { done: false }>;

export interface NetworkProvisioner {
  provision(vpc: Vpc, peering: Peering): Promise<ProvisionResult>;
}

export const recordingProvisioner: NetworkProvisioner = {
  async provision() {
    return {
      done: true,
      status: 'active',
      provisionedId: `pcx-${randomBytes(8).toString('hex')}`,
      errorMessage: null,
    };
  },
};
