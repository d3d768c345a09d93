import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  converged,
  markFailed,
  markUnstable,
  recover,
  settle,
  startProvisioning,
} from './service-transitions.js';
import { SERVICE_STATUSES, type Service, type ServiceStatus } from './types.js';

const svc = (status: ServiceStatus) => ({ id: 's1', version: 3, status }) as Service;

/** Where a transition moves each status (absent: it does not apply). */
function table(move: (s: Service) => Service | undefined) {
  const out: Partial<Record<ServiceStatus, ServiceStatus>> = {};
  for (const status of SERVICE_STATUSES) {
    const next = move(svc(status));
    if (next) out[status] = next.status;
  }
  return out;
}

test('startProvisioning: QUEUED → CONFIGURING only', () => {
  assert.deepEqual(table(startProvisioning), { QUEUED: 'CONFIGURING' });
});

test('markUnstable (drift): READY → UNSTABLE only', () => {
  assert.deepEqual(table(markUnstable), { READY: 'UNSTABLE' });
});

test('markFailed: a service that should run becomes UNSTABLE; stopping, paused, deleting ones keep theirs', () => {
  assert.deepEqual(table(markFailed), {
    QUEUED: 'UNSTABLE',
    CONFIGURING: 'UNSTABLE',
    RESUMING: 'UNSTABLE',
    READY: 'UNSTABLE',
    UPGRADING: 'UNSTABLE',
    OPTIMIZING: 'UNSTABLE',
  });
});

test('settle moves only from the status named; recover only UNSTABLE → READY', () => {
  assert.deepEqual(
    table((s) => settle(s, 'PAUSING', 'PAUSED')),
    { PAUSING: 'PAUSED' },
  );
  assert.deepEqual(table(recover), { UNSTABLE: 'READY' });
});

test('a transition keeps everything but the status (the store bumps the version)', () => {
  assert.deepEqual(startProvisioning(svc('QUEUED')), {
    id: 's1',
    version: 3,
    status: 'CONFIGURING',
  });
});

test('converged: settles as the payload says, else recovers an UNSTABLE service', () => {
  const provision = { provision: true, from: 'CONFIGURING', settle: 'READY' } as const;
  assert.equal(converged(svc('CONFIGURING'), provision)?.status, 'READY');
  // Marked failed while it kept retrying, then the retry worked.
  assert.equal(converged(svc('UNSTABLE'), provision)?.status, 'READY');
  assert.equal(converged(svc('PAUSING'), { from: 'PAUSING', settle: 'PAUSED' })?.status, 'PAUSED');
  assert.equal(converged(svc('UNSTABLE'), {})?.status, 'READY');
  // A request moved it meanwhile: its own operation settles it.
  assert.equal(converged(svc('RESUMING'), { from: 'PAUSING', settle: 'PAUSED' }), undefined);
  assert.equal(converged(svc('READY'), {}), undefined);
  assert.equal(converged(svc('DELETING'), provision), undefined);
});
