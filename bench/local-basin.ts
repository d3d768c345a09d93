// Shared by the local-driver benchmarks (local-create, local-idle-memory,
// fork-now, fork-pitr, backup-write, …): a Basin with the local driver, an
// installation of the harness the end-to-end tests use (installations.ts:
// `node dist/main.js --driver local …` on ports, uids and addresses of its
// own), called through `basin/client` (src/client/), the typed client users
// get, and released with the harness's clean-up of what it left on the host.

import { dirname, join } from 'node:path';
import { readFileSync, realpathSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BasinError,
  type BasinClient,
  createBasinClient,
  type Service,
  type ServiceCreateInput,
} from '../src/client/index.js';
import { servicePgdata, templatePgdata } from '../test/harness/clean-up.js';
import type { BenchContext } from './bench-context.js';
import {
  type BasinProcess,
  claimBenchInstallation,
  type ClaimedInstallation,
  releaseBenchInstallation,
} from './installations.js';

/** The installations claimed by claimDataDir, by their data directory. */
const installations = new Map<string, ClaimedInstallation>();

/**
 * A fresh installation for LocalBasin.start: its data directory (Basin
 * creates it on its first start), cleaned up by `releaseDataDir` (or on the
 * way out).
 */
export async function claimDataDir(ctx: BenchContext): Promise<string> {
  const inst = await claimBenchInstallation(ctx);
  installations.set(inst.dataDir, inst);
  return inst.dataDir;
}

/** The installation claimed as `dir` (claimDataDir): to start more processes on it. */
export function installationOf(dir: string): ClaimedInstallation {
  const inst = installations.get(dir);
  if (!inst) throw new Error(`${dir} was not claimed with claimDataDir`);
  return inst;
}

/** Stops what still runs of `dir`'s Basin, removes the directory and what its services left. */
export async function releaseDataDir(dir: string): Promise<void> {
  const inst = installations.get(dir);
  installations.delete(dir);
  if (inst) await releaseBenchInstallation(inst);
}

export type ServiceBody = Pick<ServiceCreateInput, 'name' | 'addons'> & {
  cpu_millis?: string;
  memory_gbs?: string;
};

/** The actions a benchmark takes on a service (POST /services/{id}/<action>). */
type Action = 'enablePooler' | 'disablePooler' | 'setHA' | 'stop' | 'start';

/** A Basin with the local driver, and its API. */
export class LocalBasin {
  private constructor(
    readonly process: BasinProcess,
    /** The typed API client, with the bootstrap key. */
    readonly client: BasinClient,
    /** Basin's data directory, as /proc reports paths (symlinks resolved). */
    readonly dataDir: string,
  ) {}

  /**
   * Starts Basin on the installation claimed as `dataDir` (claimDataDir) and
   * waits until it answers; its template cluster is still being built in
   * the background then.
   */
  static async start(
    dataDir: string,
    logPath: string,
    nodeArgs: readonly string[] = [],
    /** More flags, e.g. --backup-schedule. */
    flags: readonly string[] = [],
  ): Promise<LocalBasin> {
    const inst = installations.get(dataDir);
    if (!inst) throw new Error(`${dataDir} was not claimed with claimDataDir`);
    if (realpathSync(dirname(dataDir)) !== dirname(dataDir)) {
      throw new Error(`${dataDir} is not under a real path`);
    }
    const basin = await inst.start({
      args: ['--reconcile-interval-ms', '1000', ...flags],
      bootstrapKey: `bench-${Math.random().toString(36).slice(2)}-0123456789`,
      logPath,
      nodeArgs,
    });
    return new LocalBasin(
      basin,
      createBasinClient({ url: basin.url, apiKey: basin.bearerKey }),
      dataDir,
    );
  }

  /** Another process of the same installation (several Basins on one store), with the same key. */
  static of(process: BasinProcess, dataDir: string): LocalBasin {
    return new LocalBasin(
      process,
      createBasinClient({ url: process.url, apiKey: process.bearerKey }),
      dataDir,
    );
  }

  private ref(id: string) {
    return { params: { path: { project_id: this.process.projectId, service_id: id } } };
  }

  /** POST /services; returns the new service's id. */
  async create(body: ServiceBody): Promise<string> {
    return (await this.createService(body)).id;
  }

  /** POST /services; the new service's id and initial password. */
  async createService(body: ServiceBody): Promise<{ id: string; password: string }> {
    const v = await this.client.POST('/v1/projects/{project_id}/services', {
      params: { path: { project_id: this.process.projectId } },
      body: body as ServiceCreateInput,
    });
    return { id: idOf(v), password: v.initial_password ?? '' };
  }

  /** POST /services/{id}/forkService; the fork's id and initial password. */
  async fork(parentId: string, body: object): Promise<{ id: string; password: string }> {
    const v = await this.client.POST(
      '/v1/projects/{project_id}/services/{service_id}/forkService',
      {
        ...this.ref(parentId),
        body: body as never,
      },
    );
    return { id: idOf(v), password: v.initial_password ?? '' };
  }

  /**
   * Any request under the project's /services, answered as it is (status and
   * text), for what a benchmark reads of a refusal: the harness's raw request.
   */
  async request(method: string, path: string, body?: object) {
    const res = await this.process.call(method, this.process.servicePath() + path, body);
    return { status: res.status, text: res.text };
  }

  /** POST /services; the new service's id, password and endpoint port. */
  async createWithPassword(
    body: ServiceBody & { replica_count?: number },
  ): Promise<{ id: string; password: string; port: number }> {
    const v = await this.client.POST('/v1/projects/{project_id}/services', {
      params: { path: { project_id: this.process.projectId } },
      body: body as ServiceCreateInput,
    });
    return { id: idOf(v), password: v.initial_password ?? '', port: v.endpoint?.port ?? 0 };
  }

  /** POST /services/{id}/<action>, with a JSON body or none (enablePooler, setHA, stop…); fails unless 2xx. */
  async act(id: string, action: Action, body?: object): Promise<void> {
    await this.client.POST(`/v1/projects/{project_id}/services/{service_id}/${action}`, {
      ...this.ref(id),
      body: body as never,
    });
  }

  /** POST /services/{id}/replicaSets; its id and endpoint port. */
  async createReplicaSet(
    serviceId: string,
    body: { name: string; nodes: number; cpu_millis: number; memory_gbs: number },
  ): Promise<{ id: string; port: number }> {
    const v = await this.client.POST(
      '/v1/projects/{project_id}/services/{service_id}/replicaSets',
      { ...this.ref(serviceId), body: body as never },
    );
    if (v.id === undefined) throw new Error(`no id in ${JSON.stringify(v)}`);
    return { id: v.id, port: v.endpoint?.port ?? 0 };
  }

  /** The status of a service's replica set; undefined once it is gone. */
  async replicaSetStatus(serviceId: string, id: string): Promise<string | undefined> {
    const sets = await this.client.GET(
      '/v1/projects/{project_id}/services/{service_id}/replicaSets',
      this.ref(serviceId),
    );
    return sets.find((r) => r.id === id)?.status;
  }

  /** GET /services/{id}; undefined once it is gone (404). */
  async get(id: string): Promise<Service | undefined> {
    try {
      return await this.client.GET('/v1/projects/{project_id}/services/{service_id}', this.ref(id));
    } catch (err) {
      if (err instanceof BasinError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** Polls GET every `pollMs` until the service is READY; fails on UNSTABLE (a failed create) or a timeout. */
  async waitReady(
    id: string,
    pollMs: number,
    timeoutMs: number,
    /** Called before each GET: to watch the service's files meanwhile. */
    onPoll?: () => void,
  ): Promise<Service> {
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
    try {
      await this.client.DELETE('/v1/projects/{project_id}/services/{service_id}', this.ref(id));
    } catch (err) {
      if (!(err instanceof BasinError && err.status === 404)) throw err;
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
    return servicePgdata(this.dataDir, serviceId);
  }

  get templatePgdata(): string {
    return templatePgdata(this.dataDir);
  }

  /** Why a wait failed: what Basin logged last (the engine logs its failures). */
  private pendingWork(): string {
    return `; Basin's last log lines:\n${this.process.tail()}`;
  }

  /** Stops Basin with SIGTERM (its clusters are left to releaseDataDir). */
  async stop(): Promise<void> {
    await this.process.stop(30_000);
  }
}

function idOf(v: Service): string {
  if (v.service_id === undefined) throw new Error(`no service_id in ${JSON.stringify(v)}`);
  return v.service_id;
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
