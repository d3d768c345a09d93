// The service state machine (docs/architecture.md §8). A request is an *action*; each
// action is allowed from a set of states and moves the service to a
// transitional state, which the engine later settles into a final one.
//
//   create   (none)  → QUEUED → CONFIGURING → READY
//   stop     READY   → PAUSING → PAUSED
//   start    PAUSED  → RESUMING → READY
//   resize   READY   → CONFIGURING → READY       (setHA alike)
//   reconfigure READY → CONFIGURING → READY      (VPC attach/detach, pooler; other states stay)
//   delete   any but DELETING → DELETING → gone
//   repair   READY   → UNSTABLE → READY          (engine only, on drift)
//   failure  … → UNSTABLE                        (engine only, service-transitions.ts)
//
// An UNSTABLE service takes stop, start, resize and setHA too: after a failure
// the engine stops trying on its own (docs/decisions.md, Failures), and a
// request is how a user tries again.

import { conflict } from './errors.js';
import type { Service, ServiceStatus } from './types.js';

export type ServiceAction =
  | 'stop'
  | 'start'
  | 'resize'
  | 'setHA'
  | 'delete'
  | 'fork'
  | 'configure'
  | 'reconfigure'
  | 'addReplicaSet';

interface ActionRule {
  from: readonly ServiceStatus[];
  /** The status the request leaves the service in; absent when the status does not change. */
  to?: ServiceStatus;
  hint: string;
}

const LIVE: readonly ServiceStatus[] = [
  'QUEUED',
  'CONFIGURING',
  'READY',
  'UNSTABLE',
  'PAUSING',
  'PAUSED',
  'RESUMING',
  'UPGRADING',
  'OPTIMIZING',
];

const RULES: Record<ServiceAction, ActionRule> = {
  stop: { from: ['READY', 'UNSTABLE'], to: 'PAUSING', hint: 'only a READY service stops' },
  start: { from: ['PAUSED', 'UNSTABLE'], to: 'RESUMING', hint: 'only a PAUSED service starts' },
  resize: { from: ['READY', 'UNSTABLE'], to: 'CONFIGURING', hint: 'resize it once it is READY' },
  setHA: { from: ['READY', 'UNSTABLE'], to: 'CONFIGURING', hint: 'change HA once it is READY' },
  delete: { from: LIVE, to: 'DELETING', hint: 'it is already being deleted' },
  fork: { from: ['READY', 'PAUSED'], hint: 'fork it once it is READY or PAUSED' },
  configure: { from: LIVE, hint: 'it is being deleted' },
  // A change its databases must apply (a VPC, the pooler): a READY service
  // shows CONFIGURING until it is applied (serviceMove); any other
  // status stays, and the change is applied when the service runs again.
  reconfigure: { from: LIVE, hint: 'it is being deleted' },
  addReplicaSet: { from: ['READY'], hint: 'add read replicas once it is READY' },
};

/**
 * Checks that `action` is allowed on a service in `status` and says where it
 * moves (undefined: the status stays). Throws a CONFLICT that names the state
 * and what to do instead.
 */
export function serviceMove(
  id: string,
  status: ServiceStatus,
  action: ServiceAction,
): ServiceStatus | undefined {
  const rule = RULES[action];
  if (!rule.from.includes(status)) {
    throw conflict(`Cannot ${verb(action)} service ${id} while it is ${status}: ${rule.hint}.`);
  }
  if (action === 'reconfigure') return status === 'READY' ? 'CONFIGURING' : undefined;
  return rule.to;
}

/** The service after a request's `action`, or the CONFLICT of serviceMove. */
export function applyServiceAction(svc: Service, action: ServiceAction): Service {
  const to = serviceMove(svc.id, svc.status, action);
  return to === undefined ? svc : { ...svc, status: to };
}

/** The status a new service starts in. */
export const NEW_SERVICE_STATUS: ServiceStatus = 'QUEUED';

/**
 * Where the engine settles a service resting in a transitional status once
 * its databases match the desired state (QUEUED is provisioned first, see
 * service-transitions.ts). Every `to` of a request rule is here.
 */
export const SETTLES_TO: Readonly<Partial<Record<ServiceStatus, ServiceStatus>>> = {
  CONFIGURING: 'READY',
  RESUMING: 'READY',
  UNSTABLE: 'READY',
  PAUSING: 'PAUSED',
};

/** Whether the driver should keep a service's processes running in this status. */
export function shouldRun(status: ServiceStatus): boolean {
  return (
    status !== 'PAUSING' && status !== 'PAUSED' && status !== 'DELETING' && status !== 'DELETED'
  );
}

function verb(action: ServiceAction): string {
  switch (action) {
    case 'setHA':
      return 'change the HA configuration of';
    case 'addReplicaSet':
      return 'add a read replica set to';
    case 'configure':
    case 'reconfigure':
      return 'change';
    default:
      return action;
  }
}
