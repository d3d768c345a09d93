// The durable operations commands queue and the engine runs, as one
// discriminated union by `kind`: each kind names the resource it works on and
// the payload it carries, and the builders below are the only place payloads
// are made. A converge drives a resource to its stored desired state; when
// `settle` is set and the resource is still in the status `from` once the
// driver is done, it then moves to `settle` (e.g. CONFIGURING → READY).

import { SETTLES_TO as SERVICE_SETTLES_TO } from './service-status.js';
import { REPLICA_SET_SETTLES_TO } from './replica-set-status.js';
import {
  type Peering,
  REPLICA_SET_STATUSES,
  type ReplicaSet,
  type ReplicaSetStatus,
  SERVICE_STATUSES,
  type Service,
  type ServiceStatus,
} from './types.js';

/**
 * What an operation works on. `serviceBackups` are the backups of the
 * service of that id: a lane of their own, so that a long backup never
 * holds back a service's other operations, which run one at a time.
 */
export type ResourceKind = 'service' | 'replicaSet' | 'peering' | 'serviceBackups';

export interface ServiceConvergePayload {
  /** Move QUEUED → CONFIGURING before converging (a new service). */
  provision?: boolean;
  from?: ServiceStatus;
  settle?: ServiceStatus;
}

export interface ReplicaSetConvergePayload {
  from?: ReplicaSetStatus;
  settle?: ReplicaSetStatus;
}

/** The payload of a kind that needs nothing but its resource. */
export type NoPayload = Record<string, never>;

/** Each kind: the resource it works on and its payload. */
interface Kinds {
  'service.converge': { resourceKind: 'service'; payload: ServiceConvergePayload };
  'service.delete': { resourceKind: 'service'; payload: NoPayload };
  'replicaSet.converge': { resourceKind: 'replicaSet'; payload: ReplicaSetConvergePayload };
  'replicaSet.delete': { resourceKind: 'replicaSet'; payload: NoPayload };
  'peering.provision': { resourceKind: 'peering'; payload: NoPayload };
  'service.backup': { resourceKind: 'serviceBackups'; payload: NoPayload };
}

export type OperationKind = keyof Kinds;

/** The resource kind of each operation kind (also what a stored row is checked against). */
export const RESOURCE_OF: { readonly [K in OperationKind]: Kinds[K]['resourceKind'] } = {
  'service.converge': 'service',
  'service.delete': 'service',
  'replicaSet.converge': 'replicaSet',
  'replicaSet.delete': 'replicaSet',
  'peering.provision': 'peering',
  'service.backup': 'serviceBackups',
};

export const OPERATION_KINDS = Object.keys(RESOURCE_OF) as OperationKind[];

/**
 * An operation as queued: what to do to which resource. `projectId` is the
 * resource's project, so the engine can share its slots fairly between projects.
 * Written as a mapped union so that `NewOperation<K>` narrows by kind.
 */
export type NewOperation<K extends OperationKind = OperationKind> = {
  [P in K]: {
    kind: P;
    resourceKind: Kinds[P]['resourceKind'];
    resourceId: string;
    projectId: string;
    payload: Kinds[P]['payload'];
  };
}[K];

/** Converges level-trigger on stored state: a newer one makes older queued ones of its resource redundant. */
export function isConverge(kind: OperationKind): boolean {
  return kind === 'service.converge' || kind === 'replicaSet.converge';
}

/**
 * The converge of a service, settling the status it is in now (after the
 * request's move, if any): a QUEUED service is provisioned, a transitional one
 * settles where SETTLES_TO says, a resting one (READY, PAUSED) only converges.
 */
export function serviceConverge(svc: Service): NewOperation<'service.converge'> {
  const settle = SERVICE_SETTLES_TO[svc.status];
  const payload: ServiceConvergePayload =
    svc.status === 'QUEUED'
      ? { provision: true, from: 'CONFIGURING', settle: 'READY' }
      : settle
        ? { from: svc.status, settle }
        : {};
  return { kind: 'service.converge', ...on('service', svc), payload };
}

export function serviceDelete(svc: Service): NewOperation<'service.delete'> {
  return { kind: 'service.delete', ...on('service', svc), payload: {} };
}

/** The converge of a replica set, settling its current status like serviceConverge. */
export function replicaSetConverge(rs: ReplicaSet): NewOperation<'replicaSet.converge'> {
  const settle = REPLICA_SET_SETTLES_TO[rs.status];
  return {
    kind: 'replicaSet.converge',
    ...on('replicaSet', rs),
    payload: settle ? { from: rs.status, settle } : {},
  };
}

export function replicaSetDelete(rs: ReplicaSet): NewOperation<'replicaSet.delete'> {
  return { kind: 'replicaSet.delete', ...on('replicaSet', rs), payload: {} };
}

/**
 * A full backup of a service, then the expiry of what the recovery window no
 * longer needs. Done once a backup that started after the operation was
 * queued has completed.
 */
export function serviceBackup(svc: Service): NewOperation<'service.backup'> {
  return {
    kind: 'service.backup',
    resourceKind: 'serviceBackups',
    resourceId: svc.id,
    projectId: svc.projectId,
    payload: {},
  };
}

export function peeringProvision(p: Peering): NewOperation<'peering.provision'> {
  return { kind: 'peering.provision', ...on('peering', p), payload: {} };
}

/**
 * What brings a service resting in `status` to where it is going, when nothing
 * is queued for it (start-up, the reconciler): a delete for a DELETING one, a
 * converge for any other transitional one, nothing for READY or PAUSED.
 */
export function resumeService(svc: Service): NewOperation | undefined {
  if (svc.status === 'DELETING') return serviceDelete(svc);
  return svc.status === 'QUEUED' || SERVICE_SETTLES_TO[svc.status]
    ? serviceConverge(svc)
    : undefined;
}

/** Like resumeService, for a replica set. */
export function resumeReplicaSet(rs: ReplicaSet): NewOperation | undefined {
  if (rs.status === 'deleting') return replicaSetDelete(rs);
  return REPLICA_SET_SETTLES_TO[rs.status] ? replicaSetConverge(rs) : undefined;
}

function on<R extends ResourceKind>(resourceKind: R, r: { id: string; projectId: string }) {
  return { resourceKind, resourceId: r.id, projectId: r.projectId };
}

/** What an operation is doing, for the messages Basin writes into a resource's logs. */
export function describeOperation(op: NewOperation): string {
  switch (op.kind) {
    case 'service.converge': {
      if (op.payload.provision) return 'provisioning';
      return op.payload.from ? (SERVICE_WORK[op.payload.from] ?? 'reconfiguring') : 'configuring';
    }
    case 'replicaSet.converge':
      return op.payload.from
        ? (REPLICA_SET_WORK[op.payload.from] ?? 'reconfiguring')
        : 'configuring';
    case 'service.delete':
    case 'replicaSet.delete':
      return 'deleting';
    case 'peering.provision':
      return 'provisioning the peering';
    case 'service.backup':
      return 'backing up';
  }
}

const SERVICE_WORK: Partial<Record<ServiceStatus, string>> = {
  CONFIGURING: 'reconfiguring',
  RESUMING: 'starting',
  PAUSING: 'stopping',
  UNSTABLE: 'repairing',
};

const REPLICA_SET_WORK: Partial<Record<ReplicaSetStatus, string>> = {
  creating: 'creating',
  resizing: 'resizing',
  error: 'repairing',
};

/** A stored operation's fields as read back, before they are trusted. */
export interface StoredOperationFields {
  kind: string;
  resourceKind: string;
  resourceId: string;
  projectId: string;
  payload: unknown;
}

/**
 * Checks a stored operation and returns it typed, or says what is wrong with
 * it (a row written by a newer Basin, or damaged by hand): the store fails
 * such a row rather than handing the engine something it cannot run.
 */
export function parseOperation(
  row: StoredOperationFields,
): { ok: true; op: NewOperation } | { ok: false; error: string } {
  const bad = (why: string) => ({ ok: false as const, error: `unreadable operation: ${why}` });
  if (!(OPERATION_KINDS as string[]).includes(row.kind)) {
    return bad(`unknown kind ${JSON.stringify(row.kind)} (written by a newer Basin?)`);
  }
  const kind = row.kind as OperationKind;
  if (row.resourceKind !== RESOURCE_OF[kind]) {
    return bad(`${kind} works on a ${RESOURCE_OF[kind]}, not a ${row.resourceKind}`);
  }
  const p = row.payload;
  if (typeof p !== 'object' || p === null || Array.isArray(p)) {
    return bad(`the payload of ${kind} is not an object`);
  }
  const fields = p as Record<string, unknown>;
  const allowed: Record<string, (v: unknown) => boolean> =
    kind === 'service.converge'
      ? {
          provision: (v) => typeof v === 'boolean',
          from: oneOf(SERVICE_STATUSES),
          settle: oneOf(SERVICE_STATUSES),
        }
      : kind === 'replicaSet.converge'
        ? { from: oneOf(REPLICA_SET_STATUSES), settle: oneOf(REPLICA_SET_STATUSES) }
        : {};
  for (const [key, value] of Object.entries(fields)) {
    const check = allowed[key];
    if (!check) return bad(`${kind} has no payload field ${JSON.stringify(key)}`);
    if (!check(value)) return bad(`${kind} payload field ${key} is ${JSON.stringify(value)}`);
  }
  return {
    ok: true,
    op: {
      kind,
      resourceKind: RESOURCE_OF[kind],
      resourceId: row.resourceId,
      projectId: row.projectId,
      payload: fields,
    } as NewOperation,
  };
}

function oneOf(values: readonly string[]): (v: unknown) => boolean {
  return (v) => typeof v === 'string' && values.includes(v);
}
