// Shared by the local-driver benchmarks (local-create, local-idle-memory): a
// Basin with the local driver in a child process (local-server.ts), a small
// API client for it, and the clean-up of the PostgreSQL clusters it starts.
//
// Basin's clusters are detached from Basin on purpose (databases outlive the
// API server), so stopping the Basin child does not stop them: every process
// whose working directory lies under a benchmark's data directory (PostgreSQL
// chdirs into its pgdata, and its children inherit it) is stopped here, on
// success, on error, on Ctrl-C and, as a last resort, on exit.

import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readlinkSync, readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { type Child, startChild } from './children.js';
import type { BenchContext } from './run.js';

/** Data directories of running benchmarks; their processes are stopped on the way out. */
const roots = new Set<string>();
let handlersInstalled = false;

/** Pids of live processes (not zombies) working in `root` or below. */
export function processesUnder(root: string): number[] {
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
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      if (cwd !== root && !cwd.startsWith(root + '/')) continue;
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      if (state !== 'Z' && state !== 'X') pids.push(Number(name));
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
 * Stops every process under `root`: SIGQUIT (PostgreSQL's immediate shutdown,
 * which still removes its shared memory), then SIGKILL after `graceMs`.
 */
export async function stopProcessesUnder(root: string, graceMs = 3_000): Promise<void> {
  let pids = processesUnder(root);
  if (pids.length === 0) return;
  signal(pids, 'SIGQUIT');
  const deadline = Date.now() + graceMs;
  while ((pids = processesUnder(root)).length > 0 && Date.now() < deadline) await sleep(20);
  if (pids.length === 0) return;
  signal(pids, 'SIGKILL');
  const killDeadline = Date.now() + 2_000;
  while (processesUnder(root).length > 0 && Date.now() < killDeadline) await sleep(20);
}

/** The same, blocking: for signal and exit handlers, which cannot wait for a promise. */
function stopProcessesUnderSync(root: string, graceMs: number): void {
  let pids = processesUnder(root);
  if (pids.length === 0) return;
  signal(pids, 'SIGQUIT');
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + graceMs;
  while ((pids = processesUnder(root)).length > 0 && Date.now() < deadline) {
    Atomics.wait(pause, 0, 0, 20);
  }
  signal(pids, 'SIGKILL');
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // run.ts stops the children and removes the run's directory on SIGINT and
  // SIGTERM; the clusters go first, so that nothing writes into it meanwhile.
  const onSignal = () => {
    for (const root of roots) stopProcessesUnderSync(root, 2_000);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', () => {
    for (const root of roots) stopProcessesUnderSync(root, 0);
  });
}

/**
 * A fresh data directory under the run's directory, watched for leftover
 * processes until `release`d. PostgreSQL runs as an unprivileged user, which
 * must be able to cross the directories above it: the run's directory gets
 * the search bit (not read) for others.
 */
export function claimDataDir(ctx: BenchContext, prefix: string): string {
  installHandlers();
  chmodSync(ctx.tmpDir, 0o711);
  const dir = mkdtempSync(join(ctx.tmpDir, prefix));
  chmodSync(dir, 0o711);
  roots.add(dir);
  return dir;
}

/** Stops what still runs under `dir`, removes it and stops watching it. */
export async function releaseDataDir(dir: string): Promise<void> {
  await stopProcessesUnder(dir);
  rmSync(dir, { recursive: true, force: true });
  roots.delete(dir);
}

export interface ServiceBody {
  name: string;
  cpu_millis?: string;
  memory_gbs?: string;
  addons?: string[];
}

export interface ServiceView {
  service_id: string;
  status: string;
  metrics?: { memory_mb?: number; milli_cpu?: number; storage_mb?: number };
}

/** A Basin with the local driver in a child process, and its API. */
export class LocalBasin {
  private constructor(
    readonly child: Child,
    /** Basin's data directory, as /proc reports paths (symlinks resolved). */
    readonly dataDir: string,
    private readonly base: string,
    private readonly projectId: string,
    private readonly apiKey: string,
  ) {}

  /** Starts Basin on `dataDir` (fresh) and waits until it listens. */
  static async start(dataDir: string, nodeArgs: readonly string[] = []): Promise<LocalBasin> {
    const apiKey = `bench-${randomBytes(12).toString('hex')}`;
    // A block of database ports of its own, away from the tests' blocks
    // (20000 + n * 100, below 60000) and below the ephemeral ports (32768+).
    const start = 17000 + (process.pid % 100) * 100;
    const child = startChild(
      './local-server.js',
      {
        BENCH_DATA_DIR: dataDir,
        BENCH_API_KEY: apiKey,
        BENCH_PORT_RANGE: `${start}-${start + 99}`,
      },
      nodeArgs,
    );
    try {
      const ready = await child.message<{ port: number; projectId: string; dataDir: string }>(
        'ready',
        60_000,
      );
      if (ready.dataDir !== dataDir) roots.add(ready.dataDir);
      return new LocalBasin(
        child,
        ready.dataDir,
        `http://127.0.0.1:${ready.port}/v1/projects/${ready.projectId}/services`,
        ready.projectId,
        apiKey,
      );
    } catch (err) {
      await child.stop();
      throw err;
    }
  }

  private async call(method: string, path: string, body?: object) {
    const res = await fetch(this.base + path, {
      method,
      headers: {
        authorization: `Bearer ${this.apiKey}`,
        accept: 'application/json',
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, text };
  }

  /** POST /services; returns the new service's id. */
  async create(body: ServiceBody): Promise<string> {
    const res = await this.call('POST', '', body);
    if (res.status !== 202) throw new Error(`POST /services answered ${res.status}: ${res.text}`);
    return (JSON.parse(res.text) as ServiceView).service_id;
  }

  /** GET /services/{id}; undefined once it is gone (404). */
  async get(id: string): Promise<ServiceView | undefined> {
    const res = await this.call('GET', `/${id}`);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new Error(`GET /services/${id} answered ${res.status}`);
    return JSON.parse(res.text) as ServiceView;
  }

  /** Polls GET every `pollMs` until the service is READY; fails on FAILED or a timeout. */
  async waitReady(id: string, pollMs: number, timeoutMs: number): Promise<ServiceView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const svc = await this.get(id);
      if (svc?.status === 'READY') return svc;
      if (svc === undefined || svc.status === 'FAILED' || Date.now() > deadline) {
        throw new Error(
          `service ${id} is ${svc?.status ?? 'gone'}, not READY, after ${timeoutMs} ms` +
            (await this.pendingWork()),
        );
      }
      await sleep(pollMs);
    }
  }

  /** DELETE /services/{id} and wait until GET answers 404. */
  async deleteAndWait(id: string, timeoutMs = 30_000): Promise<void> {
    const res = await this.call('DELETE', `/${id}`);
    if (res.status !== 202 && res.status !== 404) {
      throw new Error(`DELETE /services/${id} answered ${res.status}: ${res.text}`);
    }
    const deadline = Date.now() + timeoutMs;
    while ((await this.get(id)) !== undefined) {
      if (Date.now() > deadline) throw new Error(`service ${id} still exists after ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  /** The pgdata of a service's primary (see src/drivers/local/layout.ts). */
  pgdata(serviceId: string): string {
    return join(this.dataDir, 'local', 'instances', serviceId, '0', 'pgdata');
  }

  get templatePgdata(): string {
    return join(this.dataDir, 'local', 'template', 'pgdata');
  }

  /** Why a wait failed: the child's view of pending operations, if it answers. */
  private async pendingWork(): Promise<string> {
    try {
      this.child.send({ type: 'pending?' });
      const m = await this.child.message<{ pending: unknown }>('pending', 2_000);
      return `; pending operations: ${JSON.stringify(m.pending)}`;
    } catch {
      return '';
    }
  }

  /** Stops Basin (its clusters are left to releaseDataDir). */
  stop(): Promise<void> {
    return this.child.stop();
  }

  /** The project the bootstrap key belongs to. */
  get project(): string {
    return this.projectId;
  }
}

/** Reads postmaster.pid: the postmaster's pid (line 1) and status (line 8). */
export function postmasterPid(pgdata: string): { pid: number; status: string } | undefined {
  try {
    const lines = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n');
    const pid = Number(lines[0]);
    return Number.isInteger(pid) && pid > 0 ? { pid, status: (lines[7] ?? '').trim() } : undefined;
  } catch {
    return undefined;
  }
}
