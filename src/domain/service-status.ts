// The service state machine (DESIGN.md §2). A request is an *action*; each
// action is allowed from a set of states and moves the service to a
// transitional state, which the engine later settles into a final one.
//
//   create   (none)  → QUEUED → CONFIGURING → READY
//   stop     READY   → PAUSING → PAUSED
//   start    PAUSED  → RESUMING → READY
//   resize   READY   → CONFIGURING → READY       (setHA alike)
//   delete   any but DELETING → DELETING → gone
//   repair   READY   → UNSTABLE → READY          (engine only, on drift)

import { conflict } from './errors.js';
import type { ServiceStatus } from './types.js';

export type ServiceAction =
  'stop' | 'start' | 'resize' | 'setHA' | 'delete' | 'fork' | 'configure' | 'addReplicaSet';

interface ActionRule {
  from: readonly ServiceStatus[];
  /** The status the request leaves the service in; absent when the status does not change. */
  to?: ServiceStatus;
  /** The status the engine settles the service in once the driver is done. */
  settle?: ServiceStatus;
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
  stop: { from: ['READY'], to: 'PAUSING', settle: 'PAUSED', hint: 'only a READY service stops' },
  start: {
    from: ['PAUSED'],
    to: 'RESUMING',
    settle: 'READY',
    hint: 'only a PAUSED service starts',
  },
  resize: {
    from: ['READY'],
    to: 'CONFIGURING',
    settle: 'READY',
    hint: 'resize it once it is READY',
  },
  setHA: {
    from: ['READY'],
    to: 'CONFIGURING',
    settle: 'READY',
    hint: 'change HA once it is READY',
  },
  delete: { from: LIVE, to: 'DELETING', hint: 'it is already being deleted' },
  fork: { from: ['READY'], hint: 'fork it once it is READY' },
  configure: { from: LIVE, hint: 'it is being deleted' },
  addReplicaSet: { from: ['READY'], hint: 'add read replicas once it is READY' },
};

export interface Move {
  to: ServiceStatus | undefined;
  settle: ServiceStatus | undefined;
}

/**
 * Checks that `action` is allowed on a service in `status` and says where it
 * moves. Throws a CONFLICT that names the state and what to do instead.
 */
export function serviceMove(id: string, status: ServiceStatus, action: ServiceAction): Move {
  const rule = RULES[action];
  if (!rule.from.includes(status)) {
    throw conflict(`Cannot ${verb(action)} service ${id} while it is ${status}: ${rule.hint}.`);
  }
  return { to: rule.to, settle: rule.settle };
}

/** Moves made by the engine rather than by a request: [from, to]. */
export const ENGINE_MOVES = {
  provision: ['QUEUED', 'CONFIGURING'],
  markUnstable: ['READY', 'UNSTABLE'],
  recover: ['UNSTABLE', 'READY'],
} as const satisfies Record<string, readonly [ServiceStatus, ServiceStatus]>;

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
      return 'change';
    default:
      return action;
  }
}
