// The live status line of `--wait`: a spinner (yocto-spinner) with the
// service's status and how long it has waited, on the terminal run-cli is
// given. Without one (stdout or stderr piped, tests, CI) it writes nothing:
// the result on stdout is all a script sees.

import yoctoSpinner from 'yocto-spinner';
import type { ServiceStatus } from '../client/index.js';
import type { Clock } from '../lib/clock.js';

export interface StatusLine {
  /** The status seen now. */
  update(status: ServiceStatus): void;
  /** Ends the line: ✔ on success, ✖ with `failure`. */
  done(failure?: string): void;
}

const QUIET: StatusLine = { update() {}, done() {} };

export function statusLine(
  terminal: NodeJS.WriteStream | undefined,
  clock: Clock,
  what: string,
  target: ServiceStatus,
): StatusLine {
  if (!terminal) return QUIET;
  const started = clock();
  const spinner = yoctoSpinner({ stream: terminal, text: `${what}: waiting for ${target}` });
  spinner.start();
  let status: ServiceStatus | undefined;
  const text = () =>
    `${what}: ${status ?? '…'}${status === target ? '' : ` → ${target}`} (${seconds(clock() - started)})`;
  // The elapsed time moves even while the status does not.
  const tick = setInterval(() => (spinner.text = text()), 1000);
  tick.unref();
  return {
    update(s) {
      status = s;
      spinner.text = text();
    },
    done(failure) {
      clearInterval(tick);
      if (failure === undefined)
        spinner.success(`${what}: ${target} after ${seconds(clock() - started)}`);
      else spinner.error(`${what}: ${failure}`);
    },
  };
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
