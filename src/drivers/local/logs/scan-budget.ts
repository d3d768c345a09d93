// What one request may spend reading logs. The log directory belongs to the
// service's OS user, which its tenant can act as (docs/security.md): it can
// hold a 256 MB line, millions of files or a file that never ends, and a
// request must still answer soon, at a bounded cost, and stop when its
// client leaves (issue 7, hole 3). The numbers are in docs/decisions.md.

/** Bounds of one read of a node's logs. */
export interface ReadLimits {
  /** Bytes read from the files, in all (each file opened costs FILE_COST more). */
  maxScanBytes: number;
  /** Wall time before the request answers with what it has. */
  maxMs: number;
  /** The longest line read whole; a longer one is cut to this, and its entry marked. */
  maxLineBytes: number;
  /** Directory entries looked at (a directory may hold far more than PostgreSQL ever writes). */
  maxListed: number;
}

export const READ_LIMITS: Readonly<ReadLimits> = Object.freeze({
  maxScanBytes: 16 * 1024 * 1024,
  maxMs: 2_000,
  maxLineBytes: 256 * 1024,
  maxListed: 10_000,
});

/** What opening a file counts as, so that a million empty files cost what 4 GB of lines would not. */
export const FILE_COST = 4 * 1024;

/**
 * The budget of one request: bytes read, time spent, and the client's
 * abort signal. Reading stops (with a cursor where it stopped) once the
 * budget is spent, never before something was read: every page moves on.
 */
export class ScanBudget {
  private bytes = 0;
  private readonly startedMs: number;

  constructor(
    readonly limits: ReadLimits,
    private readonly signal: AbortSignal | undefined,
    private readonly onRead: ((bytes: number) => void) | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.startedMs = now();
  }

  /** Counts `bytes` as read. */
  charge(bytes: number): void {
    this.bytes += bytes;
    this.onRead?.(bytes);
  }

  /** Throws the signal's reason (an AbortError) once the client has gone. */
  checkAborted(): void {
    this.signal?.throwIfAborted();
  }

  /** Whether the request must answer now; throws when the client has gone. */
  get spent(): boolean {
    this.checkAborted();
    return (
      this.bytes >= this.limits.maxScanBytes || this.now() - this.startedMs >= this.limits.maxMs
    );
  }
}
