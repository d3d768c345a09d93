// The handle on a started Basin process, apart from installation.ts (which
// starts it) so that basin-api.ts (which talks to it, and which
// installation.ts uses) does not import installation.ts back.

/** A `node dist/main.js` process, whether or not its API answers. */
export interface Launched {
  readonly pid: number;
  /** Everything the process wrote to stdout and stderr (the recent part). */
  output(): string;
  /** Its last lines of output, for failure messages. */
  tail(): string;
  /** Resolves when it exits. */
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** Sends a signal, if it still runs. */
  signal(name: NodeJS.Signals): void;
  /** kill -9: no shutdown hooks, no draining. */
  kill(): Promise<void>;
}
