// Basin as shipped, for the end-to-end tests: `node dist/main.js`, the very
// program `npm start` runs, as a child process configured only by flags and
// environment, on a data directory it creates itself, with the default
// (local) driver unless a test asks for another. Everything goes through its
// HTTP API; nothing reaches into its store. Basin leaves its databases
// running when it exits (on purpose), so the cleanup kills what is left under
// the data directory and removes the OS users, network namespaces, veths
// and nftables table the local driver made.
//
// `installation(t)` gives a test file a data directory and a block of ports;
// `start()` runs Basin on them, as often as the test needs (restarts, kill -9);
// basin-api.ts is how a test then talks to it.

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { API_KEY } from '../helpers.js';
import { removeNetworksIn } from '../../src/drivers/local/network/remove-installation.js';
import { cleanUpDataDir } from '../local/helpers.js';
import { answering, type BasinProcess } from './basin-api.js';
import type { Launched } from './launched.js';
import { claimBlock, claimPortBlock } from './port-block.js';

const runFile = promisify(execFile);

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MAIN = join(ROOT, 'dist/main.js');
const CLI = join(ROOT, 'dist/cli/basin.js');
/** Lines of Basin's output quoted in failure messages. */
const TAIL_LINES = 60;

export type { Launched };

export interface StartOptions {
  /** `local` (the default, as shipped: no BASIN_DRIVER is set) or `sim`. */
  driver?: 'local' | 'sim';
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
}

export interface Installation {
  /** Basin's --data-dir; Basin creates it on its first start, as it does `.basin`. */
  readonly dataDir: string;
  readonly apiPort: number;
  /** The ports Basin gives databases (--port-range). */
  readonly portRange: { min: number; max: number };
  /** The uids Basin gives services' OS users (--service-uid-range). */
  readonly serviceUids: { min: number; max: number };
  /** Starts `node dist/main.js` on this installation; resolves once the API answers. */
  start(options?: StartOptions): Promise<BasinProcess>;
  /** Starts it and returns at once (for runs whose API never answers, or not over plain HTTP). */
  launch(options?: StartOptions): Launched;
  /** Runs the shipped CLI, `node dist/cli/basin.js --data-dir <dataDir> …args`. */
  cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

/**
 * A data directory (under a fresh 0711 parent, as a checkout usually sits)
 * and a block of ports for this test; after it, every Basin started on it is
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
  await removeAbandoned();
  const ports = await claimPortBlock();
  // What a killed test on this block left in its addresses (its directory may be gone).
  removeNetworksIn(serviceNetwork(ports.claimed));
  const parent = mkdtempSync(join(under, `basin-e2e-${ports.claimed}-`));
  // The services' OS users must cross it to reach their clusters; an operator
  // gives the directories above the data directory this bit (README).
  chmodSync(parent, 0o711);
  const dataDir = join(parent, 'basin');
  const children = new Set<ChildProcess>();
  const runs: Launched[] = [];
  // When the test (or one of its subtests) fails, Basin's last words go with it.
  let failed = false;
  t.afterEach((sub: TestContext) => {
    if (!passed(sub)) failed = true;
  });
  t.after(async () => {
    if (failed || !passed(t)) {
      for (const run of runs) console.error(`Basin (pid ${run.pid}), last lines:\n${run.tail()}\n`);
    }
    for (const child of children) await killChild(child);
    await removeInstallation(parent);
    await ports.release();
  });
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
      // (servers are the default; a test's own flag still wins: the last
      // one given counts).
      ...(process.env.E2E_REPOSITORY_SERVERS
        ? ['--repository-servers', process.env.E2E_REPOSITORY_SERVERS]
        : []),
      ...(defaults.args ?? []),
      ...(options.args ?? []),
    ];
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: ROOT,
      env: { ...inheritedEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    const run = launched(child);
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
  };
}

/** TestContext.passed (Node 20.16+; @types/node 20 does not list it yet). */
const passed = (t: TestContext) => (t as { passed?: boolean }).passed !== false;

/**
 * Removes the installations of test processes that died without cleaning up
 * (killed, or a crash): databases they left would hold ports and OS users.
 * A directory is named after its port block, and a block that can be
 * claimed has no living owner.
 */
async function removeAbandoned(): Promise<void> {
  for (const name of readdirSync(tmpdir())) {
    const m = /^basin-e2e-(\d+)-/.exec(name);
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
async function removeInstallation(parent: string): Promise<void> {
  const dataDir = join(parent, 'basin');
  if (existsSync(dataDir)) await cleanUpDataDir(dataDir);
  rmSync(parent, { recursive: true, force: true });
}

/** The test's environment without BASIN_*: a developer's exported settings must not change a test. */
function inheritedEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BASIN_')));
}

function launched(child: ChildProcess): Launched {
  let out = '';
  const collect = (chunk: Buffer) => {
    out += chunk.toString('utf8');
    // Bounded, though a whole test file's output (two lines a request at `info`) fits.
    if (out.length > 32_000_000) out = out.slice(-16_000_000);
    if (process.env.E2E_BASIN_OUTPUT) process.stderr.write(chunk);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return {
    pid: child.pid as number,
    output: () => out,
    tail: () => out.trimEnd().split('\n').slice(-TAIL_LINES).join('\n'),
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
 * The end-to-end tests run dist/: a dist/ older than src/ would test old
 * code and pass. `npm test` builds first; a single file run needs
 * `npm run build` before it.
 */
/**
 * The service uids of the installation on the port block `claimed`. Every
 * installation keeps its own high-water mark, so installations running side
 * by side (test files, other checkouts) must not share a range: one would
 * give out a uid the other just deleted. The claim that keeps ports apart
 * keeps these apart too; test/local/helpers.ts testUids() lies above them.
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
