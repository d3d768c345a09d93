// What one step of slow work achieved. Drivers and the network provisioner
// return it; the engine either finishes the operation or runs it again after
// `retryAfterMs`. Failures are thrown, not returned.

/**
 * Something a step did that the resource's own logs should tell (a
 * `basin: …` entry): the engine writes it when it records the step.
 */
export interface ProgressNote {
  severity: 'LOG' | 'WARNING' | 'ERROR';
  message: string;
  /** When it happened (epoch ms), when that is not when it is recorded (a line of Patroni's log). */
  at?: number;
  /**
   * Written only if the resource's logs do not hold it yet: `at` the same
   * entry at that very time (`at` given), `ever` one with all these terms.
   * What a driver reads again (a log re-read after a restart, a reading of
   * another control-plane process) is then told once.
   */
  once?: 'at' | { ever: string[] };
}

/** Finished, or worth calling again after a while (and why, for logs and tests). */
export type Progress =
  { done: true } | { done: false; retryAfterMs: number; reason: string; notes?: ProgressNote[] };

export const DONE: Progress = { done: true };

export const wait = (retryAfterMs: number, reason: string, note?: ProgressNote): Progress => ({
  done: false,
  retryAfterMs,
  reason,
  ...(note ? { notes: [note] } : {}),
});

/**
 * Two steps that both wait (nodes converged side by side): call again when
 * the sooner is due, and keep what each has to tell, so that no node's
 * entry is lost because another node waited too.
 */
export function sooner(
  a: Progress & { done: false },
  b: Progress & { done: false },
): Progress & { done: false } {
  const first = b.retryAfterMs < a.retryAfterMs ? b : a;
  const notes = [...(a.notes ?? []), ...(b.notes ?? [])];
  return {
    done: false,
    retryAfterMs: first.retryAfterMs,
    reason: first.reason,
    ...(notes.length > 0 ? { notes } : {}),
  };
}
