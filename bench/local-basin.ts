// Shared by the local-driver benchmarks (local-create, local-idle-memory,
// fork-now, fork-pitr, backup-write): a
// Basin with the local driver, started as users start it (basin-process.ts:
// `node dist/main.js --driver local …`), a small API client for it, and the
// clean-up of what that Basin leaves on the host.
//
// Basin's clusters are detached from Basin on purpose (databases outlive the
// API server), so stopping the Basin child does not stop them; and when Basin
// runs as root, each service runs as an OS user of its own that only the
// service's deletion removes. So after a benchmark, and on error, Ctrl-C and
// (as a last resort) exit, every process whose working directory lies under
// its data directory (PostgreSQL chdirs into its pgdata; its children inherit
// it) or that runs as one of the installation's service users is stopped,
// the directory is removed, and the users are deleted.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { removeLeftBackupCgroups } from '../src/drivers/local/host/cgroups/backup-cgroup.js';
import { removeInstallationCgroups } from '../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import { Layout } from '../src/drivers/local/layout.js';
import {
  removeInstallationNetwork,
  removeNetworksIn,
} from '../src/drivers/local/network/remove-installation.js';
import { groupExists, readPasswd, type PasswdEntry } from '../src/drivers/local/host/os-user.js';
import { installationUsers } from '../src/drivers/local/host/service-users.js';
import { BasinProcess } from './basin-process.js';
import type { BenchContext } from './bench-context.js';

/** Data directories of running benchmarks: cleaned up on the way out. */
const roots = new Set<string>();
let handlersInstalled = false;

/** The OS users the local driver made for the services of `dataDir` (none when not root). */
function serviceUsersOf(dataDir: string): PasswdEntry[] {
  const tag = installationOf(dataDir);
  return tag === undefined ? [] : installationUsers(tag);
}

function installationOf(dataDir: string): string | undefined {
  try {
    const tag = readFileSync(new Layout(dataDir).installationFile, 'utf8').trim();
    return tag === '' ? undefined : tag;
  } catch {
    return undefined;
  }
}

/** Live processes (not zombies) working in `root` or below, or running as one of `uids`. */
export function processesUnder(root: string, uids: ReadonlySet<number> = new Set()): number[] {
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
      if (uids.has(uid)) {
        pids.push(Number(name));
        continue;
      }
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      if (cwd === root || cwd.startsWith(root + '/')) pids.push(Number(name));
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
 * Stops every process of `root` (see processesUnder), one look at a time:
 * SIGQUIT first (PostgreSQL's immediate shutdown, which still removes its
 * shared memory), SIGKILL from `graceMs` on; gives up 2 s later.
 */
class Stopper {
  private readonly since = Date.now();
  private quitSent = false;

  constructor(
    private readonly root: string,
    private readonly uids: ReadonlySet<number>,
    private readonly graceMs: number,
  ) {}

  /** Signals what is left; false when nothing is (or it is time to give up). */
  step(): boolean {
    const pids = processesUnder(this.root, this.uids);
    const elapsed = Date.now() - this.since;
    if (pids.length === 0 || elapsed > this.graceMs + 2_000) return false;
    if (elapsed >= this.graceMs) signal(pids, 'SIGKILL');
    else if (!this.quitSent) signal(pids, 'SIGQUIT');
    this.quitSent = true;
    return true;
  }
}

/** Stops the processes of `root` alone (the Basin child's own clean-up). */
export async function stopProcessesUnder(root: string, graceMs = 3_000): Promise<void> {
  const stopper = new Stopper(root, new Set(), graceMs);
  while (stopper.step()) await sleep(20);
}

/**
 * Deletes the service users (their processes are gone; -f: zombies do not
 * keep them), retrying while another useradd/userdel holds the lock of the
 * password files, as the driver does.
 */
function deleteUsers(users: readonly PasswdEntry[]): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
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
            Atomics.wait(pause, 0, 0, 25 + Math.floor(Math.random() * 50));
            continue;
          }
          if (exists()) console.error(`${cmd} ${u.name} failed: ${out}`);
          break;
        }
      }
    }
  }
}

/**
 * Everything a benchmark's Basin left: the installation tag goes first (a
 * Basin still running then makes no new service user), then the processes,
 * the directory and the users. Blocking (`Atomics.wait`) in the signal and
 * exit handlers, which cannot wait for a promise.
 */
async function cleanUp(root: string, graceMs: number, block = false): Promise<void> {
  const users = serviceUsersOf(root);
  const tag = installationOf(root);
  rmSync(new Layout(root).installationFile, { force: true });
  const stopper = new Stopper(root, new Set(users.map((u) => u.uid)), graceMs);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (stopper.step()) {
    if (block) Atomics.wait(pause, 0, 0, 20);
    else await sleep(20);
  }
  removeLeftBackupCgroups(new Layout(root).backupsDir);
  if (tag !== undefined) removeInstallationCgroups(tag);
  if (tag !== undefined) removeInstallationNetwork(tag);
  rmSync(root, { recursive: true, force: true });
  deleteUsers(users);
  roots.delete(root);
}

/** cleanUp, entirely synchronous: an async function runs synchronously up to its first await. */
function cleanUpNow(root: string, graceMs: number): void {
  cleanUp(root, graceMs, true).catch((err: unknown) =>
    console.error(`cleaning up ${root}: ${(err as Error).message}`),
  );
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // run.ts stops the children and removes the run's directory on SIGINT and
  // SIGTERM; the clusters go first, so that nothing writes into it meanwhile.
  const onSignal = () => {
    for (const root of [...roots]) cleanUpNow(root, 2_000);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', () => {
    for (const root of [...roots]) cleanUpNow(root, 0);
  });
}

/**
 * A fresh data directory under the run's directory, cleaned up by
 * `releaseDataDir` (or on the way out). PostgreSQL runs as unprivileged
 * users, who must be able to cross the directories above it: the run's
 * directory gets the search bit (not read) for others.
 */
export function claimDataDir(ctx: BenchContext, prefix: string): string {
  installHandlers();
  chmodSync(ctx.tmpDir, 0o711);
  const dir = mkdtempSync(join(ctx.tmpDir, prefix));
  chmodSync(dir, 0o711);
  roots.add(dir);
  return dir;
}

/** Stops what still runs of `dir`'s Basin, removes the directory and the service users left. */
export async function releaseDataDir(dir: string): Promise<void> {
  if (roots.has(dir) || existsSync(dir)) await cleanUp(dir, 3_000);
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
  endpoint?: { host: string; port: number };
  initial_password?: string;
  metrics?: { memory_mb?: number; milli_cpu?: number; storage_mb?: number };
  connection_pooler?: { endpoint: { host: string; port: number } };
}

/** A Basin with the local driver, and its API. */
export class LocalBasin {
  private constructor(
    readonly process: BasinProcess,
    /** Basin's data directory, as /proc reports paths (symlinks resolved). */
    readonly dataDir: string,
    private readonly base: string,
  ) {}

  /**
   * Starts Basin on `dataDir` (fresh, a real path) and waits until it
   * answers; its template cluster is still being built in the background then.
   */
  static async start(
    dataDir: string,
    logPath: string,
    nodeArgs: readonly string[] = [],
    /** More flags, e.g. --backup-schedule. */
    flags: readonly string[] = [],
  ): Promise<LocalBasin> {
    if (realpathSync(dataDir) !== dataDir) throw new Error(`${dataDir} is not a real path`);
    // A block of database ports of its own: above Basin's default range
    // (16000-16999) and below the tests' blocks (20000 + n * 100).
    const start = 17000 + (process.pid % 30) * 100;
    const block = `198.19.${200 + (process.pid % 30)}.0/24`;
    removeNetworksIn(block); // what a killed run with this pid's block left
    const basin = await BasinProcess.start({
      flags: [
        '--driver',
        'local',
        '--data-dir',
        dataDir,
        '--port-range',
        `${start}-${start + 99}`,
        // Its services' addresses: a block of its own, beside the tests' (basin-process.ts).
        '--service-network',
        block,
        '--reconcile-interval-ms',
        '1000',
        ...flags,
      ],
      apiKey: `bench-${randomBytes(12).toString('hex')}`,
      logPath,
      nodeArgs,
    });
    return new LocalBasin(basin, dataDir, `/v1/projects/${basin.projectId}/services`);
  }

  private call(method: string, path: string, body?: object) {
    return this.process.call(method, this.base + path, body);
  }

  /** POST /services; returns the new service's id. */
  async create(body: ServiceBody): Promise<string> {
    const res = await this.call('POST', '', body);
    if (res.status !== 202) throw new Error(`POST /services answered ${res.status}: ${res.text}`);
    return (JSON.parse(res.text) as ServiceView).service_id;
  }

  /** POST /services; the new service's id and initial password. */
  async createService(body: ServiceBody): Promise<{ id: string; password: string }> {
    return this.created(await this.call('POST', '', body), 'POST /services');
  }

  /** POST /services/{id}/forkService; the fork's id and initial password. */
  async fork(parentId: string, body: object): Promise<{ id: string; password: string }> {
    return this.created(
      await this.call('POST', `/${parentId}/forkService`, body),
      `POST /services/${parentId}/forkService`,
    );
  }

  /** Any request under the project's /services, answered as it is. */
  request(method: string, path: string, body?: object) {
    return this.call(method, path, body);
  }

  private created(res: { status: number; text: string }, what: string) {
    if (res.status !== 202) throw new Error(`${what} answered ${res.status}: ${res.text}`);
    const view = JSON.parse(res.text) as ServiceView;
    return { id: view.service_id, password: view.initial_password ?? '' };
  }

  /** POST /services; the new service's id, password and endpoint port. */
  async createWithPassword(
    body: ServiceBody & { replica_count?: number },
  ): Promise<{ id: string; password: string; port: number }> {
    const res = await this.call('POST', '', body);
    if (res.status !== 202) throw new Error(`POST /services answered ${res.status}: ${res.text}`);
    const v = JSON.parse(res.text) as ServiceView & {
      initial_password: string;
      endpoint: { port: number };
    };
    return { id: v.service_id, password: v.initial_password, port: v.endpoint.port };
  }

  /** POST /services/{id}/<action>, with a JSON body or none (enablePooler, setHA, stop…); fails unless 2xx. */
  async act(id: string, action: string, body?: object): Promise<void> {
    const res = await this.call('POST', `/${id}/${action}`, body);
    if (res.status < 200 || res.status > 299) {
      throw new Error(`POST /services/${id}/${action} answered ${res.status}: ${res.text}`);
    }
  }

  /** POST /services/{id}/replicaSets; its id and endpoint port. */
  async createReplicaSet(
    serviceId: string,
    body: { name: string; nodes: number; cpu_millis: number; memory_gbs: number },
  ): Promise<{ id: string; port: number }> {
    const res = await this.call('POST', `/${serviceId}/replicaSets`, body);
    if (res.status !== 202) throw new Error(`POST replicaSets answered ${res.status}: ${res.text}`);
    const v = JSON.parse(res.text) as { id: string; endpoint: { port: number } };
    return { id: v.id, port: v.endpoint.port };
  }

  /** The status of a service's replica set; undefined once it is gone. */
  async replicaSetStatus(serviceId: string, id: string): Promise<string | undefined> {
    const res = await this.call('GET', `/${serviceId}/replicaSets`);
    if (res.status !== 200) throw new Error(`GET replicaSets answered ${res.status}`);
    return (JSON.parse(res.text) as { id: string; status: string }[]).find((r) => r.id === id)
      ?.status;
  }

  /** GET /services/{id}; undefined once it is gone (404). */
  async get(id: string): Promise<ServiceView | undefined> {
    const res = await this.call('GET', `/${id}`);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new Error(`GET /services/${id} answered ${res.status}`);
    return JSON.parse(res.text) as ServiceView;
  }

  /** Polls GET every `pollMs` until the service is READY; fails on UNSTABLE (a failed create) or a timeout. */
  async waitReady(
    id: string,
    pollMs: number,
    timeoutMs: number,
    /** Called before each GET: to watch the service's files meanwhile. */
    onPoll?: () => void,
  ): Promise<ServiceView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      onPoll?.();
      const svc = await this.get(id);
      if (svc?.status === 'READY') return svc;
      if (svc === undefined || svc.status === 'UNSTABLE' || Date.now() > deadline) {
        throw new Error(
          `service ${id} is ${svc?.status ?? 'gone'}, not READY` +
            (Date.now() > deadline ? ` after ${timeoutMs} ms` : '') +
            this.pendingWork(),
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
      if (Date.now() > deadline)
        throw new Error(`service ${id} still exists after ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  /** The pgdata of a service's primary. */
  pgdata(serviceId: string): string {
    return new Layout(this.dataDir).pgdata({ id: serviceId, node: 0 });
  }

  get templatePgdata(): string {
    return new Layout(this.dataDir).templatePgdata;
  }

  /** Why a wait failed: what Basin logged last (the engine logs its failures). */
  private pendingWork(): string {
    return `; Basin's last log lines:\n${this.process.logTail(20)}`;
  }

  /** Stops Basin (its clusters are left to releaseDataDir). */
  stop(): Promise<void> {
    return this.process.stop();
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
