// Automatic failover, decided by the engine (docs/decisions.md, Failover):
// Basin spawned every postmaster and owns the service's recorded state, so
// it is Basin's own supervisor, not a second one, that fails over.
//
//   1. the driver's watch sees a primary die or hang (or the reconciler
//      finds it down): the service goes UNSTABLE and a converge is queued
//      (primaryEvent);
//   2. every step of a converge of a service with standbys first asks the
//      driver whether its recorded primary is dead; if so the driver fences
//      it and says how far each standby received WAL, and the most advanced
//      standby is recorded as the primary (promoteNode): the one write that
//      decides the failover, in one transaction with its log entries;
//   3. the converge then does the rest, level-triggered as always: it
//      promotes the new primary, points the endpoint (HAProxy) at it,
//      re-points the other standbys, rewinds the old primary into a standby
//      (or rebuilds it), and settles UNSTABLE → READY.
//
// A crash of Basin anywhere in between is harmless: before step 2's write
// the next converge finds the primary dead again; after it, the recorded
// primary is the new one and the converge goes on from where things stand.

import { failoverCandidate, nodeName, primaryOf, promoteNode } from '../domain/service-nodes.js';
import { replicaSetConverge, serviceConverge } from '../domain/operations.js';
import { shouldRun } from '../domain/service-status.js';
import { markUnstable } from '../domain/service-transitions.js';
import type { Service } from '../domain/types.js';
import type { PrimaryEvent, ServiceSpec } from '../drivers/driver.js';
import type { Tx } from '../store/store.js';
import type { HandlerDeps } from './handler-deps.js';

/**
 * Step 2: when the recorded primary of `svc` is dead, records the most
 * advanced standby as its primary. Returns whether it did (the caller
 * re-reads the service and converges it).
 */
export async function failoverIfPrimaryDead(
  { store, driver, clock }: HandlerDeps,
  svc: Service,
  spec: ServiceSpec,
): Promise<boolean> {
  // Only a service that ran: one being made or reconfigured restarts its primary in place.
  if (svc.status !== 'READY' && svc.status !== 'UNSTABLE') return false;
  if (!driver.prepareFailover || !spec.running || spec.nodes.length < 2) return false;
  const view = await driver.prepareFailover(spec);
  if (!view.dead) return false;
  const old = primaryOf(svc);
  const candidate = failoverCandidate(view.standbys);
  const at = clock();
  return store.transaction(async (tx) => {
    const current = await tx.services.get(svc.id);
    if (!current || primaryOf(current).index !== old.index) return false;
    // Service-wide entries (node null): they show in the default view of
    // the logs, whichever node they name.
    const note = (severity: string, message: string) =>
      tx.events.add({
        resourceKind: 'service',
        resourceId: svc.id,
        node: null,
        at,
        severity,
        message,
      });
    await note(
      'WARNING',
      `basin: the primary ${nodeName(old.index)} is down; it is fenced (nothing of it runs any more)`,
    );
    if (candidate === undefined) {
      await note(
        'ERROR',
        `basin: no standby answers; ${nodeName(old.index)} is restarted in place instead of failing over`,
      );
      return false;
    }
    const lsn = view.standbys.find((s) => s.index === candidate)?.lsn;
    if (current.ha.syncReplicaCount > 0) {
      await note(
        'LOG',
        `basin: promoting ${nodeName(candidate)}, the most advanced synchronous standby (WAL received up to ${lsn})`,
      );
    } else {
      await note(
        'WARNING',
        `basin: promoting ${nodeName(candidate)}, an asynchronous standby (WAL received up to ${lsn}): no synchronous standby exists, so commits it had not received are lost`,
      );
    }
    const promoted = promoteNode(markUnstable(current) ?? current, candidate);
    if (!promoted) return false;
    await tx.services.update(promoted);
    // Its read replica sets follow the new primary through the endpoint,
    // and need their slots there.
    for (const rs of await tx.replicaSets.listByService(svc.id)) {
      if (rs.status === 'active' || rs.status === 'error') {
        await tx.operations.enqueue(replicaSetConverge(rs), at);
      }
    }
    return true;
  });
}

/**
 * A switchover (no endpoint asks for one: the spec has none; tests and a
 * future operator command do): standby `index` is recorded as the primary
 * and the service converges, which stops the running primary first (a
 * fast shutdown: its standbys get all its WAL), promotes `index`, points
 * the endpoint at it and makes the old primary its standby. False when
 * `index` is no standby of the service.
 */
export async function switchover(
  deps: HandlerDeps,
  serviceId: string,
  index: number,
): Promise<boolean> {
  const done = await deps.store.transaction(async (tx: Tx) => {
    const svc = await tx.services.get(serviceId);
    if (!svc || svc.status !== 'READY') return false;
    const promoted = promoteNode(svc, index);
    if (!promoted) return false;
    const current = await tx.services.update(promoted);
    await tx.events.add({
      resourceKind: 'service',
      resourceId: serviceId,
      node: null,
      at: deps.clock(),
      severity: 'LOG',
      message: `basin: switching over from ${nodeName(primaryOf(svc).index)} to ${nodeName(index)}`,
    });
    await tx.operations.enqueue(serviceConverge(current), deps.clock());
    return true;
  });
  return done;
}

/**
 * Step 1: the driver saw the primary of `serviceId` die, or stop answering
 * (hung). A service that should run goes UNSTABLE (READY ones) and gets a
 * converge, which fails over first thing. A check it left unanswered, or
 * its answer after some, only goes into the service's logs. Returns
 * whether a converge was queued.
 */
export async function primaryEvent(
  deps: HandlerDeps,
  serviceId: string,
  event: PrimaryEvent,
): Promise<boolean> {
  return deps.store.transaction(async (tx: Tx) => {
    const svc = await tx.services.get(serviceId);
    if (!svc || svc.status === 'DELETING' || !shouldRun(svc.status)) return false;
    const name = nodeName(primaryOf(svc).index);
    const note = (severity: string, message: string) =>
      tx.events.add({
        resourceKind: 'service',
        resourceId: serviceId,
        node: null,
        at: deps.clock(),
        severity,
        message,
      });
    const within = (ms: number) => `${ms / 1000} s`;
    switch (event.kind) {
      case 'unanswered':
        await note(
          'WARNING',
          `basin: the primary ${name} did not answer a health check within ${within(event.timeoutMs)} (${event.count} in a row; at ${event.limit} it is taken for hung and failed over)`,
        );
        return false;
      case 'answering':
        await note(
          'LOG',
          `basin: the primary ${name} answers health checks again (after ${event.after} unanswered)`,
        );
        return false;
      case 'hung':
        await note(
          'WARNING',
          `basin: the primary ${name} runs but did not answer ${event.count} health checks in a row (${within(event.timeoutMs)} each); it is taken for hung: fenced (every process of it killed) and failed over`,
        );
        break;
      case 'dead':
        await note('WARNING', `basin: the primary ${name} stopped; failing over`);
        break;
    }
    const moved = markUnstable(svc);
    const current = moved ? await tx.services.update(moved) : svc;
    await tx.operations.enqueue(serviceConverge(current), deps.clock());
    return true;
  });
}
