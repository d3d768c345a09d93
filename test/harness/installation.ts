// A Basin installation as users run it, for the end-to-end tests and the
// benchmarks alike: `node dist/main.js` (the very program `npm start` runs)
// as a child process configured only by flags and environment, on a data
// directory it creates itself, with the default (local) driver unless asked
// for another. Everything goes through its HTTP API; nothing reaches into its
// store. Basin leaves its databases running when it exits (on purpose), so
// the release kills what is left under the data directory and removes what
// the local driver made on the host (clean-up.ts).
//
// `claimInstallation()` gives a data directory, a block of ports, a range of
// service uids and a service network no other installation on the host has;
// `start()` runs Basin on them, as often as needed (restarts, kill -9);
// basin-api.ts is how a caller then talks to it. test/e2e/basin-process.ts
// ties an installation to a test; the benchmarks release theirs themselves.

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { removeNetworksIn } from '../../src/drivers/local/network/remove-installation.js';
import { API_KEY } from '../helpers.js';
import { answering, type BasinProcess } from './basin-api.js';
import { type LeftoverOptions, removeInstallationLeftovers } from './clean-up.js';
import type { Launched } from './launched.js';
import { claimBlock, claimPortBlock } from './port-block.js';
import { seedTemplate } from './shared-template.js';
import { ROOT } from './root.js';

const runFile = promisify(execFile);

/** The build the tests and benchmarks run: this repository's dist/. */
export const REPO_DIST = join(ROOT, 'dist');
export const MAIN = join(REPO_DIST, 'main.js');
const CLI = join(REPO_DIST, 'cli/basin.js');
/** Lines of Basin's output quoted in failure messages. */
const TAIL_LINES = 60;
/** How an installation's parent directory is named: after its port block. */
const PREFIX = 'basin-e2e-';

export interface StartOptions {
  /** `local` (the default, as shipped: no BASIN_DRIVER is set) or `sim`. */
  driver?: 'local' | 'sim' | 'hosts';
  /** More BASIN_* environment. */
  env?: Record<string, string>;
  /** More flags. */
  args?: string[];
  /**
   * BASIN_BOOTSTRAP_API_KEY (default: test/helpers.ts' API_KEY); `null` sets
   * none, so a first start prints a random key, which is then used.
   */
  bootstrapKey?: string | null;
  /** The key to call the API with, when it is neither of those (a restart without bootstrapKey). */
  bearerKey?: string;
  /**
   * A file for Basin's stdout and stderr, appended to, instead of memory: a
   * benchmark's access log would cost the parent, which drives the load, a
   * share of its core. output() and tail() read the file.
   */
  logPath?: string;
  /** Another build's dist/ directory (to compare builds); REPO_DIST by default. */
  dist?: string;
  /** Flags for node itself, e.g. --cpu-prof. */
  nodeArgs?: readonly string[];
  /**
   * At claim (a default only): let Basin build its PostgreSQL template
   * itself instead of starting with a copy of the run's (shared-template.ts).
   */
  ownTemplate?: boolean;
}

export interface Installation {
  /** Basin's --data-dir; Basin creates it on its first start, as it does `.basin`. */
  readonly dataDir: string;
  readonly apiPort: number;
  /** The ports Basin gives databases (--port-range). */
  readonly portRange: { min: number; max: number };
  /** The uids Basin gives services' OS users (--service-uid-range). */
  readonly serviceUids: { min: number; max: number };
  /** The services' addresses (--service-network). */
  readonly serviceNetwork: string;
  /** Starts `node dist/main.js` on this installation; resolves once the API answers. */
  start(options?: StartOptions): Promise<BasinProcess>;
  /** Starts it and returns at once (for runs whose API never answers, or not over plain HTTP). */
  launch(options?: StartOptions): Launched;
  /** Runs the shipped CLI, `node dist/cli/basin.js --data-dir <dataDir> …args`. */
  cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

export interface ClaimedInstallation extends Installation {
  /** Every Basin launched on it so far. */
  readonly runs: readonly Launched[];
  /**
   * Kills every Basin started on it, removes what its services left, the
   * directory, and frees the ports. `graceMs`: how long the services'
   * processes get after SIGQUIT before SIGKILL (clean-up.ts); none by default.
   */
  release(options?: LeftoverOptions): Promise<void>;
}

/**
 * A data directory (under a fresh 0711 parent, as a checkout usually sits)
 * and a block of ports, uids and addresses of its own. `defaults` apply to
 * every start.
 */
export async function claimInstallation(
  defaults: StartOptions = {},
  /** Where its directory is made; the system's temporary directory by default. */
  under: string = tmpdir(),
): Promise<ClaimedInstallation> {
  await removeAbandoned();
  const ports = await claimPortBlock();
  // What a killed run on this block left in its addresses (its directory may be gone).
  removeNetworksIn(serviceNetwork(ports.claimed));
  const parent = mkdtempSync(join(under, `${PREFIX}${ports.claimed}-`));
  // The services' OS users must cross it to reach their clusters; an operator
  // gives the directories above the data directory this bit (README).
  chmodSync(parent, 0o711);
  const dataDir = join(parent, 'basin');
  if ((defaults.driver ?? 'local') === 'local' && !defaults.ownTemplate) seedTemplate(dataDir);
  const children = new Set<ChildProcess>();
  const runs: Launched[] = [];
  const [min, max] = ports.portRange.split('-').map(Number) as [number, number];

  const launch = (options: StartOptions = {}): Launched => {
    const driver = options.driver ?? defaults.driver ?? 'local';
    const bootstrapKey = options.bootstrapKey === undefined ? API_KEY : options.bootstrapKey;
    const env: Record<string, string> = {
      ...(bootstrapKey === null ? {} : { BASIN_BOOTSTRAP_API_KEY: bootstrapKey }),
      ...(driver === 'local' ? {} : { BASIN_DRIVER: driver }),
      ...defaults.env,
      ...options.env,
    };
    const args = [
      '--data-dir',
      dataDir,
      '--port',
      String(ports.apiPort),
      '--port-range',
      ports.portRange,
      '--service-uid-range',
      uidRange(ports.claimed),
      '--service-network',
      serviceNetwork(ports.claimed),
      // E2E_REPOSITORY_SERVERS=off runs a file with local repositories
      // (servers are the default; a caller's own flag still wins: the last
      // one given counts).
      ...(process.env.E2E_REPOSITORY_SERVERS
        ? ['--repository-servers', process.env.E2E_REPOSITORY_SERVERS]
        : []),
      ...(defaults.args ?? []),
      ...(options.args ?? []),
    ];
    const dist = options.dist ?? defaults.dist ?? REPO_DIST;
    const nodeArgs = options.nodeArgs ?? defaults.nodeArgs ?? [];
    const logPath = options.logPath ?? defaults.logPath;
    const out = logPath === undefined ? 'pipe' : openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, [...nodeArgs, join(dist, 'main.js'), ...args], {
        cwd: ROOT,
        env: { ...inheritedEnv(), ...env },
        stdio: ['ignore', out, out],
      });
    } finally {
      if (typeof out === 'number') closeSync(out);
    }
    children.add(child);
    const run = launched(child, logPath);
    runs.push(run);
    return run;
  };

  return {
    dataDir,
    apiPort: ports.apiPort,
    portRange: { min, max },
    serviceUids: (([lo, hi]) => ({ min: lo!, max: hi! }))(
      uidRange(ports.claimed).split('-').map(Number),
    ),
    serviceNetwork: serviceNetwork(ports.claimed),
    runs,
    launch,
    async start(options = {}) {
      const key =
        options.bearerKey ?? (options.bootstrapKey === undefined ? API_KEY : options.bootstrapKey);
      return answering(launch(options), `http://127.0.0.1:${ports.apiPort}/v1`, key ?? undefined);
    },
    async cli(...args) {
      try {
        const { stdout, stderr } = await runFile(
          process.execPath,
          [CLI, '--data-dir', dataDir, ...args],
          { cwd: ROOT, env: inheritedEnv() },
        );
        return { code: 0, stdout, stderr };
      } catch (err) {
        const e = err as { code?: number; stdout?: string; stderr?: string };
        if (typeof e.code !== 'number') throw err;
        return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
      }
    },
    async release(options = {}) {
      for (const child of children) await killChild(child);
      await removeInstallation(parent, options);
      await ports.release();
    },
  };
}

/**
 * Removes the installations of processes that died without cleaning up
 * (killed, or a crash): databases they left would hold ports and OS users.
 * A directory is named after its port block, and a block that can be
 * claimed has no living owner. (Also scripts/test.mjs, after it killed a
 * file past its deadline.)
 */
export async function removeAbandoned(): Promise<void> {
  for (const name of readdirSync(tmpdir())) {
    const m = new RegExp(`^${PREFIX}(\\d+)-`).exec(name);
    const block = m ? await claimBlock(Number(m[1])) : undefined;
    if (!block) continue;
    try {
      await removeInstallation(join(tmpdir(), name));
    } finally {
      await block.release();
    }
  }
}

/** Kills what runs under `<parent>/basin`, removes its services' OS users, then `parent`. */
async function removeInstallation(parent: string, options: LeftoverOptions = {}): Promise<void> {
  const dataDir = join(parent, 'basin');
  if (existsSync(dataDir)) await removeInstallationLeftovers(dataDir, options);
  rmSync(parent, { recursive: true, force: true });
}

/** The environment without BASIN_*: a developer's exported settings must not change a run. */
function inheritedEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BASIN_')));
}

function launched(child: ChildProcess, logPath: string | undefined): Launched {
  let out = '';
  const collect = (chunk: Buffer) => {
    out += chunk.toString('utf8');
    // Bounded, though a whole test file's output (two lines a request at `info`) fits.
    if (out.length > 32_000_000) out = out.slice(-16_000_000);
    if (process.env.E2E_BASIN_OUTPUT) process.stderr.write(chunk);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const output = () => {
    if (logPath === undefined) return out;
    try {
      return readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  return {
    pid: child.pid as number,
    output,
    // The last lines but the access log's successful GETs: a test polling a
    // status every 50 ms would fill the tail with its own requests.
    tail: () =>
      output()
        .trimEnd()
        .split('\n')
        .filter((l) => !/"method":"GET".*"status":2\d\d.*"msg":"request"/.test(l))
        .slice(-TAIL_LINES)
        .join('\n'),
    exited: exitOf(child),
    signal(name) {
      if (child.exitCode === null && child.signalCode === null) child.kill(name);
    },
    kill: () => killChild(child),
  };
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
    } else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

async function killChild(child: ChildProcess): Promise<void> {
  const exited = exitOf(child);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await exited;
}

/**
 * The service uids of the installation on the port block `claimed`. Every
 * installation keeps its own high-water mark, so installations running side
 * by side (test files, benchmarks, other checkouts) must not share a range:
 * one would give out a uid the other just deleted. The claim that keeps
 * ports apart keeps these apart too; test/local/helpers.ts testUids() lies
 * above them.
 */
function uidRange(claimed: number): string {
  const min = 3_000_000 + (claimed - 20_000) * 250;
  return `${min}-${min + 9_999}`;
}

/**
 * The services' addresses of the installation on the port block `claimed`:
 * a /24 of Basin's default block of its own (two installations may not
 * share addresses: the second would refuse to start), kept apart by the
 * same claim.
 */
export function serviceNetwork(claimed: number): string {
  const i = (claimed - 20_000) / 40;
  return `198.${18 + Math.floor(i / 256)}.${i % 256}.0/24`;
}
