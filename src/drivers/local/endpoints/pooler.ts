// A connection pooler: one PgBouncer (Debian's, 1.18) per service, and per
// read replica set whose pooler is enabled (replica-set-pooler.ts),
// supervised as the service's postmaster is (postmaster.ts, docs/architecture.md §9):
// - it runs as the service's (or set's) own OS user, confined like the postmaster
//   (no_new_privs, an empty bounding set, private /tmp & co.: confine.ts),
//   detached, so it outlives Basin; in memory and pids cgroups of its own
//   (node-cgroups.ts: the tenant can trace it, being its uid, so it is
//   bounded like the tenant's other processes), protected from the OOM
//   killer as the postmaster is (oom-scores.ts);
// - Basin keeps its pid in pooler.json (root's): a restarted Basin adopts the
//   PgBouncer it finds there, checked against /proc (a live pgbouncer run
//   with this service's pgbouncer.ini), instead of starting another;
// - it starts once the server accepts connections, is restarted by the
//   engine when it dies (inspectService reports the service failed), reloaded
//   (SIGHUP) when its pools, passwords or access rules change, restarted
//   when its port or certificate does, and stopped (SIGTERM, then SIGKILL)
//   when the service stops or the pooler is disabled. Its files go when it is
//   disabled, and with the service's instance directory when it is deleted.
//
// The server's own start kills every process of the service's user (what
// its tsdbadmin left running), PgBouncer with them: it is started again
// after the server, by the next step.

import { readFile, rename, stat, truncate, writeFile } from 'node:fs/promises';
import { connect, isIP } from 'node:net';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { DONE, type Progress, wait } from '../../../domain/progress.js';
import { DriverError, type ServiceSpec } from '../../driver.js';
import { postmasterCommand } from '../host/confine.js';
import { lastLines, withPrelude } from '../host/exec.js';
import { hash } from '../node/node-state.js';
import { exists, mkdirIn, removeTrees, writeRootFile } from '../node/node-files.js';
import type { OsUser } from '../host/os-user.js';
import {
  authFile,
  pgbouncerIni,
  poolerHba,
  poolSizes,
  restartPart,
  type PoolerServer,
  type PoolSizes,
  withBlocks,
} from '../config/pooler-conf.js';
import type { Blocks } from './pooler-guard.js';
import { statsSecret } from './pooler-stats.js';
import type { Layout } from '../layout.js';
import { isLive, procCmdline, signalAll } from '../host/processes.js';
import { portFree } from '../host/port-free.js';
import { spawnTenantDaemon } from '../node/postmaster.js';
import { readSmallFile } from '../host/files/safe-fs.js';
import type { Unit } from '../host/cgroups/cgroup-hierarchy.js';
import { poolerBounds } from '../host/cgroups/node-bounds.js';
import { protectedPrelude } from '../host/cgroups/oom-scores.js';
import { primaryNode } from '../primary-node.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<
  DriverContext,
  | 'cgroups'
  | 'layout'
  | 'listenAddresses'
  | 'log'
  | 'networks'
  | 'oom'
  | 'privateTmp'
  | 'publicCidrs'
  | 'spawned'
  | 'users'
>;

/** Debian's pgbouncer. */
export const PGBOUNCER = '/usr/sbin/pgbouncer';

/** How long PgBouncer gets to exit on SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 5_000;

/**
 * PgBouncer's scheduling priority, a little above its clients' servers':
 * it is one process that every pooled client's every transaction goes
 * through, so each moment it waits for a CPU behind the backends it feeds
 * (or anything else) stalls all of them. bench/README.md (local-pooler) has
 * what it changed; docs/security.md what it gives a tenant.
 */
export const POOLER_NICE = -5;

/** pooler.log is emptied beyond this (trimLog), so it never grows without bound. */
const LOG_MAX = 1024 * 1024;

/** Basin's record of the PgBouncer it started (root 0600). */
interface PoolerState {
  pid?: number;
  /** Hash of what PgBouncer reads only at start (restartPart, the certificate). */
  startedWith?: string;
  /** Hash of its files as last loaded (at start or by a reload). */
  loaded?: string;
}

/** Stops under way, by pid: when SIGTERM was sent. */
const stopping = new Map<number, number>();

/** What a pooler serves, whoever's it is. */
export interface PoolerTarget {
  /** The service's or read replica set's id: its files are layout.pooler(id). */
  id: string;
  /** How its log lines name it. */
  kind: 'serviceId' | 'replicaSetId';
  /** The pooler's own port (null: none allocated). */
  port: number | null;
  sizes: PoolSizes;
  server: PoolerServer;
  /** The data directory whose server.crt and server.key clients are shown. */
  certPgdata: string;
  /** tsdbadmin's SCRAM verifier (the service's, for a set too). */
  passwordVerifier: string;
  /** The VPC's blocks ([]: the public CIDRs), as the server admits them. */
  allowedCidrs: string[];
}

export class Pooler {
  private readonly files;

  constructor(
    private readonly ctx: Ctx,
    private readonly target: PoolerTarget,
  ) {
    this.files = ctx.layout.pooler(target.id);
  }

  /** The pid of the running PgBouncer, if one runs. */
  pid(): Promise<number | undefined> {
    return runningPid(this.files);
  }

  /**
   * The pid of the running PgBouncer, if one runs, kept in its cgroups: one
   * an older Basin started outside them is moved in. A failure is logged:
   * a bound is not its health.
   */
  async keepBounds(): Promise<number | undefined> {
    const pid = await this.pid();
    if (pid === undefined || !this.ctx.cgroups.enabled) return pid;
    try {
      await this.ensureCgroups();
      if (await this.ctx.cgroups.place(this.unit, pid)) {
        this.ctx.log.info(
          { [this.target.kind]: this.target.id, pid },
          'moved the pooler into its cgroups',
        );
      }
    } catch (err) {
      this.ctx.log.warn(
        { [this.target.kind]: this.target.id, err: (err as Error).message },
        'could not keep the connection pooler in its cgroups',
      );
    }
    return pid;
  }

  private get unit(): Unit {
    return { id: this.target.id, part: 'pooler' };
  }

  /** Its cgroups, with the bounds its clients need; their directories. */
  private ensureCgroups(): Promise<string[]> {
    return this.ctx.cgroups.ensure(
      this.unit,
      poolerBounds(this.target.sizes.maxClients, POOLER_NICE),
    );
  }

  /**
   * Empties pooler.log once it is over LOG_MAX. PgBouncer logs every failed
   * login, which any client can repeat at will, and the file is root's, in
   * Basin's data directory: it is cut whenever the service is inspected
   * (each reconcile) or applied. PgBouncer writes with O_APPEND, so it goes
   * on at the new end.
   */
  async trimLog(): Promise<void> {
    try {
      if ((await stat(this.files.log)).size > LOG_MAX) await truncate(this.files.log, 0);
    } catch {
      // No log yet.
    }
  }

  /**
   * One step of making the pooler run as the spec says; the server must
   * run and accept connections already (applyService calls it after).
   */
  async converge(user: OsUser): Promise<Progress> {
    const { ctx, target, files } = this;
    if (target.port === null) {
      throw new DriverError('The connection pooler has no port.', false);
    }
    if (ctx.listenAddresses.trim() === '') {
      throw new DriverError(
        'The connection pooler needs a network address to listen on; this driver listens on none.',
        false,
      );
    }
    await mkdirIn(files.dir, 0o711);
    await this.trimLog();
    const stats = await statsSecret(files.stats);
    const { ini, auth, hba } = this.configFiles(
      Object.keys(await readBlocks(files)),
      stats.verifier,
    );
    await writeRootFile(files.ini, ini, user);
    await writeRootFile(files.authFile, auth, user);
    await writeRootFile(files.hbaFile, hba, user);
    // The CA that signed the server's certificate, where PgBouncer's user
    // can read it (ca/ is root's alone); a public certificate.
    let ca = '';
    if ('caFile' in target.server) {
      ca = await readSmallFile(ctx.layout.caCert, { maxBytes: 64 * 1024 });
      await writeRootFile(files.caFile, ca, user);
    }
    const cert = await readSmallFile(join(target.certPgdata, 'server.crt'), {
      maxBytes: 64 * 1024,
    });
    const restartHash = hash(restartPart(ini), cert, ca);
    const loadedHash = hash(ini, auth, hba);
    const state = await this.readState();
    // Made (or resized) before it starts, so that it starts in them.
    const cgroups = await this.ensureCgroups();
    const pid = await this.pid();
    if (pid === undefined) return this.start(user, restartHash, loadedHash, cgroups);
    if (state.startedWith !== restartHash || stopping.has(pid)) {
      return this.stopStep(
        pid,
        'restarting the connection pooler to apply its new port or certificate',
      );
    }
    const spawned = ctx.spawned.get(files.dir);
    if (spawned?.proc.pid === pid && !spawned.sawReady) {
      if (!(await this.accepts(target.port))) {
        return wait(20, 'waiting for the connection pooler to accept connections');
      }
      spawned.sawReady = true;
    }
    if (state.loaded !== loadedHash) {
      // PgBouncer re-reads its ini, auth_file and hba file on SIGHUP.
      signalAll([pid], 'SIGHUP');
      await this.writeState({ ...state, loaded: loadedHash });
    }
    return DONE;
  }

  /** One step of stopping the pooler; its files go too when `removeFiles` (the pooler is disabled). */
  async stop(removeFiles: boolean): Promise<Progress> {
    const { ctx, files } = this;
    const pid = await this.pid();
    if (pid !== undefined) return this.stopStep(pid, 'stopping the connection pooler');
    const spawned = ctx.spawned.get(files.dir);
    if (spawned && !spawned.proc.exit) {
      signalAll([spawned.proc.pid], 'SIGKILL');
      return wait(50, 'stopping the connection pooler');
    }
    ctx.spawned.delete(files.dir);
    if (removeFiles) {
      if (!(await ctx.cgroups.remove(this.unit))) return wait(50, 'stopping the connection pooler');
      if (await exists(files.dir)) await removeTrees([files.dir]);
    }
    return DONE;
  }

  private configFiles(
    blocked: readonly string[],
    statsVerifier: string,
  ): { ini: string; auth: string; hba: string } {
    const { ctx, target } = this;
    try {
      return {
        ini: pgbouncerIni(
          { port: target.port, sizes: target.sizes, server: target.server },
          {
            authFile: this.files.authFile,
            hbaFile: this.files.hbaFile,
            certFile: join(target.certPgdata, 'server.crt'),
            keyFile: join(target.certPgdata, 'server.key'),
          },
          ctx.networks.listenAddresses(target.id, ctx.listenAddresses),
        ),
        auth: authFile(target.passwordVerifier, statsVerifier),
        hba: poolerHba(target, ctx.publicCidrs, blocked, true),
      };
    } catch (err) {
      throw new DriverError(`Invalid pooler configuration: ${(err as Error).message}`, false);
    }
  }

  /**
   * Starts PgBouncer. One this process started that exited before it ever
   * accepted connections failed: its output says why, as a retryable error.
   */
  private async start(
    user: OsUser,
    restartHash: string,
    loadedHash: string,
    cgroups: string[],
  ): Promise<Progress> {
    const { ctx, target, files } = this;
    const last = ctx.spawned.get(files.dir);
    if (last && !last.proc.exit) return wait(20, 'starting the connection pooler');
    ctx.spawned.delete(files.dir);
    if (last?.proc.exit && !last.sawReady) {
      const { code, signal } = last.proc.exit;
      const out = await readFile(files.log, 'utf8').catch(() => '');
      const why = lastLines(
        out
          .split('\n')
          .filter((l) => /(FATAL|ERROR)/.test(l))
          .join('\n'),
        3,
      );
      throw new DriverError(
        `The connection pooler did not start (exit ${code ?? signal}): ${why || 'no output'}`,
        true,
      );
    }
    const port = target.port as number;
    if (!(await portFree(ctx.networks, target.id, port))) {
      throw new DriverError(
        `Port ${port} of the connection pooler is in use by another process.`,
        true,
      );
    }
    await this.trimLog();
    const spawned = spawnTenantDaemon(
      withPrelude(
        protectedPrelude(ctx.oom, cgroups),
        postmasterCommand(user, PGBOUNCER, [files.ini], ctx.privateTmp),
      ),
      files.dir,
      files.log,
    );
    ctx.spawned.set(files.dir, { proc: spawned, sawReady: false });
    const pid = spawned.pid;
    await this.writeState({ pid, startedWith: restartHash, loaded: loadedHash });
    await favour(pid);
    ctx.log.info(
      { [target.kind]: target.id, pid, osUser: user.name, port },
      'starting the connection pooler',
    );
    return wait(20, 'starting the connection pooler');
  }

  private async stopStep(pid: number, why: string): Promise<Progress> {
    const since = stopping.get(pid);
    const now = Date.now();
    if (since === undefined) {
      signalAll([pid], 'SIGTERM');
      stopping.set(pid, now);
      this.ctx.log.info({ [this.target.kind]: this.target.id, pid }, why);
    } else if (now - since > STOP_TIMEOUT_MS) {
      signalAll([pid], 'SIGKILL');
    }
    if (!(await isLive(pid))) stopping.delete(pid);
    return wait(50, why);
  }

  /** Whether PgBouncer accepts TCP connections on its port (in its namespace, where it has one). */
  private accepts(port: number): Promise<boolean> {
    const host = poolerHost(this.ctx, this.target.id);
    return new Promise((resolve) => {
      const socket = connect({ host, port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
  }

  private readState(): Promise<PoolerState> {
    return readState(this.files);
  }

  private writeState(state: PoolerState): Promise<void> {
    return writeState(this.files, state);
  }
}

type PoolerFiles = ReturnType<Layout['pooler']>;

/**
 * Where Basin reaches pooler `id` from the host: its namespace's address,
 * where it has one, else the first listen address (loopback for a wildcard).
 */
export function poolerHost(ctx: Pick<Ctx, 'listenAddresses' | 'networks'>, id: string): string {
  const first = ctx.listenAddresses.split(',')[0]?.trim() ?? '*';
  return (
    ctx.networks.get(id)?.address ??
    (first === '*' || first === '0.0.0.0' ? '127.0.0.1' : first === '::' ? '::1' : first)
  );
}

/** The pid of the PgBouncer running with these files, if one runs. */
async function runningPid(files: PoolerFiles): Promise<number | undefined> {
  const { pid } = await readState(files);
  return pid !== undefined && (await isOurs(files, pid)) ? pid : undefined;
}

/** Whether `pid` is a live PgBouncer run with this pooler's pgbouncer.ini. */
async function isOurs(files: PoolerFiles, pid: number): Promise<boolean> {
  if (!(await isLive(pid))) {
    stopping.delete(pid);
    return false;
  }
  const argv = await procCmdline(pid);
  return /(^|\/)pgbouncer$/.test(argv[0] ?? '') && argv.at(-1) === files.ini;
}

async function readState(files: PoolerFiles): Promise<PoolerState> {
  try {
    const raw = JSON.parse(await readFile(files.state, 'utf8')) as PoolerState;
    return {
      ...(Number.isInteger(raw.pid) ? { pid: raw.pid } : {}),
      ...(typeof raw.startedWith === 'string' ? { startedWith: raw.startedWith } : {}),
      ...(typeof raw.loaded === 'string' ? { loaded: raw.loaded } : {}),
    };
  } catch {
    return {};
  }
}

async function writeState(files: PoolerFiles, state: PoolerState): Promise<void> {
  const tmp = `${files.state}.tmp`;
  await writeFile(tmp, JSON.stringify(state), { mode: 0o600 });
  await rename(tmp, files.state);
}

/** The addresses a pooler refuses, and until when (root's blocked.json); expired ones are left out. */
export async function readBlocks(files: PoolerFiles, now = Date.now()): Promise<Blocks> {
  try {
    const raw = JSON.parse(await readFile(files.blocked, 'utf8')) as unknown;
    const out: Blocks = {};
    if (raw && typeof raw === 'object') {
      for (const [addr, until] of Object.entries(raw)) {
        if (typeof until === 'number' && until > now && isIP(addr) !== 0) out[addr] = until;
      }
    }
    return out;
  } catch {
    return {};
  }
}

/**
 * Makes the pooler of `id` refuse the addresses of `blocks` (and no
 * others): blocked.json first, so a converge renders the same, then the
 * `reject` lines of its hba file, leaving its other lines as the last
 * converge wrote them, and a reload of the running PgBouncer. Called with
 * the pooler's lock held (the id's: converges write the same files).
 */
export async function applyBlocks(ctx: Ctx, id: string, blocks: Blocks): Promise<void> {
  const files = ctx.layout.pooler(id);
  if (!(await exists(files.dir))) return; // disabled or deleted meanwhile
  const tmp = `${files.blocked}.tmp`;
  await writeFile(tmp, JSON.stringify(blocks), { mode: 0o600 });
  await rename(tmp, files.blocked);
  let hba: string;
  try {
    hba = await readFile(files.hbaFile, 'utf8');
  } catch {
    return; // never converged: its first converge renders the blocks
  }
  const next = withBlocks(hba, Object.keys(blocks));
  if (next === hba) return;
  await writeRootFile(files.hbaFile, next, await ctx.users.ensure(id));
  const pid = await runningPid(files);
  if (pid === undefined) return;
  signalAll([pid], 'SIGHUP');
  // What it loaded now: the files on disk, as a converge hashes them.
  const state = await readState(files);
  const [ini, auth] = await Promise.all([
    readFile(files.ini, 'utf8').catch(() => ''),
    readFile(files.authFile, 'utf8').catch(() => ''),
  ]);
  await writeState(files, { ...state, loaded: hash(ini, auth, next) });
}

/**
 * Gives the just spawned PgBouncer POOLER_NICE: its session's autogroup
 * (it was spawned detached, so the session is its alone), which is what
 * the kernel weighs against other sessions where autogroups are on, and
 * the process itself, which is what counts where they are off or inside a
 * CPU cgroup. Only root may raise a priority; without it, or without
 * autogroups, PgBouncer runs at the default one.
 */
async function favour(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/autogroup`, String(POOLER_NICE)).catch(() => {});
  try {
    setPriority(pid, POOLER_NICE);
  } catch {
    // Not root: the default priority.
  }
}

/**
 * A service's pooler. It reaches the recorded primary (node 0 until a
 * failover) on its own socket and port, so that the apply after a failover
 * re-points the pooler (a reload) at the new primary; it shows the
 * primary's certificate.
 */
export class ServicePooler extends Pooler {
  constructor(ctx: Ctx, spec: ServiceSpec) {
    const node = primaryNode(spec);
    const ref = { id: spec.serviceId, node: node.index };
    super(ctx, {
      id: spec.serviceId,
      kind: 'serviceId',
      port: spec.pooler.port,
      sizes: poolSizes(spec),
      server: { socketDir: ctx.layout.socketDir(ref), port: node.port },
      certPgdata: ctx.layout.pgdata(ref),
      passwordVerifier: spec.passwordVerifier,
      allowedCidrs: spec.allowedCidrs,
    });
  }
}
