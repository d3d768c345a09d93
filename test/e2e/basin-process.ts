// Basin as shipped, for the end-to-end tests: an installation of the
// harness (test/harness/installation.ts, shared with the benchmarks:
// `node dist/main.js` configured only by flags and environment, a data
// directory, ports, uids and addresses of its own) tied to a test, which
// releases it when it ends (every Basin killed, every process, OS user,
// network and cgroup of its services removed, the directory deleted).
//
// `installation(t)` gives a test file a data directory and a block of ports;
// `start()` runs Basin on them, as often as the test needs (restarts, kill -9);
// test/harness/basin-api.ts is how a test then talks to it.

import { existsSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import {
  claimInstallation,
  type Installation,
  MAIN,
  type StartOptions,
} from '../harness/installation.js';
import { ROOT } from '../harness/root.js';
import type { Launched } from '../harness/launched.js';

export { serviceNetwork } from '../harness/installation.js';
export type { Installation, Launched, StartOptions };

/**
 * An installation for this test; after it, every Basin started on it is
 * killed, every process and OS user of its services removed, the directory
 * deleted and the ports released. `defaults` apply to every start.
 */
export async function installation(
  t: TestContext,
  defaults: StartOptions = {},
  /** Where its directory is made (a file system the test made); the system's temporary directory by default. */
  under: string = tmpdir(),
): Promise<Installation> {
  checkBuilt();
  const inst = await claimInstallation(defaults, under);
  // When the test (or one of its subtests) fails, Basin's last words go with it.
  let failed = false;
  t.afterEach((sub: TestContext) => {
    if (!passed(sub)) failed = true;
  });
  t.after(async () => {
    if (failed || !passed(t)) {
      for (const run of inst.runs) {
        console.error(`Basin (pid ${run.pid}), last lines:\n${run.tail()}\n`);
      }
    }
    await inst.release();
  });
  return inst;
}

/** TestContext.passed (Node 20.16+; @types/node 20 does not list it yet). */
const passed = (t: TestContext) => (t as { passed?: boolean }).passed !== false;

/**
 * The end-to-end tests run dist/: a dist/ older than src/ would test old
 * code and pass. `npm test` builds first; a single file run needs
 * `npm run build` before it.
 */
function checkBuilt(): void {
  const built = existsSync(MAIN) ? statSync(MAIN).mtimeMs : 0;
  const newest = newestMtime(join(ROOT, 'src'));
  if (built < newest) {
    throw new Error(
      `${MAIN} is missing or older than src/: run \`npm run build\` first (\`npm test\` does).`,
    );
  }
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
      newest = Math.max(newest, statSync(path).mtimeMs);
    }
  }
  return newest;
}
