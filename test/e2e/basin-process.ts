// Basin as shipped, for the end-to-end tests: `node dist/main.js`, the very
// program `npm start` runs, as a child process configured only by flags and
// environment, on a data directory it creates itself, with the default
// (local) driver unless a test asks for another. Everything goes through its
// HTTP API; nothing reaches into its store. Basin leaves its databases
// running when it exits (on purpose), so the cleanup kills what is left under
// the data directory and removes the OS users the local driver made.
//
// `installation(t)` gives a test file a data directory and a block of ports;
// `start()` runs Basin on them, as often as the test needs (restarts, kill -9).

import { AssertionError } from 'node:assert';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { API_KEY } from '../helpers.js';
import { cleanUpDataDir } from '../local/helpers.js';
import { claimBlock, claimPortBlock } from './port-block.js';

const runFile = promisify(execFile);

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MAIN = join(ROOT, 'dist/main.js');
const CLI = join(ROOT, 'dist/cli/basin.js');
/** How often waits poll the API: often enough to see short states, gently enough for rate limits. */
const POLL_MS = 50;
/** How often a request answered 429 is tried again (after its Retry-After) before the 429 is returned. */
const RATE_LIMIT_RETRIES = 5;
/** Lines of Basin's output quoted in failure messages. */
const TAIL_LINES = 60;

export interface HttpResult {
  status: number;
  /** The JSON body, or undefined when there is none. */
  body: any;
  text: string;
  headers: Headers;
}

export interface RequestOptions {
  body?: unknown;
  /** Replaces the default Authorization (Bearer `bearerKey`); `null` sends none. */
  authorization?: string | null;
  headers?: Record<string, string>;
  /** false: return a 429 rather than wait its Retry-After and try again. */
  retryRateLimited?: boolean;
}

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

/** A running Basin whose API answered. */
export interface BasinProcess extends Launched {
  /** http://127.0.0.1:<port>/v1 */
  readonly url: string;
  /** The bearer key requests carry unless told otherwise. */
  readonly bearerKey: string;
  /** The project that key sees (the first one listed). */
  readonly projectId: string;
  /** The credential Basin printed when it bootstrapped an empty data directory, if it did. */
  readonly printed: { bearerKey?: string; accessKey: string; secretKey: string } | undefined;
  /** A request to `url + path`, with `bearerKey` unless told otherwise. */
  request(method: string, path: string, options?: RequestOptions): Promise<HttpResult>;
  /** The same with a JSON body, with `bearerKey`. */
  call(method: string, path: string, body?: unknown): Promise<HttpResult>;
  /** `/projects/<projectId>/services[/<id>]` */
  servicePath(id?: string): string;
  /** Polls until `fn` returns something truthy; the timeout error quotes Basin's output. */
  waitFor<T>(
    fn: () => Promise<T | undefined | false>,
    what: string | (() => string),
    timeoutMs?: number,
  ): Promise<T>;
  /** Polls GET of a service until its status is `status`; returns that body. */
  waitForStatus(serviceId: string, status: string, timeoutMs?: number): Promise<any>;
  /** Polls until GET of a service answers 404. */
  waitGone(serviceId: string, timeoutMs?: number): Promise<void>;
  /** SIGTERM, then waits for the exit (SIGKILL and an error if it takes over `timeoutMs`). */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: string | null }>;
}

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
 * deleted and the ports released. `options` are defaults for every start.
 */
export async function installation(
  t: TestContext,
  defaults: StartOptions = {},
): Promise<Installation> {
  checkBuilt();
  await removeAbandoned();
  const ports = await claimPortBlock();
  const parent = mkdtempSync(join(tmpdir(), `basin-e2e-${ports.claimed}-`));
  // The services' OS users must cross it to reach their clusters; an operator
  // gives the directories above the data directory this bit (README).
  chmodSync(parent, 0o711);
  const dataDir = join(parent, 'basin');
  const children = new Set<ChildProcess>();
  t.after(async () => {
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
      ...(defaults.args ?? []),
      ...(options.args ?? []),
    ];
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: ROOT,
      env: { ...inheritedEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    return launched(child);
  };

  return {
    dataDir,
    apiPort: ports.apiPort,
    portRange: { min, max },
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

/**
 * Waits until the API of `proc` answers at `url` to `key` (by default, the
 * bearer key Basin prints when it bootstraps), and gives the means to use it.
 */
async function answering(proc: Launched, url: string, key?: string): Promise<BasinProcess> {
  let running = true;
  void proc.exited.then(() => (running = false));
  const { tail } = proc;
  const field = (label: string) =>
    new RegExp(`^\\s*${label}:\\s+(\\S+)$`, 'm').exec(proc.output())?.[1];
  let bearerKey = key;

  const request = async (
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<HttpResult> => {
    const auth =
      options.authorization === undefined ? `Bearer ${bearerKey}` : options.authorization;
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(url + path, {
        method,
        headers: {
          ...(auth === null ? {} : { authorization: auth }),
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      });
      const text = await res.text();
      // Rate limits are the server's to set: a client waits as told and tries
      // again, as every well-behaved client does, unless the test asks for the 429.
      if (
        res.status === 429 &&
        options.retryRateLimited !== false &&
        attempt < RATE_LIMIT_RETRIES
      ) {
        const seconds = Number(res.headers.get('retry-after'));
        await new Promise((r) =>
          setTimeout(r, Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000),
        );
        continue;
      }
      const json = /\bjson\b/.test(res.headers.get('content-type') ?? '') && text !== '';
      return {
        status: res.status,
        body: json ? JSON.parse(text) : undefined,
        text,
        headers: res.headers,
      };
    }
  };

  const waitFor = async <T>(
    fn: () => Promise<T | undefined | false>,
    what: string | (() => string),
    timeoutMs = 60_000,
  ): Promise<T> => {
    const say = () => (typeof what === 'string' ? what : what());
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        const v = await fn();
        if (v) return v;
      } catch (err) {
        // A failed assertion fails now; anything else (not listening yet, a
        // password not applied yet) is polled through, and told at the end.
        if (err instanceof AssertionError) throw err;
        last = err;
      }
      if (!running) {
        throw new Error(`Basin exited while waiting for ${say()}:\n${tail()}`);
      }
      if (Date.now() > deadline) {
        const why = last ? ` (last error: ${(last as Error).message})` : '';
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${say()}${why}; Basin said:\n${tail()}`,
        );
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };

  const projects = await waitFor(
    async () => {
      bearerKey ??= field('Bearer key'); // printed before the API listens
      if (bearerKey === undefined) return undefined;
      const res = await request('GET', '/projects');
      return res.status === 200 ? (res.body as { id: string }[]) : undefined;
    },
    'the API to answer',
    60_000,
  );
  const accessKey = field('Access key');
  const secretKey = field('Secret key');

  const basin: BasinProcess = {
    ...proc,
    url,
    bearerKey: bearerKey as string,
    projectId: (projects[0] as { id: string }).id,
    printed:
      accessKey && secretKey ? { bearerKey: field('Bearer key'), accessKey, secretKey } : undefined,
    request,
    call: (method, path, body) => request(method, path, { body }),
    servicePath: (id) => `/projects/${basin.projectId}/services${id === undefined ? '' : `/${id}`}`,
    waitFor,
    async waitForStatus(serviceId, status, timeoutMs) {
      let seen = 'nothing';
      return waitFor(
        async () => {
          const res = await request('GET', basin.servicePath(serviceId));
          seen = `${res.status} ${res.body?.status ?? res.text}`;
          return res.status === 200 && res.body.status === status ? res.body : undefined;
        },
        () => `service ${serviceId} to be ${status} (last seen: ${seen})`,
        timeoutMs,
      );
    },
    async waitGone(serviceId, timeoutMs) {
      await waitFor(
        async () => (await request('GET', basin.servicePath(serviceId))).status === 404,
        `service ${serviceId} to be gone`,
        timeoutMs,
      );
    },
    async stop(timeoutMs = 40_000) {
      proc.signal('SIGTERM');
      const timer = setTimeout(() => proc.signal('SIGKILL'), timeoutMs);
      const result = await proc.exited;
      clearTimeout(timer);
      if (result.signal === 'SIGKILL') {
        throw new Error(`Basin did not stop within ${timeoutMs} ms of SIGTERM:\n${tail()}`);
      }
      return result;
    },
  };
  return basin;
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
    else if (entry.name.endsWith('.ts') && !/\.test\.ts$|^scratch-/.test(entry.name)) {
      newest = Math.max(newest, statSync(path).mtimeMs);
    }
  }
  return newest;
}
