import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  describeOperation,
  OPERATION_KINDS,
  parseOperation,
  peeringProvision,
  replicaSetConverge,
  replicaSetDelete,
  RESOURCE_OF,
  resumeReplicaSet,
  resumeService,
  serviceConverge,
  serviceBackup,
  serviceDelete,
} from './operations.js';
import {
  type Peering,
  REPLICA_SET_STATUSES,
  type ReplicaSet,
  SERVICE_STATUSES,
  type Service,
} from './types.js';

const svc = (status: Service['status']) => ({ id: 's1', projectId: 'p1', status }) as Service;
const rs = (status: ReplicaSet['status']) => ({ id: 'r1', projectId: 'p1', status }) as ReplicaSet;

test('a service converge settles the status the service is in', () => {
  const payloads = Object.fromEntries(
    SERVICE_STATUSES.map((s) => [s, serviceConverge(svc(s)).payload]),
  );
  assert.deepEqual(payloads, {
    QUEUED: { provision: true, from: 'CONFIGURING', settle: 'READY' },
    CONFIGURING: { from: 'CONFIGURING', settle: 'READY' },
    RESUMING: { from: 'RESUMING', settle: 'READY' },
    UNSTABLE: { from: 'UNSTABLE', settle: 'READY' },
    PAUSING: { from: 'PAUSING', settle: 'PAUSED' },
    READY: {},
    PAUSED: {},
    DELETING: {},
    DELETED: {},
    UPGRADING: {},
    OPTIMIZING: {},
  });
  assert.deepEqual(serviceConverge(svc('READY')), {
    kind: 'service.converge',
    resourceKind: 'service',
    resourceId: 's1',
    projectId: 'p1',
    payload: {},
  });
});

test('a replica set converge settles creating, resizing and error into active', () => {
  const payloads = Object.fromEntries(
    REPLICA_SET_STATUSES.map((s) => [s, replicaSetConverge(rs(s)).payload]),
  );
  assert.deepEqual(payloads, {
    creating: { from: 'creating', settle: 'active' },
    resizing: { from: 'resizing', settle: 'active' },
    error: { from: 'error', settle: 'active' },
    active: {},
    deleting: {},
  });
});

test('resuming: a delete for a deleting resource, a converge for a transitional one, else nothing', () => {
  assert.equal(resumeService(svc('DELETING'))?.kind, 'service.delete');
  for (const s of ['QUEUED', 'CONFIGURING', 'RESUMING', 'UNSTABLE', 'PAUSING'] as const) {
    assert.deepEqual(resumeService(svc(s)), serviceConverge(svc(s)), s);
  }
  for (const s of ['READY', 'PAUSED'] as const) assert.equal(resumeService(svc(s)), undefined);
  assert.equal(resumeReplicaSet(rs('deleting'))?.kind, 'replicaSet.delete');
  assert.deepEqual(resumeReplicaSet(rs('creating')), replicaSetConverge(rs('creating')));
  assert.equal(resumeReplicaSet(rs('active')), undefined);
});

test('every builder names the resource kind of its operation kind', () => {
  const built = [
    serviceConverge(svc('READY')),
    serviceDelete(svc('READY')),
    replicaSetConverge(rs('active')),
    replicaSetDelete(rs('active')),
    peeringProvision({ id: '9', projectId: 'p1' } as Peering),
    serviceBackup(svc('READY')),
  ];
  assert.deepEqual(
    built.map((o) => o.kind),
    OPERATION_KINDS,
  );
  for (const op of built) assert.equal(op.resourceKind, RESOURCE_OF[op.kind]);
});

test('descriptions say what was being done', () => {
  assert.equal(describeOperation(serviceConverge(svc('QUEUED'))), 'provisioning');
  assert.equal(describeOperation(serviceConverge(svc('PAUSING'))), 'stopping');
  assert.equal(describeOperation(serviceConverge(svc('RESUMING'))), 'starting');
  assert.equal(describeOperation(serviceConverge(svc('CONFIGURING'))), 'reconfiguring');
  assert.equal(describeOperation(serviceConverge(svc('UNSTABLE'))), 'repairing');
  assert.equal(describeOperation(serviceConverge(svc('READY'))), 'configuring');
  assert.equal(describeOperation(serviceDelete(svc('DELETING'))), 'deleting');
  assert.equal(describeOperation(serviceBackup(svc('READY'))), 'backing up');
  assert.equal(describeOperation(replicaSetConverge(rs('creating'))), 'creating');
});

test('parseOperation accepts what the builders make, and stored rows of earlier Basins', () => {
  for (const op of [serviceConverge(svc('QUEUED')), replicaSetDelete(rs('active'))]) {
    assert.deepEqual(parseOperation(op), { ok: true, op });
  }
  // Payloads stored before operations were typed: the same fields.
  const old = { kind: 'service.converge', resourceKind: 'service', resourceId: 's', projectId: '' };
  assert.equal(parseOperation({ ...old, payload: { from: 'PAUSING', settle: 'PAUSED' } }).ok, true);
});

test('parseOperation names what is wrong with a row it cannot trust', () => {
  const row = {
    kind: 'service.converge',
    resourceKind: 'service',
    resourceId: 's',
    projectId: 'p',
  };
  const cases: [object, RegExp][] = [
    [
      { kind: 'service.teleport' },
      /unknown kind "service\.teleport" \(written by a newer Basin\?\)/,
    ],
    [{ resourceKind: 'replicaSet' }, /service\.converge works on a service, not a replicaSet/],
    [{ payload: null }, /payload of service\.converge is not an object/],
    [{ payload: [] }, /not an object/],
    [{ payload: { settle: 'ASLEEP' } }, /payload field settle is "ASLEEP"/],
    [{ payload: { provision: 'yes' } }, /provision/],
    [{ payload: { from: 'active' } }, /from/],
    [
      { kind: 'service.delete', payload: { from: 'READY' } },
      /service\.delete has no payload field "from"/,
    ],
  ];
  for (const [change, why] of cases) {
    const parsed = parseOperation({ payload: {}, ...row, ...change });
    assert.equal(parsed.ok, false, JSON.stringify(change));
    if (!parsed.ok) assert.match(parsed.error, why);
  }
});
