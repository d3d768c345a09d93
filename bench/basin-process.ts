// A Basin server started the way users start it: `node dist/main.js` with
// flags and a bootstrap key in the environment, and nothing else: no
// benchmark-only switch, the default log level with its access log, the
// default rate limits. Its stdout and stderr (the JSON log lines and the
// bootstrap banner) go to a file, which the benchmarks read afterwards.
//
// BASIN_* variables of the bench's own environment are not passed on, so
// that what is measured is the default configuration plus the flags given.

import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { stopTracked, track } from './children.js';

/** The build `npm run bench` measures: this repository's dist/. */
export const REPO_DIST = fileURLToPath(new URL('../dist/', import.meta.url));

export interface BasinProcessOptions {
  /** Flags for dist/main.js (the port is chosen here). */
  flags: readonly string[];
  /** BASIN_BOOTSTRAP_API_KEY: the bearer key of the bootstrap credential. */
  apiKey: string;
  /** Where stdout and stderr go. */
  logPath: string;
  /** Another build's dist/ directory, to compare builds; REPO_DIST by default. */
  dist?: string;
  /** Flags for node itself, e.g. --cpu-prof. */
  nodeArgs?: readonly string[];
  startTimeoutMs?: number;
}

export interface ApiAnswer {
  status: number;
  text: string;
}

export class BasinProcess {
  private constructor(
    private readonly child: ChildProcess,
    /** http://127.0.0.1:<port> */
    readonly origin: string,
    readonly port: number,
    readonly logPath: string,
    private readonly apiKey: string,
    /** The bootstrapped project. */
    readonly projectId: string,
  ) {}

  get pid(): number {
    return this.child.pid as number;
  }

  /** Starts Basin and waits until it answers GET /v1/projects with the bootstrap key. */
  static async start(o: BasinProcessOptions): Promise<BasinProcess> {
    const main = `${o.dist ?? REPO_DIST}/main.js`;
    if (!existsSync(main)) throw new Error(`${main} does not exist: run npm run build first`);
    const port = await freePort();
    const env: NodeJS.ProcessEnv = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('BASIN_')),
    );
    env.BASIN_BOOTSTRAP_API_KEY = o.apiKey;
    const out = openSync(o.logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(
        process.execPath,
        [...(o.nodeArgs ?? []), main, ...o.flags, '--host', '127.0.0.1', '--port', String(port)],
        { env, stdio: ['ignore', out, out] },
      );
    } finally {
      closeSync(out);
    }
    track(child);
    const origin = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + (o.startTimeoutMs ?? 60_000);
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(
          `Basin exited (${child.signalCode ?? child.exitCode}) before it answered:\n${tail(o.logPath)}`,
        );
      }
      const res = await call(origin, o.apiKey, 'GET', '/v1/projects').catch(() => undefined);
      if (res?.status === 200) {
        const projects = JSON.parse(res.text) as { id: string }[];
        const projectId = projects[0]?.id;
        if (!projectId)
          throw new Error(`no project in ${res.text}: the data directory was not empty`);
        return new BasinProcess(child, origin, port, o.logPath, o.apiKey, projectId);
      }
      if (Date.now() > deadline) {
        await stopTracked(child);
        throw new Error(`Basin did not answer within the start timeout:\n${tail(o.logPath)}`);
      }
      await sleep(50);
    }
  }

  /** A request with the bootstrap key (or `key`). */
  call(method: string, path: string, body?: object, key = this.apiKey): Promise<ApiAnswer> {
    return call(this.origin, key, method, path, body);
  }

  /** The last lines of its output, to explain a failure. */
  logTail(lines = 30): string {
    return tail(this.logPath, lines);
  }

  /** SIGTERM, as an operator stops it; Basin drains and writes out its log. */
  stop(): Promise<void> {
    return stopTracked(this.child, 30_000);
  }
}

async function call(
  origin: string,
  key: string,
  method: string,
  path: string,
  body?: object,
): Promise<ApiAnswer> {
  const res = await fetch(origin + path, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      accept: 'application/json',
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, text: await res.text() };
}

function tail(path: string, lines = 30): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}

/** A port nothing listens on right now (the system's choice). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
