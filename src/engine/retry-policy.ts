// How the engine retries a failing operation, and which failures it writes
// into the resource's logs (docs/decisions.md, Failures). Pure, so the policy
// is tested without an engine.

import { describeOperation, type NewOperation } from '../domain/operations.js';
import { duration } from '../lib/duration.js';

export { duration };

export interface RetryPolicy {
  /** Delay after the first failed attempt; it doubles with each further one. */
  baseMs: number;
  /** The longest delay: an operation that keeps failing is tried this often. */
  capMs: number;
  /**
   * After this many failed attempts the resource is marked failed (a service
   * UNSTABLE, a replica set `error`, a peering `failed`) while the operation
   * goes on retrying at most every `capMs`.
   */
  failAfter: number;
  /**
   * After this many failed attempts the operation ends failed: no more
   * retries until a user's request queues new work (deletes excepted: a user
   * can always delete). The default, 20, is about an hour of retries.
   */
  maxAttempts: number;
  /**
   * The longest an operation may go on waiting ("not done yet, call again":
   * a postmaster starting, a backup running), from its first wait; then it
   * ends failed like one out of attempts. Generous by default (24 h), since a
   * base backup of a large service legitimately takes hours.
   */
  maxWaitMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  baseMs: 1_000,
  capMs: 300_000,
  failAfter: 5,
  maxAttempts: 20,
  maxWaitMs: 86_400_000,
};

/** Whether a failure after `attempts` failed attempts ends the operation. */
export function outOfAttempts(policy: RetryPolicy, attempts: number): boolean {
  return attempts >= policy.maxAttempts;
}

/**
 * Whether an operation that waited since `since` (and `waits` times) has
 * waited too long, and, if so, the reason its resource's logs give.
 */
export function waitedTooLong(
  policy: RetryPolicy,
  since: number,
  now: number,
  waits: number,
  reason: string,
): string | undefined {
  if (now - since < policy.maxWaitMs) return undefined;
  const checks = waits === 1 ? 'check' : 'checks';
  return `still ${reason} after ${duration(now - since)} (${waits} ${checks}); Basin waits at most ${duration(policy.maxWaitMs)}`;
}

/** The reason given when the attempts ran out. */
export function outOfAttemptsReason(attempts: number, reason: string): string {
  return `gave up after ${attempts} failed attempts; the last: ${reason}`;
}

/** The delay before attempt `attempts + 1`, with ±25 % jitter so retries do not march in step. */
export function backoffMs(policy: RetryPolicy, attempts: number, random: () => number): number {
  const raw = policy.baseMs * 2 ** Math.min(Math.max(attempts - 1, 0), 40);
  return Math.round(Math.min(policy.capMs, raw * (0.75 + random() / 2)));
}

export interface EventText {
  severity: 'ERROR' | 'WARNING' | 'LOG';
  message: string;
}

/** Failed for good: nothing retries it until a user's request does. */
export function failedEvent(op: NewOperation, reason: string): EventText {
  return { severity: 'ERROR', message: `basin: ${describeOperation(op)} failed: ${reason}` };
}

/**
 * A failed attempt that will be retried, or undefined when it is not worth an
 * entry: the first, each doubling of the count and the one that marks the
 * resource failed are written, so a failure that repeats for hours leaves a
 * handful of entries, not one per retry.
 */
export function retryEvent(
  policy: RetryPolicy,
  op: NewOperation,
  attempts: number,
  delayMs: number,
  reason: string,
): EventText | undefined {
  const doubling = (attempts & (attempts - 1)) === 0;
  if (!doubling && attempts !== policy.failAfter) return undefined;
  return {
    severity: attempts >= policy.failAfter ? 'ERROR' : 'WARNING',
    message: `basin: ${describeOperation(op)} failed (attempt ${attempts}), retrying in ${duration(delayMs)}: ${reason}`,
  };
}

/** It worked after failing: say so, since the failures are in the logs too. */
export function recoveredEvent(op: NewOperation, attempts: number): EventText {
  const times = attempts === 1 ? 'attempt' : 'attempts';
  return {
    severity: 'LOG',
    message: `basin: ${describeOperation(op)} succeeded after ${attempts} failed ${times}`,
  };
}
