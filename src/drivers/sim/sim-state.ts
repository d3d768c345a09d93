// Timed convergence for the sim driver. A resource (service or replica set)
// reaches a desired state `delayMs` after the first call that asked for it, as
// a real cloud's state change takes a while; everything is computed from the
// injected clock, with no timers, so tests with a fake clock are exact.

import { type Health } from '../driver.js';
import { DONE, wait, type Progress } from '../../domain/progress.js';

interface Entry<S> {
  /** The last spec whose application completed. */
  applied?: S;
  appliedKey?: string;
  /** A desired state being converged to: its key and when it was first asked for. */
  pending?: { key: string; startedMs: number };
  /** When deletion was first asked for. */
  deletingSinceMs?: number;
  /** Set by the crash test hook; cleared when an application completes. */
  crashed: boolean;
}

/** How an apply call describes the change it waits for (wait()'s reason). */
export type Describe<S> = (previous: S | undefined, crashed: boolean) => string;

/**
 * The sim's memory of one kind of resource. Lost on restart, on purpose: the
 * driver then treats a resource it has never seen as already matching its spec
 * (see health), as the local driver adopts processes it finds running.
 */
export class SimResources<S> {
  private readonly entries = new Map<string, Entry<S>>();
  /** Ids deleted since start, so they read as missing rather than being adopted. */
  private readonly deleted = new Set<string>();

  constructor(
    private readonly delayMs: number,
    private readonly clock: () => number,
    /** The fields of a spec that make up its desired state, as a comparable string. */
    private readonly keyOf: (spec: S) => string,
  ) {}

  /** The last applied spec, or undefined when unknown or not yet created. */
  get(id: string): S | undefined {
    return this.entries.get(id)?.applied;
  }

  /**
   * One step towards `spec`: DONE once `delayMs` has passed since the first
   * call that asked for this exact desired state (at once when it is already
   * in force and not crashed). A changed spec restarts the wait.
   */
  apply(id: string, spec: S, describe: Describe<S>): Progress {
    const now = this.clock();
    const key = this.keyOf(spec);
    this.deleted.delete(id);
    const entry = this.entryFor(id);
    entry.deletingSinceMs = undefined;
    if (entry.applied !== undefined && entry.appliedKey === key && !entry.crashed) {
      entry.applied = spec;
      entry.pending = undefined;
      return DONE;
    }
    if (entry.pending?.key !== key) entry.pending = { key, startedMs: now };
    const remaining = entry.pending.startedMs + this.delayMs - now;
    if (remaining > 0) return wait(Math.ceil(remaining), describe(entry.applied, entry.crashed));
    entry.applied = spec;
    entry.appliedKey = key;
    entry.pending = undefined;
    entry.crashed = false;
    return DONE;
  }

  /** One step of deletion, timed like apply; once DONE the resource is forgotten. */
  remove(id: string): Progress {
    const entry = this.entries.get(id);
    if (entry === undefined) return DONE;
    const now = this.clock();
    entry.pending = undefined;
    entry.deletingSinceMs ??= now;
    const remaining = entry.deletingSinceMs + this.delayMs - now;
    if (remaining > 0) return wait(Math.ceil(remaining), 'deleting');
    this.entries.delete(id);
    this.deleted.add(id);
    return DONE;
  }

  /**
   * What runs now. A resource never seen since start (a server restart) is
   * adopted as matching `spec`, so a restart does not make everything
   * UNSTABLE; one seen but not yet created, or deleted, is missing.
   */
  health(id: string, spec: S, running: (spec: S) => boolean): Health {
    if (this.deleted.has(id)) return 'missing';
    let entry = this.entries.get(id);
    if (entry?.crashed) return 'failed';
    if (entry === undefined) {
      entry = this.entryFor(id);
      entry.applied = spec;
      entry.appliedKey = this.keyOf(spec);
    }
    if (entry.applied === undefined) return 'missing';
    return running(entry.applied) ? 'running' : 'stopped';
  }

  /** Test hook: health reads 'failed' until an apply completes. False when unknown. */
  crash(id: string): boolean {
    const entry = this.entries.get(id);
    if (entry?.applied === undefined) return false;
    entry.crashed = true;
    return true;
  }

  private entryFor(id: string): Entry<S> {
    let entry = this.entries.get(id);
    if (entry === undefined) {
      entry = { crashed: false };
      this.entries.set(id, entry);
    }
    return entry;
  }
}
