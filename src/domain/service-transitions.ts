// The status moves the engine makes on a service (docs/architecture.md §8), as named
// pure functions; requests move services through applyServiceAction
// (service-status.ts). Each returns the moved service, or undefined when the
// move does not apply to the status the service is in: the engine acts on
// state that a request may have changed since it looked, so a move that no
// longer fits is a no-op, never an error.
//
//   startProvisioning   QUEUED → CONFIGURING
//   markUnstable        READY → UNSTABLE              (drift: it should run and does not)
//   markFailed          any that should run → UNSTABLE (an operation failed)
//   settle(from, to)    from → to                     (the driver is done)
//   recover             UNSTABLE → READY              (its databases run again)

import type { ServiceConvergePayload } from './operations.js';
import type { Service, ServiceStatus } from './types.js';

function move(svc: Service, from: readonly ServiceStatus[], to: ServiceStatus) {
  return from.includes(svc.status) ? { ...svc, status: to } : undefined;
}

/** QUEUED → CONFIGURING: the engine starts building a new service. */
export function startProvisioning(svc: Service): Service | undefined {
  return move(svc, ['QUEUED'], 'CONFIGURING');
}

/** READY → UNSTABLE: the databases of a READY service do not run (drift). */
export function markUnstable(svc: Service): Service | undefined {
  return move(svc, ['READY'], 'UNSTABLE');
}

/**
 * An operation on the service failed for good (or keeps failing): a service
 * that should run becomes UNSTABLE. One being stopped stays PAUSING, since
 * UNSTABLE would ask for it to run; a paused or deleting one keeps its status.
 * The reason goes into the service's logs (engine/failure-events.ts).
 */
export function markFailed(svc: Service): Service | undefined {
  return move(
    svc,
    ['QUEUED', 'CONFIGURING', 'RESUMING', 'READY', 'UPGRADING', 'OPTIMIZING'],
    'UNSTABLE',
  );
}

/** `from` → `to` once the driver is done, unless something moved the service meanwhile. */
export function settle(svc: Service, from: ServiceStatus, to: ServiceStatus): Service | undefined {
  return move(svc, [from], to);
}

/** UNSTABLE → READY: its databases run as they should again. */
export function recover(svc: Service): Service | undefined {
  return move(svc, ['UNSTABLE'], 'READY');
}

/**
 * Where a converge that the driver finished leaves the service: settled as its
 * payload says, or recovered if it was UNSTABLE (a converge of an UNSTABLE
 * service, which should run, made it run: e.g. a retry that succeeded after
 * the engine had marked it failed).
 */
export function converged(svc: Service, payload: ServiceConvergePayload): Service | undefined {
  const settled =
    payload.from && payload.settle ? settle(svc, payload.from, payload.settle) : undefined;
  return settled ?? recover(svc);
}
