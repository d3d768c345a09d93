import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  cascadeDelete,
  markReplicaSetFailed,
  recoverReplicaSet,
  replicaSetConverged,
  settleReplicaSet,
} from './replica-set-transitions.js';
import { REPLICA_SET_STATUSES, type ReplicaSet, type ReplicaSetStatus } from './types.js';

const rs = (status: ReplicaSetStatus) => ({ id: 'r1', version: 1, status }) as ReplicaSet;

function table(move: (r: ReplicaSet) => ReplicaSet | undefined) {
  const out: Partial<Record<ReplicaSetStatus, ReplicaSetStatus>> = {};
  for (const status of REPLICA_SET_STATUSES) {
    const next = move(rs(status));
    if (next) out[status] = next.status;
  }
  return out;
}

test('replica set transitions', () => {
  assert.deepEqual(table(markReplicaSetFailed), {
    creating: 'error',
    resizing: 'error',
    active: 'error',
  });
  assert.deepEqual(table(recoverReplicaSet), { error: 'active' });
  assert.deepEqual(
    table((r) => settleReplicaSet(r, 'resizing', 'active')),
    {
      resizing: 'active',
    },
  );
  assert.deepEqual(table(cascadeDelete), {
    creating: 'deleting',
    active: 'deleting',
    resizing: 'deleting',
    error: 'deleting',
  });
  assert.deepEqual(
    table((r) => replicaSetConverged(r, { from: 'creating', settle: 'active' })),
    {
      creating: 'active',
      error: 'active',
    },
  );
});
