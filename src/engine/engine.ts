// The engine runs the durable operations that commands queue, and repairs
// drift between the store and the driver. It is the only writer of status
// moves that requests do not make (QUEUED → CONFIGURING, READY → UNSTABLE, …).
//
// Operations survive a crash because they live in the store. A claim is a
// short lease that a heartbeat renews while the operation runs; at start the
// engine releases at once the leases of dead engines of this host (a Basin
// killed with -9 resumes its work as soon as it is back) and leaves every
// other lease to expire, so Basins that share a store never take each other's
// live work. Handlers are idempotent, so re-running a half-done step is safe.
//
// Failures are bounded (retry-policy.ts): retries back off exponentially up
// to a cap and stop after `maxAttempts`, a permanent DriverError stops
// retrying at once, an operation that keeps waiting ("not done yet") stops
// after `maxWaitMs`; each of these marks the resource failed, and what
// happened is written into the resource's logs. Slots are
// shared fairly between projects, an attempt that hangs is given up after
// `operationTimeoutMs`, and close() waits for running work at most
// `drainTimeoutMs`. See docs/decisions.md (Engine).

import { DriverError } from '../drivers/driver.js';
import type { OperationKind } from '../domain/operations.js';
import type { Progress } from '../domain/progress.js';
import type { Logger } from '../lib/logger.js';
import type { Operation, Tx } from '../store/store.js';
import { recordNote } from './driver-notes.js';
import { primaryEvent } from './failover.js';
import { failResource, type HandlerDeps, runHandler } from './handlers.js';
import { reconcile } from './reconciler.js';
import { storageEvent } from './storage.js';
import {
  backoffMs,
  DEFAULT_RETRY,
  type EventText,
  failedEvent,
  outOfAttempts,
  outOfAttemptsReason,
  recoveredEvent,
  retryEvent,
  type RetryPolicy,
  waitedTooLong,
} from './retry-policy.js';
import { isDeadWorker, newWorkerId } from './worker-id.js';

export interface EngineOptions {
  reconcileIntervalMs: number;
  /** Operations run at once (default 4). */
  slots?: number;
  /** Of those, at most this many for one project (default half the slots, at least 1). */
  projectSlots?: number;
  /** How long a claim holds without a heartbeat (renewed every third of it). */
  leaseMs?: number;
  /** An attempt that has not settled after this long fails, retryably, and frees its slot. */
  operationTimeoutMs?: number;
  /** close() waits at most this long for running operations. */
  drainTimeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Jitter of the backoff (tests fix it). */
  random?: () => number;
  /** This engine's lease holder name (tests); `<host>/<pid>/<nonce>` otherwise. */
  workerId?: string;
  /** Judges whether another lease holder is dead (tests); see worker-id.ts. */
  isDeadWorker?: (worker: string) => boolean;
  /** Told how operations end and attempts fail (metrics/basin-metrics.ts). */
  observer?: OperationObserver;
}

/** What the engine tells of each operation it ends, and of each failed attempt. */
export interface OperationObserver {
  /** An operation ended: `seconds` from its acceptance (queued) to its end. */
  settled(kind: string, outcome: 'done' | 'failed', seconds: number): void;
  /** One attempt failed (retried or not). */
  attemptFailed(kind: string): void;
}

/** An attempt that did not settle in time: retried like any retryable failure. */
export class OperationTimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer within ${Math.round(ms / 1000)} s; the attempt was given up`);
    this.name = 'OperationTimeoutError';
  }
}

export const ENGINE_DEFAULTS = {
  slots: 4,
  leaseMs: 30_000,
  operationTimeoutMs: 120_000,
  drainTimeoutMs: 10_000,
};

/** Half the slots, at least one: what one project may hold when not configured. */
export function defaultProjectSlots(slots: number): number {
  return Math.max(1, Math.floor(slots / 2));
}

export class Engine {
  /** Who this engine's leases belong to. */
  readonly worker: string;
  private readonly inFlight = new Map<number, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private reconcileTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private reconciling: Promise<void> | undefined;
  private again = false;
  private watching = false;
  private stopped = true;
  /** Set when close() stopped waiting: late results are left for the next start. */
  private abandoned = false;
  private readonly slots: number;
  private readonly projectSlots: number;
  private readonly leaseMs: number;
  private readonly operationTimeoutMs: number;
  private readonly drainTimeoutMs: number;
  private readonly retry: RetryPolicy;
  private readonly random: () => number;
  private readonly isDead: (worker: string) => boolean;

  constructor(
    private readonly deps: HandlerDeps,
    private readonly log: Logger,
    private readonly options: EngineOptions,
  ) {
    this.slots = options.slots ?? ENGINE_DEFAULTS.slots;
    this.projectSlots = Math.min(
      this.slots,
      options.projectSlots ?? defaultProjectSlots(this.slots),
    );
    this.leaseMs = options.leaseMs ?? ENGINE_DEFAULTS.leaseMs;
    this.operationTimeoutMs = options.operationTimeoutMs ?? ENGINE_DEFAULTS.operationTimeoutMs;
    this.drainTimeoutMs = options.drainTimeoutMs ?? ENGINE_DEFAULTS.drainTimeoutMs;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.random = options.random ?? Math.random;
    this.worker = options.workerId ?? newWorkerId();
    this.isDead = options.isDeadWorker ?? ((w) => isDeadWorker(w));
  }

  /** Starts running operations and reconciling. Unfinished work of a dead engine resumes. */
  async start(): Promise<void> {
    this.stopped = false;
    this.abandoned = false;
    await this.releaseDeadLeases();
    // A primary that dies is failed over at once, not at the next reconcile (failover.ts).
    if (!this.watching) {
      this.watching = true;
      this.deps.driver.watchPrimaries?.((id, event) => {
        if (this.stopped) return;
        primaryEvent(this.deps, id, event).then(
          (queued) => queued && this.kick(),
          (err: unknown) =>
            this.log.error({ err, serviceId: id, event }, "recording a primary's trouble failed"),
        );
      });
      // A storage level is applied at once too (storage.ts).
      this.deps.driver.watchStorage?.((event) => {
        if (this.stopped) return;
        storageEvent(this.deps, event).then(
          (queued) => queued && this.kick(),
          (err: unknown) =>
            this.log.error({ err, target: event.target }, 'recording a storage level failed'),
        );
      });
      this.deps.driver.watchNotes?.((target, note) => {
        if (this.stopped) return;
        recordNote(this.deps, target, note).catch((err: unknown) =>
          this.log.error({ err, target, note }, 'recording what the driver saw failed'),
        );
      });
    }
    this.heartbeat = setInterval(() => void this.renewLeases(), Math.max(10, this.leaseMs / 3));
    this.heartbeat.unref();
    await this.runReconcile();
    this.kick();
  }

  /** Something was queued: run the loop soon rather than at the next timer. */
  kick(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  /**
   * Stops taking work and waits for the operations in flight, at most
   * `drainTimeoutMs`. What still runs then is left leased: the next start
   * (this host, this process gone) takes it back at once, another Basin
   * once the lease expires.
   */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.reconcileTimer);
    let timer: NodeJS.Timeout | undefined;
    const drained = (async () => {
      await this.ticking;
      await Promise.allSettled([this.reconciling, ...this.inFlight.values()]);
      return true;
    })();
    const gaveUp = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), this.drainTimeoutMs);
    });
    const finished = await Promise.race([drained, gaveUp]);
    clearTimeout(timer);
    clearInterval(this.heartbeat);
    if (!finished) {
      this.abandoned = true;
      this.log.warn(
        { operations: [...this.inFlight.keys()], drainTimeoutMs: this.drainTimeoutMs },
        'operations still running at shutdown; they resume at the next start',
      );
    }
  }

  /** Resolves once no operation is pending or running (tests and the CLI use it). */
  async idle(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pending = await this.deps.store.operations.listPending();
      if (pending.length === 0 && this.inFlight.size === 0) return;
      if (Date.now() > deadline) {
        throw new Error(
          `engine not idle after ${timeoutMs} ms: ${pending.map((o) => `${o.kind}#${o.id}`).join(', ')}`,
        );
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** How many operations run now (tests). */
  get running(): number {
    return this.inFlight.size;
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(
      () => {
        this.ticking = this.tick().finally(() => {
          this.ticking = undefined;
          // Kicked while this tick ran: its claim may have missed the work that kicked.
          if (this.again) {
            this.again = false;
            this.schedule(0);
          }
        });
      },
      Math.max(0, ms),
    );
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    let wait = 1000;
    try {
      const free = this.slots - this.inFlight.size;
      // When the claim looked (with no free slot, as if now: nothing was claimable).
      const claimedAt = this.deps.clock();
      if (free > 0) {
        const now = claimedAt;
        const ops = await this.deps.store.transaction((tx) =>
          tx.operations.claim(this.worker, now, {
            leaseMs: this.leaseMs,
            limit: free,
            perProject: this.projectSlots,
          }),
        );
        for (const op of ops) this.launch(op);
      }
      // Wake when the next operation is due. One that was due when the claim
      // looked but was not claimed waits for a slot (a finished operation
      // kicks) or for its project's turn: poll, rather than spin. One that
      // fell due since (the claim took longer than its wait: 20 ms steps of
      // a starting server, on a busy host) is claimed at once, not a second
      // later.
      const next = await this.deps.store.operations.nextDue();
      if (next !== undefined && next > claimedAt) {
        wait = Math.min(Math.max(0, next - this.deps.clock()), 1000);
      }
    } catch (err) {
      this.log.error({ err }, 'engine loop failed; retrying');
    }
    this.schedule(wait);
  }

  private launch(op: Operation): void {
    const run = this.run(op)
      .catch((err: unknown) => {
        if (!this.abandoned) this.log.error({ err, op: op.id }, 'recording an operation failed');
      })
      .finally(() => {
        this.inFlight.delete(op.id);
        this.kick();
      });
    this.inFlight.set(op.id, run);
  }

  private async run(op: Operation): Promise<void> {
    let progress: Progress;
    try {
      progress = await this.attempt(op);
    } catch (err) {
      if (!this.abandoned) await this.fail(op, err);
      return;
    }
    if (this.abandoned) return;
    const now = this.deps.clock();
    if (progress.done) {
      const finished = await this.deps.store.transaction(async (tx) => {
        const finished = await tx.operations.finish(op.id, this.worker, 'done', null, now);
        if (finished && op.attempts > 0) await this.record(tx, op, recoveredEvent(op, op.attempts));
        return finished;
      });
      if (finished) this.settled(op, 'done', now);
      this.log.info({ op: op.id, kind: op.kind, resource: op.resourceId }, 'operation done');
      return;
    }
    const { notes = [] } = progress;
    // Each step of a long operation, for whoever profiles one (--log-level debug).
    this.log.debug(
      {
        op: op.id,
        kind: op.kind,
        resource: op.resourceId,
        step: progress.reason,
        inMs: progress.retryAfterMs,
      },
      'operation waits',
    );
    // Waiting is bounded too: counted, and given up after `maxWaitMs` from
    // the first wait (deletes excepted, as for failures).
    const waits = op.waits + 1;
    const waitingSince = op.waitingSince ?? now;
    const tooLong = isDelete(op.kind)
      ? undefined
      : waitedTooLong(this.retry, waitingSince, now, waits, progress.reason);
    if (tooLong !== undefined) {
      this.log.warn(
        { op: op.id, kind: op.kind, resource: op.resourceId, waits, err: tooLong },
        'operation waited too long',
      );
      const finished = await this.deps.store.transaction(async (tx) => {
        if (!(await tx.operations.finish(op.id, this.worker, 'failed', tooLong, now))) return false;
        for (const note of notes) await this.record(tx, op, note);
        await failResource(tx, op, tooLong);
        await this.record(tx, op, failedEvent(op, tooLong));
        return true;
      });
      if (finished) this.settled(op, 'failed', now);
      return;
    }
    await this.deps.store.transaction(async (tx) => {
      const released = await tx.operations.release(op.id, this.worker, {
        now,
        runAfter: now + progress.retryAfterMs,
        error: null,
        attempts: op.attempts,
        waits,
        waitingSince,
      });
      // What the step did, in the resource's own logs (a failover's steps…).
      if (released) for (const note of notes) await this.record(tx, op, note);
    });
  }

  /** Tells the observer that `op` ended (its end committed). */
  private settled(op: Operation, outcome: 'done' | 'failed', now: number): void {
    const accepted = Date.parse(op.createdAt);
    const seconds = Number.isFinite(accepted) ? Math.max(0, (now - accepted) / 1000) : 0;
    this.options.observer?.settled(op.kind, outcome, seconds);
  }

  /** One attempt, given up (as a retryable failure) if it does not settle in time. */
  private attempt(op: Operation): Promise<Progress> {
    const work = runHandler(op, this.deps);
    // A given-up attempt may still fail later: that is nobody's business.
    work.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new OperationTimeoutError(this.operationTimeoutMs)),
        this.operationTimeoutMs,
      );
      // Only a running engine needs it; a closed one must not keep the process alive.
      timer.unref();
    });
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }

  /**
   * A failed attempt. A permanent DriverError fails the operation and marks
   * its resource failed: nothing retries it until a user's request does.
   * Anything else is retried with backoff; after `failAfter` attempts the
   * resource is marked failed too, and retries go on at most every `capMs`
   * until `maxAttempts`, when the operation fails as a permanent error does.
   * Deleting never gives up (a user can always delete): its permanent errors
   * are retried like the others, at most every `capMs`.
   */
  private async fail(op: Operation, err: unknown): Promise<void> {
    const failure = err instanceof Error ? err.message : String(err);
    const attempts = op.attempts + 1;
    const exhausted = !isDelete(op.kind) && outOfAttempts(this.retry, attempts);
    const permanent =
      (err instanceof DriverError && !err.retryable && !isDelete(op.kind)) || exhausted;
    const reason = exhausted ? outOfAttemptsReason(attempts, failure) : failure;
    const now = this.deps.clock();
    const delay = backoffMs(this.retry, attempts, this.random);
    this.log.warn(
      { op: op.id, kind: op.kind, resource: op.resourceId, attempts, permanent, err: reason },
      'operation failed',
    );
    this.options.observer?.attemptFailed(op.kind);
    const finished = await this.deps.store.transaction(async (tx) => {
      if (permanent) {
        if (!(await tx.operations.finish(op.id, this.worker, 'failed', reason, now))) return false;
        await failResource(tx, op, reason);
        await this.record(tx, op, failedEvent(op, reason));
        return true;
      }
      const released = await tx.operations.release(op.id, this.worker, {
        now,
        runAfter: now + delay,
        error: reason,
        attempts,
      });
      if (!released) return false; // cancelled meanwhile, or another worker took it over
      if (attempts === this.retry.failAfter) await failResource(tx, op, reason);
      const event = retryEvent(this.retry, op, attempts, delay, reason);
      if (event) await this.record(tx, op, event);
      return false;
    });
    if (finished) this.settled(op, 'failed', now);
  }

  /** Writes an entry into the logs of the operation's resource, if it has logs and still exists. */
  private async record(tx: Tx, op: Operation, event: EventText): Promise<void> {
    if (op.resourceKind === 'peering') return;
    // A service's backups write into the service's logs.
    const kind = op.resourceKind === 'serviceBackups' ? 'service' : op.resourceKind;
    const repo = kind === 'service' ? tx.services : tx.replicaSets;
    if (!(await repo.get(op.resourceId))) return;
    await tx.events.add({
      resourceKind: kind,
      resourceId: op.resourceId,
      node: null,
      at: this.deps.clock(),
      ...event,
    });
  }

  private async releaseDeadLeases(): Promise<void> {
    const { operations } = this.deps.store;
    for (const holder of await operations.leaseHolders()) {
      if (holder === this.worker || !this.isDead(holder)) continue;
      const released = await this.deps.store.transaction((tx) =>
        tx.operations.releaseLeases(holder, this.deps.clock()),
      );
      this.log.info({ worker: holder, released }, 'took back the operations of a dead engine');
    }
  }

  private async renewLeases(): Promise<void> {
    if (this.inFlight.size === 0) return;
    try {
      await this.deps.store.transaction((tx) =>
        tx.operations.renew(this.worker, this.deps.clock(), this.leaseMs),
      );
    } catch (err) {
      this.log.error({ err }, 'renewing leases failed');
    }
  }

  private async runReconcile(): Promise<void> {
    const run = (async () => {
      try {
        const queued = await reconcile(this.deps, (err) => {
          if (!this.stopped) this.log.warn({ err }, 'reconciling a resource failed');
        });
        if (queued > 0) this.kick();
      } catch (err) {
        if (!this.stopped) this.log.error({ err }, 'reconcile failed');
      }
    })();
    this.reconciling = run;
    await run;
    this.reconciling = undefined;
    if (!this.stopped) {
      clearTimeout(this.reconcileTimer);
      this.reconcileTimer = setTimeout(
        () => void this.runReconcile(),
        this.options.reconcileIntervalMs,
      );
    }
  }
}

function isDelete(kind: OperationKind): boolean {
  return kind === 'service.delete' || kind === 'replicaSet.delete';
}
