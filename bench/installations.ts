// The benchmarks' Basins, each an installation of the harness the end-to-end
// tests use (test/harness/installation.ts: `node dist/main.js` configured
// only by flags and environment, with ports, service uids and addresses no
// other installation on the host has), made under the run's directory and
// released by the benchmark that claimed it, or on the way out.
//
// Basin's clusters outlive Basin on purpose, so release, Ctrl-C and exit all
// end in the harness's clean-up (test/harness/clean-up.ts): SIGQUIT first
// (PostgreSQL's immediate shutdown, which still removes its shared memory),
// SIGKILL after a grace period, then the installation's cgroups, networks,
// directory and OS users.

import { chmodSync } from 'node:fs';
import { removeInstallationLeftoversNow } from '../test/harness/clean-up.js';
import {
  claimInstallation,
  type ClaimedInstallation,
  type StartOptions,
} from '../test/harness/installation.js';
import type { BenchContext } from './bench-context.js';

export type { ClaimedInstallation, StartOptions };
export type { BasinProcess } from '../test/harness/basin-api.js';
export { REPO_DIST } from '../test/harness/installation.js';

/** Installations of running benchmarks: cleaned up on the way out. */
const claimed = new Set<ClaimedInstallation>();
let handlersInstalled = false;

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // run.ts stops the children and removes the run's directory on SIGINT and
  // SIGTERM; the clusters go first, so that nothing writes into it meanwhile.
  const onSignal = () => {
    for (const inst of [...claimed]) cleanUpNow(inst, 2_000);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', () => {
    for (const inst of [...claimed]) cleanUpNow(inst, 0);
  });
}

function cleanUpNow(inst: ClaimedInstallation, graceMs: number): void {
  claimed.delete(inst);
  try {
    removeInstallationLeftoversNow(inst.dataDir, { graceMs });
  } catch (err) {
    console.error(`cleaning up ${inst.dataDir}: ${(err as Error).message}`);
  }
}

/**
 * A fresh installation under the run's directory. PostgreSQL runs as
 * unprivileged users, who must be able to cross the directories above it:
 * the run's directory gets the search bit (not read) for others.
 */
export async function claimBenchInstallation(
  ctx: BenchContext,
  defaults: StartOptions = {},
): Promise<ClaimedInstallation> {
  installHandlers();
  chmodSync(ctx.tmpDir, 0o711);
  const inst = await claimInstallation(
    { nodeArgs: ctx.settings.basinNodeArgs, ...defaults },
    ctx.tmpDir,
  );
  claimed.add(inst);
  return inst;
}

/** Stops what still runs of the installation (3 s after SIGQUIT, SIGKILL), removes what it left. */
export async function releaseBenchInstallation(inst: ClaimedInstallation): Promise<void> {
  if (!claimed.delete(inst)) return;
  await inst.release({ graceMs: 3_000 });
}
