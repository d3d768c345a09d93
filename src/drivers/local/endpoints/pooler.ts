// A connection pooler: PgBouncer per service, and per read replica set whose
// pooler is enabled (replica-set-pooler.ts), as several processes on one
// port where Basin's PgBouncer can peer them (pgbouncer-install.ts,
// poolerProcessCount), else one, each process supervised as the service's
// postmaster is (postmaster.ts, docs/architecture.md §9):
// - it runs as the service's (or set's) own OS user, confined like the postmaster
//   (no_new_privs, an empty bounding set, private /tmp & co.: confine.ts),
//   detached, so it outlives Basin; in memory and pids cgroups of its own
//   (node-cgroups.ts: the tenant can trace it, being its uid, so it is
//   bounded like the tenant's other processes), protected from the OOM
//   killer as the postmaster is (oom-scores.ts);
// - Basin keeps their pids in pooler.json (root's): a restarted Basin adopts
//   the PgBouncers it finds there, each checked against /proc (a live
//   pgbouncer run with its own ini of this pooler: pgbouncer.ini for the
//   first, pgbouncer-<i>.ini for the others), instead of starting others;
// - they start once the server accepts connections, one that died is
//   started again by the engine (inspectService reports the service
//   failed; the others go on serving), all are reloaded
//   (SIGHUP) when its pools, passwords or access rules change, all
//   restarted together when its port, certificate, PgBouncer or number of
//   processes does, and all stopped (SIGTERM, then SIGKILL) when the service
//   stops or the pooler is disabled. Its files go when it is disabled, and
//   with the service's instance directory when it is deleted.
//
// The server's own start kills every process of the service's user (what
// its tsdbadmin left running), PgBouncer with them: it is started again
// after the server, by the next step.

import { readFile, rename, stat, truncate, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { accepts } from '../../../lib/port-probe.js';
import { availableParallelism, setPriority } from 'node:os';
import { join } from 'node:path';
import { DONE, type Progress, wait } from '../../../domain/progress.js';
import { DriverError, type ServiceSpec } from '../../driver.js';
import { postmasterCommand } from '../host/confine.js';
import { lastLines, withPrelude } from '../host/exec.js';
import { hash } from '../node/node-state.js';
import { ensureOwnedDir, exists, mkdirIn, removeTrees, writeRootFile } from '../node/node-files.js';
import type { OsUser } from '../host/os-user.js';
import {
  authFile,
  MAX_POOLER_PROCESSES,
  pgbouncerIni,
  poolerHba,
  poolerProcessCount,
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
import { type PgbouncerInstall, pgbouncerInstall } from './pgbouncer-install.js';
import type { DriverContext } from '../context.js';

/** What a pooler needs of the driver (context.ts); the set's and a Patroni node's poolers too. */
export type PoolerCtx = Pick<
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
type Ctx = PoolerCtx;

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

/** Basin's record of the PgBouncers it started (root 0600). */
interface PoolerState {
  /** By process index (0: pgbouncer.ini); before several processes, `pid` alone. */
  pids?: number[];
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
  /** Its compute size: how many PgBouncer processes it gets (poolerProcessCount). */
  size: PoolerSize;
  server: PoolerServer;
  /** The certificate and key clients are shown (a data directory's server.crt and server.key, or an HA node's). */
  tls: { certFile: string; keyFile: string };
  /** tsdbadmin's SCRAM verifier (the service's, for a set too). */
  passwordVerifier: string;
  /** The VPC's blocks ([]: the public CIDRs), as the server admits them. */
  allowedCidrs: string[];
}

type PoolerSize = Parameters<typeof poolerProcessCount>[0];

/**
 * A pooler's processes and files, by its id alone: what reading, stopping
 * and removing them needs (a node's stop knows no spec: patroni-pooler.ts).
 */
export class PoolerProcesses {
  protected readonly files;

  constructor(
    protected readonly ctx: Ctx,
    protected readonly who: Pick<PoolerTarget, 'id' | 'kind'>,
  ) {
    this.files = ctx.layout.pooler(who.id);
  }

  /** The pids of the running PgBouncers, by process index (undefined: that one runs not). */
  pids(): Promise<(number | undefined)[]> {
    return runningPids(this.files);
  }

  protected get unit(): Unit {
    return { id: this.who.id, part: 'pooler' };
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

  /** One step of stopping the pooler; its files go too when `removeFiles` (the pooler is disabled). */
  async stop(removeFiles: boolean): Promise<Progress> {
    const { ctx, files } = this;
    const live = (await this.pids()).filter((p): p is number => p !== undefined);
    if (live.length > 0) return this.stopStep(live, 'stopping the connection pooler');
    for (let i = 0; i < MAX_POOLER_PROCESSES; i++) {
      const spawned = ctx.spawned.get(spawnKey(files, i));
      if (spawned && !spawned.proc.exit) {
        signalAll([spawned.proc.pid], 'SIGKILL');
        return wait(50, 'stopping the connection pooler');
      }
    }
    forgetSpawned(ctx, files);
    if (removeFiles) {
      if (!(await ctx.cgroups.remove(this.unit))) return wait(50, 'stopping the connection pooler');
      if (await exists(files.dir)) await removeTrees([files.dir]);
    }
    return DONE;
  }

  protected async stopStep(pids: number[], why: string): Promise<Progress> {
    const now = Date.now();
    let logged = false;
    for (const pid of pids) {
      const since = stopping.get(pid);
      if (since === undefined) {
        signalAll([pid], 'SIGTERM');
        stopping.set(pid, now);
        if (!logged) this.ctx.log.info({ [this.who.kind]: this.who.id, pids }, why);
        logged = true;
      } else if (now - since > STOP_TIMEOUT_MS) {
        signalAll([pid], 'SIGKILL');
      }
      if (!(await isLive(pid))) stopping.delete(pid);
    }
    return wait(50, why);
  }
}

export class Pooler extends PoolerProcesses {
  constructor(
    ctx: Ctx,
    private readonly target: PoolerTarget,
  ) {
    super(ctx, target);
  }

  /**
   * Whether every PgBouncer of the pooler runs, each kept in the pooler's
   * cgroups: one an older Basin started outside them is moved in. A failure
   * to is logged: a bound is not its health.
   */
  async keepBounds(): Promise<boolean> {
    const pids = await this.pids();
    const all = pids.length > 0 && pids.every((p) => p !== undefined);
    if (!all || !this.ctx.cgroups.enabled) return all;
    try {
      await this.ensureCgroups(pids.length);
      for (const pid of pids as number[]) {
        if (await this.ctx.cgroups.place(this.unit, pid)) {
          this.ctx.log.info(
            { [this.target.kind]: this.target.id, pid },
            'moved the pooler into its cgroups',
          );
        }
      }
    } catch (err) {
      this.ctx.log.warn(
        { [this.target.kind]: this.target.id, err: (err as Error).message },
        'could not keep the connection pooler in its cgroups',
      );
    }
    return true;
  }

  /** Its cgroups, with the bounds its clients and processes need; their directories. */
  private ensureCgroups(processes: number): Promise<string[]> {
    return this.ctx.cgroups.ensure(
      this.unit,
      poolerBounds(this.target.sizes.maxClients, POOLER_NICE, processes),
    );
  }

  /** The PgBouncer to run and how many processes of it. */
  private async how(): Promise<{ install: PgbouncerInstall; count: number }> {
    const install = await pgbouncerInstall((msg) => this.ctx.log.warn({}, msg));
    const count = poolerProcessCount(this.target.size, availableParallelism(), install.peering);
    return { install, count };
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
    const { install, count } = await this.how();
    await mkdirIn(files.dir, 0o711);
    await this.trimLog();
    const stats = await statsSecret(files.stats);
    const socketDirs = Array.from({ length: count }, (_, i) => processFiles(files, i).socketDir);
    const { inis, auth, hba } = this.configFiles(
      Object.keys(await readBlocks(files)),
      stats.verifier,
      socketDirs,
    );
    for (const dir of socketDirs) await ensureOwnedDir(dir, user);
    for (const [i, ini] of inis.entries())
      await writeRootFile(processFiles(files, i).ini, ini, user);
    await writeRootFile(files.authFile, auth, user);
    await writeRootFile(files.hbaFile, hba, user);
    // The CA that signed the server's certificate, where PgBouncer's user
    // can read it (ca/ is root's alone); a public certificate.
    let ca = '';
    if ('caFile' in target.server) {
      ca = await readSmallFile(ctx.layout.caCert, { maxBytes: 64 * 1024 });
      await writeRootFile(files.caFile, ca, user);
    }
    const cert = await readSmallFile(target.tls.certFile, {
      maxBytes: 64 * 1024,
    });
    const restartHash = hash(install.path, String(count), ...inis.map(restartPart), cert, ca);
    const loadedHash = hash(...inis, auth, hba);
    const state = await this.readState();
    // Made (or resized) before they start, so that they start in them.
    const cgroups = await this.ensureCgroups(count);
    const pids = await this.pids();
    const live = pids.filter((p): p is number => p !== undefined);
    if (
      live.length > 0 &&
      (state.startedWith !== restartHash || live.some((p) => stopping.has(p)))
    ) {
      // All of them: a process of another port, PgBouncer or count must
      // not serve beside the new ones.
      return this.stopStep(
        live,
        'restarting the connection pooler to apply its new port, certificate or processes',
      );
    }
    const missing = Array.from({ length: count }, (_, i) => i).filter((i) => pids[i] === undefined);
    if (missing.length > 0) {
      // Those that run, by index, as many as there are to be now (a pooler
      // that had more processes before was stopped whole: none of them runs).
      const kept = Array.from({ length: count }, (_, i) => pids[i]);
      return this.start(user, install, missing, kept, { restartHash, loadedHash }, cgroups);
    }
    for (const [i, pid] of (pids as number[]).entries()) {
      const spawned = ctx.spawned.get(spawnKey(files, i));
      if (spawned?.proc.pid === pid && !spawned.sawReady) {
        if (!(await this.accepts(target.port, socketDirs[i] as string))) {
          return wait(20, 'waiting for the connection pooler to accept connections');
        }
        spawned.sawReady = true;
      }
    }
    if (state.loaded !== loadedHash) {
      // PgBouncer re-reads its ini, auth_file and hba file on SIGHUP.
      signalAll(pids as number[], 'SIGHUP');
      await this.writeState({ ...state, loaded: loadedHash });
    }
    return DONE;
  }

  private configFiles(
    blocked: readonly string[],
    statsVerifier: string,
    socketDirs: readonly string[],
  ): { inis: string[]; auth: string; hba: string } {
    const { ctx, target } = this;
    try {
      return {
        inis: socketDirs.map((_, index) =>
          pgbouncerIni(
            { port: target.port, sizes: target.sizes, server: target.server },
            {
              authFile: this.files.authFile,
              hbaFile: this.files.hbaFile,
              certFile: target.tls.certFile,
              keyFile: target.tls.keyFile,
            },
            ctx.networks.listenAddresses(target.id, ctx.listenAddresses),
            { index, socketDirs },
          ),
        ),
        auth: authFile(target.passwordVerifier, statsVerifier),
        hba: poolerHba(target, ctx.publicCidrs, blocked, true),
      };
    } catch (err) {
      throw new DriverError(`Invalid pooler configuration: ${(err as Error).message}`, false);
    }
  }

  /**
   * Starts the PgBouncers of `indices` (the others run: `pids`, one entry
   * a process the pooler is to have). One this
   * process started that exited before it ever accepted connections failed:
   * its output says why, as a retryable error.
   */
  private async start(
    user: OsUser,
    install: PgbouncerInstall,
    indices: number[],
    pids: (number | undefined)[],
    hashes: { restartHash: string; loadedHash: string },
    cgroups: string[],
  ): Promise<Progress> {
    const { ctx, target, files } = this;
    for (const i of indices) {
      const last = ctx.spawned.get(spawnKey(files, i));
      if (last && !last.proc.exit) return wait(20, 'starting the connection pooler');
      ctx.spawned.delete(spawnKey(files, i));
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
    }
    const port = target.port as number;
    // Its own processes may hold the port already (so_reuseport); another's may not.
    if (pids.every((p) => p === undefined) && !(await portFree(ctx.networks, target.id, port))) {
      throw new DriverError(
        `Port ${port} of the connection pooler is in use by another process.`,
        true,
      );
    }
    await this.trimLog();
    const next = [...pids];
    for (const i of indices) {
      const { ini } = processFiles(files, i);
      const spawned = spawnTenantDaemon(
        withPrelude(
          protectedPrelude(ctx.oom, cgroups),
          postmasterCommand(user, install.path, [ini], ctx.privateTmp),
        ),
        files.dir,
        files.log,
      );
      ctx.spawned.set(spawnKey(files, i), { proc: spawned, sawReady: false });
      next[i] = spawned.pid;
    }
    const started = indices.map((i) => next[i] as number);
    // Recorded as soon as spawned: a Basin killed now adopts (or stops) them.
    await this.writeState({
      pids: next.map((p) => p ?? 0),
      startedWith: hashes.restartHash,
      loaded: hashes.loadedHash,
    });
    for (const pid of started) await favour(pid);
    ctx.log.info(
      {
        [target.kind]: target.id,
        pids: started,
        processes: next.length,
        pgbouncer: install.version,
        osUser: user.name,
        port,
      },
      'starting the connection pooler',
    );
    return wait(20, 'starting the connection pooler');
  }

  /**
   * Whether PgBouncer process accepts connections: on the pooler's port (in
   * its namespace, where it has one), and on its socket, which is its
   * own (the port may be answered by another of the pooler's processes).
   */
  private async accepts(port: number, socketDir: string): Promise<boolean> {
    const host = poolerHost(this.ctx, this.target.id);
    return (
      (await accepts({ host, port })) && accepts({ path: join(socketDir, `.s.PGSQL.${port}`) })
    );
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
 * Process `i`'s own files: its ini (the first keeps pgbouncer.ini, the
 * name a pooler of one process always had, so that one an older Basin
 * started is adopted) and its socket directory (the service's user's).
 */
export function processFiles(files: PoolerFiles, i: number): { ini: string; socketDir: string } {
  return {
    ini: i === 0 ? files.ini : join(files.dir, `pgbouncer-${i}.ini`),
    socketDir: join(files.dir, `s${i}`),
  };
}

/** The key of process `i` in ctx.spawned. */
function spawnKey(files: PoolerFiles, i: number): string {
  return i === 0 ? files.dir : `${files.dir}#${i}`;
}

/** Forgets what this Basin spawned of a pooler (its processes were killed with their user's). */
export function forgetSpawned(ctx: Pick<Ctx, 'spawned'>, files: PoolerFiles): void {
  for (let i = 0; i < MAX_POOLER_PROCESSES; i++) ctx.spawned.delete(spawnKey(files, i));
}

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

/** The pids of the PgBouncers running with these files, by process index. */
async function runningPids(files: PoolerFiles): Promise<(number | undefined)[]> {
  const { pids = [] } = await readState(files);
  return Promise.all(
    pids.map(async (pid, i) =>
      pid > 0 && (await isOurs(processFiles(files, i).ini, pid)) ? pid : undefined,
    ),
  );
}

/**
 * The Unix sockets of the pooler's processes as last started (Basin's
 * sampler reads each one's pools there, and sums them).
 */
export async function poolerSockets(files: PoolerFiles): Promise<string[]> {
  const { pids = [] } = await readState(files);
  return pids.map((_, i) => processFiles(files, i).socketDir);
}

/** Whether `pid` is a live PgBouncer run with `ini`. */
async function isOurs(ini: string, pid: number): Promise<boolean> {
  if (!(await isLive(pid))) {
    stopping.delete(pid);
    return false;
  }
  const argv = await procCmdline(pid);
  return /(^|\/)pgbouncer$/.test(argv[0] ?? '') && argv.at(-1) === ini;
}

async function readState(files: PoolerFiles): Promise<PoolerState> {
  try {
    const raw = JSON.parse(await readFile(files.state, 'utf8')) as PoolerState & { pid?: number };
    const pids = Array.isArray(raw.pids)
      ? raw.pids.slice(0, MAX_POOLER_PROCESSES).map((p) => (Number.isInteger(p) ? p : 0))
      : Number.isInteger(raw.pid)
        ? [raw.pid as number]
        : undefined;
    return {
      ...(pids ? { pids } : {}),
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
  const pids = (await runningPids(files)).filter((p): p is number => p !== undefined);
  if (pids.length === 0) return;
  signalAll(pids, 'SIGHUP');
  // What it loaded now: the files on disk, as a converge hashes them.
  const state = await readState(files);
  const inis = await Promise.all(
    (state.pids ?? []).map((_, i) => readFile(processFiles(files, i).ini, 'utf8').catch(() => '')),
  );
  const auth = await readFile(files.authFile, 'utf8').catch(() => '');
  await writeState(files, { ...state, loaded: hash(...inis, auth, next) });
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
      size: spec.size,
      server: { socketDir: ctx.layout.socketDir(ref), port: node.port },
      tls: pgdataTls(ctx.layout.pgdata(ref)),
      passwordVerifier: spec.passwordVerifier,
      allowedCidrs: spec.allowedCidrs,
    });
  }
}

/** A data directory's certificate and key, which its server shows. */
export function pgdataTls(pgdata: string): { certFile: string; keyFile: string } {
  return { certFile: join(pgdata, 'server.crt'), keyFile: join(pgdata, 'server.key') };
}
