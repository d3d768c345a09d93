// The status moves the engine makes on a read replica set, as named pure
// functions (see service-transitions.ts for the conventions): undefined means
// the move does not apply to the status the replica set is in.
//
//   markReplicaSetFailed      creating | resizing | active → error
//   settleReplicaSet(from,to) from → to
//   recoverReplicaSet         error → active
//   cascadeDelete             any → deleting (its service is being deleted)

import type { ReplicaSetConvergePayload } from './operations.js';
import type { ReplicaSet, ReplicaSetStatus } from './types.js';

function move(rs: ReplicaSet, from: readonly ReplicaSetStatus[], to: ReplicaSetStatus) {
  return from.includes(rs.status) ? { ...rs, status: to } : undefined;
}

/** An operation on the replica set failed for good (or keeps failing). */
export function markReplicaSetFailed(rs: ReplicaSet): ReplicaSet | undefined {
  return move(rs, ['creating', 'resizing', 'active'], 'error');
}

export function settleReplicaSet(
  rs: ReplicaSet,
  from: ReplicaSetStatus,
  to: ReplicaSetStatus,
): ReplicaSet | undefined {
  return move(rs, [from], to);
}

/** error → active: a converge succeeded after all. */
export function recoverReplicaSet(rs: ReplicaSet): ReplicaSet | undefined {
  return move(rs, ['error'], 'active');
}

/** Where a finished converge leaves the replica set (like `converged` for services). */
export function replicaSetConverged(
  rs: ReplicaSet,
  payload: ReplicaSetConvergePayload,
): ReplicaSet | undefined {
  const settled =
    payload.from && payload.settle ? settleReplicaSet(rs, payload.from, payload.settle) : undefined;
  return settled ?? recoverReplicaSet(rs);
}

/** Deleting a service deletes its replica sets, whatever they were doing. */
export function cascadeDelete(rs: ReplicaSet): ReplicaSet | undefined {
  return move(rs, ['creating', 'active', 'resizing', 'error'], 'deleting');
}
