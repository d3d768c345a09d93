import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from './errors.js';
import {
  applyServiceAction,
  type ServiceAction,
  serviceMove,
  SETTLES_TO,
  shouldRun,
} from './service-status.js';
import { type Service, SERVICE_STATUSES, type ServiceStatus } from './types.js';

const LIVE: ServiceStatus[] = SERVICE_STATUSES.filter((s) => s !== 'DELETING' && s !== 'DELETED');

/** Every action: the statuses it is allowed from, and where it moves the service. */
const TABLE: Record<
  Exclude<ServiceAction, 'reconfigure'>,
  { from: ServiceStatus[]; to: ServiceStatus | undefined; settle: ServiceStatus | undefined }
> = {
  // UNSTABLE takes stop, start, resize and setHA: a user's way to try again after a failure.
  stop: { from: ['READY', 'UNSTABLE'], to: 'PAUSING', settle: 'PAUSED' },
  start: { from: ['PAUSED', 'UNSTABLE'], to: 'RESUMING', settle: 'READY' },
  resize: { from: ['READY', 'UNSTABLE'], to: 'CONFIGURING', settle: 'READY' },
  setHA: { from: ['READY', 'UNSTABLE'], to: 'CONFIGURING', settle: 'READY' },
  delete: { from: LIVE, to: 'DELETING', settle: undefined },
  // A paused service forks from its backups or its stopped data directory.
  fork: { from: ['READY', 'PAUSED'], to: undefined, settle: undefined },
  configure: { from: LIVE, to: undefined, settle: undefined },
  addReplicaSet: { from: ['READY'], to: undefined, settle: undefined },
};

for (const [action, rule] of Object.entries(TABLE) as [
  keyof typeof TABLE,
  (typeof TABLE)['stop'],
][]) {
  for (const status of SERVICE_STATUSES) {
    const allowed = rule.from.includes(status);
    test(`${action} from ${status} is ${allowed ? `allowed → ${rule.to ?? status}` : 'a CONFLICT'}`, () => {
      if (allowed) {
        assert.equal(serviceMove('svc1', status, action), rule.to);
        const svc = { id: 'svc1', status } as Service;
        assert.deepEqual(applyServiceAction(svc, action), { ...svc, status: rule.to ?? status });
        // Where the request leaves it, the engine settles it as the rule says.
        if (rule.to && rule.to !== 'DELETING') assert.equal(SETTLES_TO[rule.to], rule.settle);
        return;
      }
      assert.throws(
        () => serviceMove('svc1', status, action),
        (err: unknown) => {
          assert.ok(err instanceof AppError);
          assert.equal(err.code, 'CONFLICT');
          assert.equal(err.status, 409);
          // The message names the service and the state that forbids the request.
          assert.match(err.message, /svc1/);
          assert.ok(err.message.includes(`while it is ${status}`), err.message);
          return true;
        },
      );
    });
  }
}

test('reconfigure: READY shows CONFIGURING until applied; other live statuses stay; DELETING is a CONFLICT', () => {
  for (const status of LIVE) {
    const svc = { id: 'svc1', status } as Service;
    const to = status === 'READY' ? 'CONFIGURING' : status;
    assert.deepEqual(applyServiceAction(svc, 'reconfigure'), { ...svc, status: to });
  }
  assert.equal(SETTLES_TO.CONFIGURING, 'READY');
  assert.throws(() => serviceMove('svc1', 'DELETING', 'reconfigure'), { code: 'CONFLICT' });
});

test('no request moves a service out of DELETING or DELETED', () => {
  for (const action of [...Object.keys(TABLE), 'reconfigure'] as ServiceAction[]) {
    for (const status of ['DELETING', 'DELETED'] as const) {
      assert.throws(() => serviceMove('svc1', status, action), { code: 'CONFLICT' });
    }
  }
});

test('conflict messages use a verb a person understands', () => {
  assert.throws(() => serviceMove('s', 'PAUSED', 'setHA'), {
    message: /Cannot change the HA configuration of service s while it is PAUSED/,
  });
  assert.throws(() => serviceMove('s', 'PAUSED', 'addReplicaSet'), {
    message: /Cannot add a read replica set to service s while it is PAUSED/,
  });
  assert.throws(() => serviceMove('s', 'DELETING', 'configure'), {
    message: /Cannot change service s while it is DELETING: it is being deleted/,
  });
  assert.throws(() => serviceMove('s', 'DELETING', 'delete'), {
    message: /already being deleted/,
  });
});

test('a service should run in every status but PAUSING, PAUSED, DELETING and DELETED', () => {
  const stopped = new Set<ServiceStatus>(['PAUSING', 'PAUSED', 'DELETING', 'DELETED']);
  for (const status of SERVICE_STATUSES) {
    assert.equal(shouldRun(status), !stopped.has(status), status);
  }
});
