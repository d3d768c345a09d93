// A peering's statuses: created `pending`, then `active` or `failed` (with
// its error message) once the network provisioner answers or gives up.
// Undefined means the move does not apply (the peering is no longer pending).

import type { Peering, PeeringStatus } from './types.js';

export const NEW_PEERING_STATUS: PeeringStatus = 'pending';

export interface PeeringOutcome {
  status: 'active' | 'failed';
  provisionedId: string | null;
  errorMessage: string | null;
}

/** pending → active | failed, as the provisioner answered. */
export function settlePeering(p: Peering, outcome: PeeringOutcome): Peering | undefined {
  if (p.status !== 'pending') return undefined;
  return { ...p, ...outcome };
}

/** pending → failed: provisioning failed for good (or keeps failing). */
export function failPeering(p: Peering, reason: string): Peering | undefined {
  return settlePeering(p, { status: 'failed', provisionedId: null, errorMessage: reason });
}
