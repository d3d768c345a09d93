// The read replica set state machine (docs/architecture.md §8):
//
//   create   (none)  → creating → active   (error when provisioning fails)
//   resize   active  → resizing → active    (also from error: a user's retry)
//   delete   any but deleting → deleting → gone
//
// The engine's own moves (error, settling) are in replica-set-transitions.ts.

import { conflict } from './errors.js';
import type { ReplicaSet, ReplicaSetStatus, ServiceStatus } from './types.js';

export type ReplicaSetAction = 'resize' | 'delete' | 'configure';

const RULES: Record<
  ReplicaSetAction,
  { from: readonly ReplicaSetStatus[]; to?: ReplicaSetStatus; hint: string }
> = {
  resize: { from: ['active', 'error'], to: 'resizing', hint: 'resize it once it is active' },
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

/** The replica set after a request's `action`, or the CONFLICT of replicaSetMove. */
export function applyReplicaSetAction(rs: ReplicaSet, action: ReplicaSetAction): ReplicaSet {
  const to = replicaSetMove(rs.id, rs.status, action);
  return to === undefined ? rs : { ...rs, status: to };
}

/** The status a new replica set starts in. */
export const NEW_REPLICA_SET_STATUS: ReplicaSetStatus = 'creating';

/** Where the engine settles a replica set resting in a transitional status once converged. */
export const REPLICA_SET_SETTLES_TO: Readonly<Partial<Record<ReplicaSetStatus, ReplicaSetStatus>>> =
  { creating: 'active', resizing: 'active', error: 'active' };

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
