// The kinds of durable operations commands queue and the engine runs. A
// converge operation drives a resource to its stored desired state; when
// `settle` is set and the resource is still in the status `from`, it then
// moves the resource to `settle` (e.g. CONFIGURING → READY).

import type { ReplicaSetStatus, ServiceStatus } from './types.js';

export interface ServiceConverge {
  kind: 'service.converge';
  /** Move QUEUED → CONFIGURING before converging (a new service). */
  provision?: boolean;
  from?: ServiceStatus;
  settle?: ServiceStatus;
}

export interface ReplicaSetConverge {
  kind: 'replicaSet.converge';
  from?: ReplicaSetStatus;
  settle?: ReplicaSetStatus;
}

export type OperationKind =
  | 'service.converge'
  | 'service.delete'
  | 'replicaSet.converge'
  | 'replicaSet.delete'
  | 'peering.provision';
