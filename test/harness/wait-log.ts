// TEST_WAIT_LOG=1: every wait of the harness (basin-api.ts' waitFor and
// what is built on it, test/cluster/cluster.ts' until and its setup steps)
// prints, to stderr, when it ended (seconds since the file's process
// started), how long it took, what it waited for and the test line that
// waited: where a file's minutes go, without a profiler. Off by default:
// nothing is printed and nothing is measured.

import { relative } from 'node:path';
import { ROOT } from './root.js';

const enabled = Boolean(process.env.TEST_WAIT_LOG);

/** The first caller outside the harness: a test file's line, or a shared helper's. */
function caller(): string {
  const frames = (new Error().stack ?? '').split('\n').slice(1);
  const harness = /\/test\/harness\/|\/test\/cluster\/cluster\.ts|node:internal|\/node_modules\//;
  const frame = frames.find((f) => !harness.test(f)) ?? '';
  const m = /\(?(?:file:\/\/)?(\/[^():]+):(\d+):\d+\)?$/.exec(frame.trim());
  return m ? `${relative(ROOT, m[1] as string)}:${m[2]}` : '?';
}

/**
 * Starts timing a wait; the returned function, called when it ends, prints
 * it. A no-op unless TEST_WAIT_LOG is set.
 */
export function waitTimer(what: string | (() => string)): (outcome?: string) => void {
  if (!enabled) return () => {};
  const started = performance.now();
  const at = caller();
  return (outcome = 'done') => {
    const ended = performance.now();
    const say = typeof what === 'string' ? what : what();
    process.stderr.write(
      `[wait] ${(ended / 1000).toFixed(1)}s ${((ended - started) / 1000).toFixed(1)}s ${outcome} ${at} ${say.slice(0, 100)}\n`,
    );
  };
}
