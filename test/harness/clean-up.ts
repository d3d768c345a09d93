// What a Basin installation leaves on the host, removed: the one clean-up
// the end-to-end tests, the local driver's tests and the benchmarks share.
//
// Basin's clusters are detached from Basin on purpose (databases outlive the
// API server), and when Basin runs as root each service runs as an OS user
// of its own that only the service's deletion removes. So after a test or a
// benchmark, and on error, Ctrl-C and exit: every process working under the
// data directory (PostgreSQL chdirs into its pgdata; its children inherit
// it), naming it on its command line (Basin itself) or running as one of the
// installation's service users is stopped, the installation's cgroups,
// network namespaces, veths and nftables table are removed, then the
// directory and the users.
//
// It comes in two forms over the same steps: `removeInstallationLeftovers`
// waits without blocking; `removeInstallationLeftoversNow` blocks
// (`Atomics.wait`), for signal and exit handlers, which cannot wait for a
// promise.

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { removeLeftBackupCgroups } from '../../src/drivers/local/host/cgroups/backup-cgroup.js';
import { removeInstallationCgroups } from '../../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import { groupExists, readPasswd, type PasswdEntry } from '../../src/drivers/local/host/os-user.js';
import { installationUsers } from '../../src/drivers/local/host/service-users.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { removeInstallationNetwork } from '../../src/drivers/local/network/remove-installation.js';

export interface LeftoverOptions {
  /**
   * How long processes get after SIGQUIT (PostgreSQL's immediate shutdown,
   * which still removes its shared memory) before SIGKILL; 0 (the default)
   * sends SIGKILL at once.
   */
  graceMs?: number;
}

/** Stops what runs of the installation at `dataDir` and removes everything it made on the host. */
export async function removeInstallationLeftovers(
  dataDir: string,
  options: LeftoverOptions = {},
): Promise<void> {
  for (const ms of steps(dataDir, options.graceMs ?? 0)) await sleep(ms);
}

/** The same, blocking: for signal and exit handlers. */
export function removeInstallationLeftoversNow(
  dataDir: string,
  options: LeftoverOptions = {},
): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (const ms of steps(dataDir, options.graceMs ?? 0)) Atomics.wait(pause, 0, 0, ms);
}

/** The installation tag of `dataDir`, if its driver wrote one. */
export function installationOf(dataDir: string): string | undefined {
  try {
    const tag = readFileSync(new Layout(dataDir).installationFile, 'utf8').trim();
    return tag === '' ? undefined : tag;
  } catch {
    return undefined;
  }
}

/** The OS users the local driver made for the services of `dataDir` (none when not root). */
export function serviceUsersOf(dataDir: string): PasswdEntry[] {
  const tag = installationOf(dataDir);
  return tag === undefined ? [] : installationUsers(tag);
}

/** The pgdata of a service's node (0: its primary) in the installation at `dataDir`. */
export function servicePgdata(dataDir: string, serviceId: string, node = 0): string {
  return new Layout(dataDir).pgdata({ id: serviceId, node });
}

/** The template cluster's pgdata in the installation at `dataDir`. */
export function templatePgdata(dataDir: string): string {
  return new Layout(dataDir).templatePgdata;
}

/**
 * The clean-up, as the pauses it needs: the installation tag goes first (a
 * Basin still running then makes no new service user), then the processes;
 * a Basin still running can restart a cluster while the tree is removed, so
 * the processes are stopped again until the directory is gone.
 */
function* steps(dataDir: string, graceMs: number): Generator<number, void> {
  const tag = installationOf(dataDir);
  const users = () => (tag === undefined ? [] : installationUsers(tag));
  rmSync(new Layout(dataDir).installationFile, { force: true });
  for (let attempt = 1; ; attempt++) {
    yield* stopProcesses(dataDir, users, attempt === 1 ? graceMs : 0);
    // The backups' cgroups and the nodes', poolers' and helpers', empty once
    // their processes are gone; then the namespaces, veths and nftables table.
    removeLeftBackupCgroups(new Layout(dataDir).backupsDir);
    if (tag !== undefined) removeInstallationCgroups(tag);
    if (tag !== undefined) removeInstallationNetwork(tag);
    try {
      rmSync(dataDir, { recursive: true, force: true });
      break;
    } catch (err) {
      if (attempt >= 10) throw err;
      yield 200;
    }
  }
  yield* stopProcesses(dataDir, users, 0);
  // Once more, now that nothing of it runs: a Basin still alive during the
  // loop above can load its table again after it was removed, and a table
  // that outlives its veths resets the connections of whoever claims its
  // addresses next (remove-installation.ts, removeNetworksIn).
  if (tag !== undefined) removeInstallationNetwork(tag);
  yield* deleteUsers(users());
}

/** SIGQUIT, then SIGKILL from `graceMs` on, looking again every 20 ms; gives up 5 s after. */
function* stopProcesses(
  dataDir: string,
  users: () => PasswdEntry[],
  graceMs: number,
): Generator<number, void> {
  const since = Date.now();
  let quitSent = false;
  for (;;) {
    const pids = processesOf(dataDir, new Set(users().map((u) => u.uid)));
    const elapsed = Date.now() - since;
    if (pids.length === 0 || elapsed > graceMs + 5_000) return;
    if (elapsed >= graceMs) signal(pids, 'SIGKILL');
    else if (!quitSent) signal(pids, 'SIGQUIT');
    quitSent = true;
    yield 20;
  }
}

/** Live processes (not zombies) working under `dir`, naming it in their command line, or running as one of `uids`. */
export function processesOf(dir: string, uids: ReadonlySet<number> = new Set()): number[] {
  const pids: number[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      const state = /^State:\s+(\S)/m.exec(status)?.[1];
      if (state === undefined || state === 'Z' || state === 'X') continue;
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      if (uids.has(uid) || readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) {
        pids.push(Number(name));
        continue;
      }
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      if (cwd === dir || cwd.startsWith(dir + '/')) pids.push(Number(name));
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return pids;
}

function signal(pids: readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // Already gone.
    }
  }
}

/**
 * Deletes the service users (their processes are gone; -f: zombies do not
 * keep them), retrying while another useradd/userdel holds the lock of the
 * password files, as the driver does.
 */
function* deleteUsers(users: readonly PasswdEntry[]): Generator<number, void> {
  for (const u of users) {
    for (const [cmd, exists] of [
      ['userdel', () => readPasswd().some((p) => p.name === u.name)],
      ['groupdel', () => groupExists(u.name)],
    ] as const) {
      for (let attempt = 0; exists(); attempt++) {
        try {
          execFileSync(cmd, cmd === 'userdel' ? ['-f', u.name] : [u.name], { stdio: 'pipe' });
        } catch (err) {
          const out = String((err as { stderr?: unknown }).stderr ?? '').trim();
          if (attempt < 60 && /cannot lock|try again later/i.test(out)) {
            yield 25 + Math.floor(Math.random() * 50);
            continue;
          }
          if (exists()) console.error(`${cmd} ${u.name} failed: ${out}`);
          break;
        }
      }
    }
  }
}
