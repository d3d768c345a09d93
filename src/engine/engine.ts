// The engine runs the durable operations that commands queue, and repairs
// drift between the store and the driver. It is the only writer of status
// moves that requests do not make (QUEUED → CONFIGURING, READY → UNSTABLE, …).
//
// Operations survive a crash because they live in the store: on start the
// engine takes back leases left by a dead process and runs everything pending
// again. Handlers are idempotent, so re-running a half-done step is safe.

import { randomBytes } from 'node:crypto';
import { DriverError } from '../drivers/driver.js';
import type { Logger } from '../lib/logger.js';
import type { Operation } from '../store/store.js';
import { HANDLERS, type HandlerDeps, markFailed } from './handlers.js';
import { reconcile } from './reconciler.js';

export interface EngineOptions {
  concurrency?: number;
  leaseMs?: number;
  maxAttempts?: number;
  reconcileIntervalMs: number;
}

export class Engine {
  private readonly worker = `engine-${randomBytes(4).toString('hex')}`;
  private readonly inFlight = new Map<number, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private reconcileTimer: NodeJS.Timeout | undefined;
  private ticking = false;
  private again = false;
  private stopped = true;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly maxAttempts: number;

  constructor(
    private readonly deps: HandlerDeps,
    private readonly log: Logger,
    private readonly options: EngineOptions,
  ) {
    this.concurrency = options.concurrency ?? 4;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.maxAttempts = options.maxAttempts ?? 20;
  }

  /** Starts running operations and reconciling. Unfinished work of a previous run resumes. */
  async start(): Promise<void> {
    this.stopped = false;
    // With the embedded store only this process runs operations, so every
    // lease in the table belongs to a process that is gone.
    await this.deps.store.transaction((tx) => tx.operations.resetLeases());
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

  /** Stops taking work and waits for operations in flight; their leases are released. */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.reconcileTimer);
    await Promise.allSettled([...this.inFlight.values()]);
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

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), Math.max(0, ms));
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.ticking = true;
    try {
      const free = this.concurrency - this.inFlight.size;
      if (free > 0) {
        const now = this.deps.clock();
        const ops = await this.deps.store.transaction((tx) =>
          tx.operations.claim(this.worker, now, this.leaseMs, free),
        );
        for (const op of ops) {
          const run = this.run(op).finally(() => {
            this.inFlight.delete(op.id);
            this.kick();
          });
          this.inFlight.set(op.id, run);
        }
      }
      const next = await this.deps.store.operations.nextDue();
      if (this.again) this.schedule(0);
      else if (next !== undefined) this.schedule(Math.min(next - this.deps.clock(), 1000));
    } catch (err) {
      this.log.error({ err }, 'engine loop failed; retrying');
      this.schedule(1000);
    } finally {
      this.ticking = false;
      this.again = false;
    }
  }

  private async run(op: Operation): Promise<void> {
    const ops = this.deps.store;
    const handler = HANDLERS[op.kind];
    try {
      if (!handler) throw new DriverError(`unknown operation kind ${op.kind}`, false);
      const progress = await handler(op, this.deps);
      if (progress.done) {
        await ops.transaction((tx) => tx.operations.finish(op.id, 'done', null));
        this.log.info({ op: op.id, kind: op.kind, resource: op.resourceId }, 'operation done');
      } else {
        await ops.transaction((tx) =>
          tx.operations.release(
            op.id,
            this.deps.clock() + progress.retryAfterMs,
            null,
            op.attempts,
          ),
        );
      }
    } catch (err) {
      await this.fail(op, err);
    }
  }

  private async fail(op: Operation, err: unknown): Promise<void> {
    const message = err instanceof Error ? err.message : String(err);
    const attempts = op.attempts + 1;
    const permanent =
      (err instanceof DriverError && !err.retryable) || attempts >= this.maxAttempts;
    this.log.warn(
      { op: op.id, kind: op.kind, resource: op.resourceId, attempts, err: message },
      'operation failed',
    );
    if (permanent) {
      await this.deps.store.transaction((tx) => tx.operations.finish(op.id, 'failed', message));
      await markFailed({ ...op, lastError: message }, this.deps.store);
      return;
    }
    // Exponential backoff with jitter, capped at 30 s.
    const backoff = Math.min(30_000, 250 * 2 ** (attempts - 1)) * (0.75 + Math.random() / 2);
    await this.deps.store.transaction((tx) =>
      tx.operations.release(op.id, this.deps.clock() + backoff, message, attempts),
    );
  }

  private async runReconcile(): Promise<void> {
    try {
      const queued = await reconcile(this.deps);
      if (queued > 0) this.kick();
    } catch (err) {
      this.log.error({ err }, 'reconcile failed');
    }
    if (!this.stopped) {
      clearTimeout(this.reconcileTimer);
      this.reconcileTimer = setTimeout(
        () => void this.runReconcile(),
        this.options.reconcileIntervalMs,
      );
    }
  }
}
