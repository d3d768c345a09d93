// What one step of slow work achieved. Drivers and the network provisioner
// return it; the engine either finishes the operation or runs it again after
// `retryAfterMs`. Failures are thrown, not returned.

/** Finished, or worth calling again after a while (and why, for logs and tests). */
export type Progress = { done: true } | { done: false; retryAfterMs: number; reason: string };

export const DONE: Progress = { done: true };

export const wait = (retryAfterMs: number, reason: string): Progress => ({
  done: false,
  retryAfterMs,
  reason,
});
