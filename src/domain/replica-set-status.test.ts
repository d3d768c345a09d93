import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from './errors.js';
import {
  type ReplicaSetAction,
  replicaSetAsServiceStatus,
  replicaSetMove,
} from './replica-set-status.js';
import { REPLICA_SET_STATUSES, type ReplicaSetStatus, type ServiceStatus } from './types.js';

const TABLE: Record<ReplicaSetAction, { from: ReplicaSetStatus[]; to?: ReplicaSetStatus }> = {
  resize: { from: ['active', 'error'], to: 'resizing' },
  delete: { from: ['creating', 'active', 'resizing', 'error'], to: 'deleting' },
  configure: { from: ['creating', 'active', 'resizing', 'error'] },
};

for (const [action, rule] of Object.entries(TABLE) as [
  ReplicaSetAction,
  (typeof TABLE)['resize'],
][]) {
  for (const status of REPLICA_SET_STATUSES) {
    const allowed = rule.from.includes(status);
    test(`replica set ${action} from ${status} is ${allowed ? `allowed → ${rule.to ?? status}` : 'a CONFLICT'}`, () => {
      if (allowed) {
        assert.equal(replicaSetMove('rs1', status, action), rule.to);
        return;
      }
      assert.throws(
        () => replicaSetMove('rs1', status, action),
        (err: unknown) => {
          assert.ok(err instanceof AppError);
          assert.equal(err.code, 'CONFLICT');
          assert.equal(err.status, 409);
          assert.ok(
            err.message.includes(`read replica set rs1 while it is ${status}`),
            err.message,
          );
          return true;
        },
      );
    });
  }
}

test('replica set conflict messages say what to do', () => {
  assert.throws(() => replicaSetMove('rs1', 'creating', 'resize'), {
    message: /Cannot resize read replica set rs1 while it is creating: resize it once it is active/,
  });
  assert.throws(() => replicaSetMove('rs1', 'deleting', 'delete'), {
    message: /already being deleted/,
  });
  assert.throws(() => replicaSetMove('rs1', 'deleting', 'configure'), {
    message: /Cannot change read replica set rs1 while it is deleting/,
  });
});

test('a replica set seen as a service has the matching service status', () => {
  const expected: Record<ReplicaSetStatus, ServiceStatus> = {
    creating: 'CONFIGURING',
    active: 'READY',
    resizing: 'CONFIGURING',
    deleting: 'DELETING',
    error: 'UNSTABLE',
  };
  for (const status of REPLICA_SET_STATUSES) {
    assert.equal(replicaSetAsServiceStatus(status), expected[status], status);
  }
});
