// Which of the Basin processes sharing a PostgreSQL store leads: runs the
// driver's start (adoption, supervisors), the engine and the reconciler.
// The others serve the API only. (A SQLite store has one Basin, which leads
// without any of this: basin.ts.) See docs/decisions.md, "Several
// processes: leadership and fencing".
//
// - The lease is one row of the store (LeadershipRepo), timed by the
//   store's clock: a candidate takes it once it expired, which bumps the
//   term; the leader renews it every third of the lease.
// - The leader's own guard (mayAct) is its monotonic clock: it counts
//   itself leader only until `lease - margin` after it *sent* its last
//   successful renewal. The store set that lease's end at least as late
//   (its statement ran after the send), so the guard lapses before any
//   other process can take the lease, whatever the processes' clocks say,
//   as long as the clocks run at the same rate (they do, on one host; the
//   margin covers drift elsewhere).
// - Anything that acts only for the leader asks mayAct() first; the
//   leader's store writes are fenced by term as well (Store.fenced).
// - A leader whose guard lapsed does not act until a renewal gets through;
//   one that finds it lost leadership (a renewal refused: another took the
//   lease; a write fenced) calls `lost` at once, synchronously: basin.ts
//   stops acting (main.ts exits, and a supervisor starts it again, as a
//   candidate).
// - A new leader first fences the one whose lease expired (`fence`: on its
//   own host, lib/leader-process.ts kills it), so that a step the old one
//   had under way when it stalled cannot carry on beside the new one.

import { performance } from 'node:perf_hooks';
import { leaderHolder } from '../lib/leader-process.js';
import type { Logger } from '../lib/logger.js';
import type { Acquired, LeadershipRepo } from '../store/store.js';

export interface LeadershipOptions {
  /** How long a lease holds without renewal (default 3 s: a killed leader is replaced within 5 s). */
  leaseMs?: number;
  /** How often a candidate tries to take the lease (default 500 ms). */
  pollMs?: number;
  /** What the guard takes off the lease (default a sixth of it). */
  marginMs?: number;
  /** This process, as the lease names it (default `<host>/<pid>`). */
  holder?: string;
  /** A monotonic clock in ms (tests). */
  now?: () => number;
  /**
   * Stops the former holder of an expired lease before this process leads
   * (lib/leader-process.ts, fenceHolder); says what it did, for the log.
   */
  fence?: (holder: string) => Promise<string>;
}

export const LEADERSHIP_DEFAULTS = { leaseMs: 3_000, pollMs: 500 };

export interface LeaderRole {
  /** Leads as `term` from now on: start what only the leader runs. */
  lead(term: number): Promise<void>;
  /** Leadership of `term` is lost: stop acting, at once (called synchronously). */
  lost(term: number, reason: string): void;
}

/** Acting while not the leader was refused (mayAct was false). */
export class NotLeaderError extends Error {
  constructor(reason: string) {
    super(`this Basin process may not act now (${reason}); it does not`);
    this.name = 'NotLeaderError';
  }
}

export class Leadership {
  private term: number | undefined;
  /** The monotonic time until which this process counts itself leader. */
  private validUntil = 0;
  private lostReason: string | undefined;
  /** The guard lapsed and no renewal got through since (mayAct). */
  private suspended = false;
  private timer: NodeJS.Timeout | undefined;
  /** Looks at the guard while leading, even when a renewal hangs. */
  private watchdog: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly marginMs: number;
  private readonly holder: string;
  private readonly now: () => number;
  private readonly fence: ((holder: string) => Promise<string>) | undefined;

  constructor(
    private readonly repo: LeadershipRepo,
    private readonly role: LeaderRole,
    private readonly log: Logger,
    options: LeadershipOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? LEADERSHIP_DEFAULTS.leaseMs;
    this.pollMs = options.pollMs ?? LEADERSHIP_DEFAULTS.pollMs;
    this.marginMs = options.marginMs ?? Math.round(this.leaseMs / 6);
    this.holder = options.holder ?? leaderHolder();
    this.now = options.now ?? (() => performance.now());
    this.fence = options.fence;
  }

  /** Starts trying to lead (at once, then every pollMs until it does). */
  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** The term this process leads as; undefined while it does not. */
  get leading(): number | undefined {
    return this.lostReason === undefined ? this.term : undefined;
  }

  /**
   * Whether this process may act as the leader now: it holds a term and its
   * guard has not lapsed. A lapsed guard suspends acting, without losing
   * the term: a renewal that still finds the term (nobody took the lease
   * meanwhile: terms only grow) confirms it again, one that does not loses
   * it. So a lone leader on a stalled host pauses rather than exits.
   */
  mayAct(): boolean {
    if (this.term === undefined || this.lostReason !== undefined) return false;
    if (this.now() < this.validUntil) return true;
    if (!this.suspended) {
      this.suspended = true;
      this.log.warn(
        { term: this.term },
        `leadership unconfirmed: no renewal for ${this.leaseMs - this.marginMs} ms; not acting until one gets through`,
      );
    }
    return false;
  }

  /** A write of `term` was fenced: another process leads. */
  fenced(term: number, current: number | undefined): void {
    if (term === this.term) this.lose(`a write was fenced: term ${current ?? 'none'} leads`);
  }

  /**
   * Stops trying and renewing; when it leads (and did not lose it), ends its
   * lease so that the next candidate takes over at once. Call it once what
   * the leader runs has stopped.
   */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    const term = this.leading;
    if (term === undefined) return;
    this.lostReason = 'released at shutdown';
    await this.repo.release(term).catch((err: unknown) => {
      this.log.warn({ err, term }, 'could not release the leadership lease; it expires by itself');
    });
    this.log.info({ term }, 'released leadership');
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.step(), ms);
  }

  private async step(): Promise<void> {
    if (this.stopped || this.lostReason !== undefined) return;
    if (this.term === undefined) await this.tryToLead();
    else await this.renew(this.term);
    if (this.lostReason !== undefined) return;
    this.schedule(this.term === undefined ? this.pollMs : Math.round(this.leaseMs / 3));
  }

  private async tryToLead(): Promise<void> {
    const sent = this.now();
    let acquired: Acquired | undefined;
    try {
      acquired = await this.repo.acquire(this.holder, this.leaseMs);
    } catch (err) {
      this.log.warn({ err }, 'could not ask the store for leadership; trying again');
      return;
    }
    if (acquired === undefined || this.stopped) return;
    const { term, previous } = acquired;
    this.term = term;
    this.validUntil = sent + this.leaseMs - this.marginMs;
    this.log.info({ term, holder: this.holder }, `leading as term ${term}`);
    // Renewals go on while the role starts (the driver's start takes seconds).
    this.schedule(Math.round(this.leaseMs / 3));
    this.watchdog = setInterval(() => this.mayAct(), Math.max(50, Math.round(this.marginMs / 2)));
    try {
      if (previous !== null && previous !== this.holder && this.fence) {
        const fenced = await this.fence(previous);
        this.log.info(
          { term, previous, fenced },
          `fenced the former leader ${previous}: ${fenced}`,
        );
      }
      await this.role.lead(term);
    } catch (err) {
      if (this.lostReason === undefined) {
        this.log.error({ err, term }, 'could not start leading');
        this.lose('its start failed');
      }
    }
  }

  private async renew(term: number): Promise<void> {
    const sent = this.now();
    let renewed: boolean;
    try {
      renewed = await this.repo.renew(term, this.leaseMs);
    } catch (err) {
      // The store is unreachable: the guard lapses unless a renewal gets through in time.
      this.log.warn({ err, term }, 'could not renew the leadership lease');
      this.mayAct();
      return;
    }
    if (!renewed) {
      this.lose('its lease was taken: another process leads');
      return;
    }
    // Still this term's: nobody led meanwhile, and the lease runs from the send.
    this.validUntil = sent + this.leaseMs - this.marginMs;
    if (this.suspended && this.mayAct()) {
      this.suspended = false;
      this.log.info({ term }, 'leadership confirmed again: acting again');
    }
  }

  private lose(reason: string): void {
    if (this.lostReason !== undefined || this.term === undefined) return;
    this.lostReason = reason;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    this.log.error({ term: this.term, reason }, `leadership lost (term ${this.term}): ${reason}`);
    this.role.lost(this.term, reason);
  }
}
