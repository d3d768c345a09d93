// The read replica set state machine (DESIGN.md §2):
//
//   create   (none)  → creating → active   (error when provisioning fails)
//   resize   active  → resizing → active
//   delete   any but deleting → deleting → gone

import { conflict } from './errors.js';
import type { ReplicaSetStatus, ServiceStatus } from './types.js';

export type ReplicaSetAction = 'resize' | 'delete' | 'configure';

const RULES: Record<
  ReplicaSetAction,
  { from: readonly ReplicaSetStatus[]; to?: ReplicaSetStatus; hint: string }
> = {
  resize: { from: ['active'], to: 'resizing', hint: 'resize it once it is active' },
  delete: {
    from: ['creating', 'active', 'resizing', 'error'],
    to: 'deleting',
    hint: 'it is already being deleted',
  },
  configure: {
    from: ['creating', 'active', 'resizing', 'error'],
    hint: 'it is being deleted',
  },
};

export function replicaSetMove(
  id: string,
  status: ReplicaSetStatus,
  action: ReplicaSetAction,
): ReplicaSetStatus | undefined {
  const rule = RULES[action];
  if (!rule.from.includes(status)) {
    throw conflict(
      `Cannot ${action === 'configure' ? 'change' : action} read replica set ${id} while it is ${status}: ${rule.hint}.`,
    );
  }
  return rule.to;
}

/** How a replica set looks through the Service view (`GET /services/{replica_set_id}`). */
export function replicaSetAsServiceStatus(status: ReplicaSetStatus): ServiceStatus {
  switch (status) {
    case 'creating':
    case 'resizing':
      return 'CONFIGURING';
    case 'active':
      return 'READY';
    case 'deleting':
      return 'DELETING';
    case 'error':
      return 'UNSTABLE';
  }
}
