// One step of converging a service's primary node to its spec. The steps,
// each re-checked from the files and processes at every call (so a crash of
// Basin anywhere in between is harmless):
//   0. the service's OS user exists (service-users.ts);
//   1. the node exists (cloned from the template, or a fork's restored from
//      its parent: fork-restore.ts) and belongs to that user;
//   2. its configuration files and certificate are what the spec says;
//   3. the server runs or not, as `spec.running` says, in the cgroups
//      of its size (node-cgroups.ts), at its storage level (read-only, in
//      recovery, or not at all: storage/node-storage.ts); a restart when
//      a setting that needs one changed, a reload when only others did;
//      its WAL archived up to the stop before it stops (wal-mark.ts);
//   4. a fork, once recovered, is opened (fork-open.ts);
//   5. tsdbadmin's password and the type's extensions are applied.

import { lstat } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { DriverError, type ServiceSpec, type SpecNode } from '../../driver.js';
import { DONE, type Progress, wait } from '../../../domain/progress.js';
import {
  ADMIN_GRANTS,
  createExtensions,
  grantAdminRoles,
  reloadConfig,
  setTsdbadminPassword,
  type AdminTarget,
} from '../node/admin.js';
import { isConfined } from '../host/confine.js';
import {
  type HbaSources,
  pgHba,
  pgIdent,
  postgresqlSettings,
  renderConf,
  type Settings,
  splitSettings,
  wantedExtensions,
} from '../config/conf.js';
import type { NodeRef } from '../layout.js';
import {
  cloneNode,
  ensureNodeDirs,
  handOverNode,
  isStandbyData,
  nodeExists,
  nodeOwner,
  writeNodeConfig,
  type NodeConfigFiles,
} from '../node/node-files.js';
import { nodeName } from '../../../domain/service-nodes.js';
import { type NodeReplication, promote, standbyConninfo } from '../replication/replication.js';
import { hash, readNodeState, writeNodeState, type NodeState } from '../node/node-state.js';
import { isRoot, type OsUser } from '../host/os-user.js';
import {
  type PostmasterStatus,
  postmasterStatus,
  prepareStart,
  spawnPostmaster,
  startFailure,
  type SpawnedServers,
} from '../node/postmaster.js';
import { clusterProcesses, signalAll } from '../host/processes.js';
import { forkData, openFork, recoveryFailed } from '../backups/fork-open.js';
import { archiveBeforeStop } from '../node/wal-mark.js';
import { readSmallFile } from '../host/files/safe-fs.js';
import { certHosts, issueServerCert, serverCertIsCurrent } from '../node/tls.js';
import { buildStandby, dropInterruptedRewind } from '../replication/standby.js';
import { peerCidrs, readReplicaPeers } from '../replication/replica-peers.js';
import { checkFollows, rewindStandby } from '../replication/follow.js';
import { portFree } from '../host/port-free.js';
import type { Bounds } from '../host/cgroups/cgroup-hierarchy.js';
import { nodeBounds } from '../host/cgroups/node-bounds.js';
import { nodeUnit } from '../host/cgroups/node-cgroups.js';
import { postmasterOomEnv, protectedPrelude } from '../host/cgroups/oom-scores.js';
import { holdRestart } from '../node/restarts.js';
import {
  inStorageRecovery,
  prepareRecovery,
  storageHold,
  storageReadOnly,
} from '../storage/node-storage.js';
import type { DriverContext } from '../context.js';

/** A SCRAM-SHA-256 verifier as PostgreSQL stores it; anything else would be taken for a password. */
/**
 * How soon to look again while PostgreSQL starts: a copied cluster accepts
 * connections 40-70 ms after it is spawned, so a short poll is what keeps
 * create-to-READY close to the floor of copy + start.
 */
const STARTUP_POLL_MS = 20;

/**
 * The wait while a postmaster of Basin's that died is not reaped yet: the
 * kernel tears a process down (its memory, its sockets) before it is a
 * zombie, and /proc no longer shows it as a postmaster meanwhile.
 */
export const ENDING = 'PostgreSQL is ending';

/**
 * How soon to look again while a fork recovers its parent's WAL: a restored
 * backup's recovery may take a while; a NOW copy's replays only the WAL of
 * its own backup (a few ms), so it is looked at as a start is.
 */
const RECOVERY_POLL_MS = 100;
const recoveryPoll = (state: NodeState) =>
  state.recovery?.kind === 'copy' ? STARTUP_POLL_MS : RECOVERY_POLL_MS;

const VERIFIER = /^SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/;

/** A node whose data is there and its user's (ServiceNode.ensureData). */
interface NodeData {
  user: OsUser;
  state: NodeState;
}

/** What configure found and wrote: what the start, restart and settle phases go by. */
interface Configured {
  /** Its cgroups, when it is to run. */
  cgroups: string[] | undefined;
  /** Whether it is to run in recovery for its storage level. */
  recovery: boolean;
  /** The settings that need a restart, and what it would load (with its certificate). */
  restartHash: string;
  loadedHash: string;
  pm: PostmasterStatus;
  /** The postmaster this process started for it, if any. */
  starting: ReturnType<SpawnedServers['get']>;
}

export class ServiceNode {
  private readonly ref: NodeRef;
  private readonly pgdata: string;
  private readonly isStandby: boolean;
  /** Where read replica sets on other hosts stream from (a primary's pg_hba: replica-peers.ts), read by configure. */
  private peers: string[] = [];

  constructor(
    private readonly ctx: DriverContext,
    private readonly spec: ServiceSpec,
    private readonly node: SpecNode = spec.nodes.find((n) => n.role === 'primary') ?? {
      index: 0,
      role: 'primary',
      port: spec.port,
    },
    private readonly replication?: NodeReplication,
  ) {
    this.ref = { id: spec.serviceId, node: node.index };
    this.pgdata = ctx.layout.pgdata(this.ref);
    this.isStandby = node.role === 'standby';
    if (this.isStandby && !replication) {
      throw new DriverError('A standby needs its primary (a bug in the local driver).', false);
    }
  }

  /**
   * One step towards the spec, in its phases: the node's data (ensureData),
   * its files, cgroups and certificate (configure), then its server stopped
   * (stop) or started, restarted as needed (startOrRestart), and, once it
   * runs as it should, brought to what the spec asks of a running node
   * (settle). Each phase returns a Progress when the step ends there.
   */
  async converge(): Promise<Progress> {
    if (!VERIFIER.test(this.spec.passwordVerifier)) {
      throw new DriverError('The service password is not a SCRAM-SHA-256 verifier.', false);
    }
    const data = await this.ensureData();
    if (!('user' in data)) return data;
    const { user, state } = data;
    const configured = await this.configure(user, state);
    if (!this.spec.running) return this.stop(user, state, configured);
    return (
      (await this.startOrRestart(user, state, configured)) ?? (await this.settle(state, configured))
    );
  }

  /**
   * The node's data, its user's: made (cloned, copied from the primary, a
   * fork's restored), handed over, and rewound onto its primary's timeline
   * when it must follow another.
   */
  private async ensureData(): Promise<Progress | NodeData> {
    const { ctx, spec, ref, pgdata } = this;
    // useradd takes ~100 ms (it syncs the password files): it runs while the
    // template is copied, which does not need the user until its chown.
    const userMade = ctx.users.ensure(spec.serviceId);
    userMade.catch(() => {}); // awaited below, whatever happens first
    // Half-rewound files (Basin died while pg_rewind ran) go: rebuilt next.
    if (this.isStandby && (await dropInterruptedRewind(ctx, ref))) {
      await userMade;
      return wait(0, 'rebuilding a standby', {
        severity: 'WARNING',
        message: `basin: the rewind of ${nodeName(ref.node)} was interrupted (Basin stopped meanwhile); it is rebuilt from a base backup of the primary`,
      });
    }
    if (!(await nodeExists(ctx.layout, ref))) {
      if ((await ctx.template.poll()) !== 'ready') {
        await userMade;
        return wait(250, 'preparing the PostgreSQL template (once per host)');
      }
      if (this.isStandby) {
        // Copied from the running primary (pg_basebackup): it is not stopped.
        await buildStandby(ctx, spec, this.node, this.replicationOf(), await userMade);
      } else if (spec.source.kind === 'fork' || spec.relocated) {
        // A fork's data, or a moved service's own: restored, never made anew.
        // Its restore starts before the user is made: what needs no user
        // (its repository server) is made meanwhile (fork-restore.ts).
        const restoring = await forkData(ctx, spec, userMade, () => nodeExists(ctx.layout, ref));
        if (restoring) return restoring;
      } else {
        // Its backups' side (the repository's OS user, server and
        // identities, the stanza's configuration) needs none of the
        // clone's files: made while the template is copied, so a create
        // waits for the slower of the two, not for both (issue 25).
        const settled = await Promise.allSettled([
          this.clone(userMade),
          userMade.then((user) => ctx.backups.ensureConfig(spec, user)),
        ]);
        for (const r of settled) if (r.status === 'rejected') throw r.reason;
      }
    }
    const user = await userMade;
    const handing = await this.handOver(user);
    if (handing) return handing;
    const state = await readNodeState(ctx.layout.stateFile(ref));
    await this.notePrimaryMoved(state);
    // A former primary that is to follow another (after a failover), or a
    // standby that went past where its new primary's timeline began:
    // stopped, then rewound onto the primary's timeline, or rebuilt from it
    // when it cannot be (follow.ts).
    if (this.isStandby && (state.rewind || !(await isStandbyData(pgdata)))) {
      const replication = this.replicationOf();
      const save = () => this.save(state);
      const rewinding = await rewindStandby(ctx, spec, this.node, replication, user, state, save);
      if (rewinding) return rewinding;
    }
    return { user, state };
  }

  /**
   * A read replica set's node across hosts whose primary moved to another
   * host (a drain, a lost host's service restored elsewhere): rebuilt from
   * a base backup of it (rewindStandby, state.rewind = 'rebuild'). The
   * moved primary was restored from its archive and opened a timeline of
   * its own where the archive ended, and this node may hold WAL past that
   * point (a drain's shutdown checkpoint, a lost host's unarchived
   * commits), which it could never follow; there is no pg_rewind across
   * hosts. Told by where it streams from (`state.streamsFrom`, recorded
   * when first seen); an HA service's set nodes stream through their own
   * host's endpoint, which does not move.
   */
  private async notePrimaryMoved(state: NodeState): Promise<void> {
    const remote = this.replication?.remote;
    if (!this.isStandby || !remote || !this.replication) return;
    const from = `${remote.host}:${this.replication.primary.port}`;
    if (state.streamsFrom === from) return;
    const before = state.streamsFrom;
    state.streamsFrom = from;
    if (before !== undefined && !state.rewind) {
      state.rewind = 'rebuild';
      this.ctx.log.warn(
        { serviceId: this.spec.serviceId, from: before, to: from },
        "a read replica node's primary moved to another host: it is rebuilt from a base backup of it",
      );
    }
    await this.save(state);
  }

  /**
   * Its directories, configuration files, cgroups and certificate as the
   * spec says, and what its server was started and loaded with.
   */
  private async configure(user: OsUser, state: NodeState): Promise<Configured> {
    const { ctx, spec, ref, pgdata } = this;
    await ensureNodeDirs(ctx.layout, ref, user);
    if (!this.isStandby) this.peers = peerCidrs(await readReplicaPeers(ctx.layout, spec.serviceId));
    const files = this.configFiles(user, state);
    // Its cgroups (node-cgroups.ts), made before it starts so that it
    // starts in them; a resize changes the running server's bounds here.
    const cgroups = spec.running
      ? await ctx.cgroups.ensure(nodeUnit(ref), this.bounds(state), spec.size.shared)
      : undefined;
    await writeNodeConfig(pgdata, files, user);
    // A read replica set's node across hosts is reached through every
    // database host's endpoint: its certificate names them all.
    const hosts = [
      ...new Set([
        ...certHosts(ctx.publicHost, spec.serviceId),
        ...(this.replication?.remote?.names ?? []),
      ]),
    ];
    // PostgreSQL reads server.crt, then server.key, while it starts: a pair
    // replaced in between would not match. A server that is starting gets its
    // new certificate at a later apply (with a reload), never meanwhile.
    if (!(await this.isStarting()) && !(await serverCertIsCurrent(ctx.layout, pgdata, hosts))) {
      const t0 = performance.now();
      await issueServerCert(ctx.layout, pgdata, hosts, user);
      ctx.log.debug(
        { serviceId: spec.serviceId, ms: Math.round(performance.now() - t0) },
        'issued the server certificate',
      );
    }
    // A primary past its storage ceiling runs in recovery (node-storage.ts):
    // entering or leaving it is a restart. Not a fork still recovering its
    // parent's WAL: a standby.signal would keep it from ever opening; it
    // goes into recovery once it is open.
    const recovery =
      !this.isStandby &&
      state.fork !== 'recovering' &&
      inStorageRecovery(ctx.storage, spec.serviceId);
    const restartConf = renderConf(splitSettings(this.settings(state)).restart);
    const restartHash = recovery ? hash(restartConf, 'storage recovery') : hash(restartConf);
    const cert = await readSmallFile(join(pgdata, 'server.crt'), { maxBytes: 64 * 1024 });
    const loadedHash = hash(files.conf, files.hba, files.ident, cert);
    const pm = await postmasterStatus(pgdata);
    const starting = ctx.spawned.get(pgdata);
    return { cgroups, recovery, restartHash, loadedHash, pm, starting };
  }

  /** Stopped as the spec asks: its WAL archived, the server and the tenant's processes ended. */
  private async stop(user: OsUser, state: NodeState, c: Configured): Promise<Progress> {
    const { ctx, pgdata } = this;
    const { pm, starting } = c;
    // Stopped as asked: no death, and the next start (a user's) is at once.
    await this.stoppingOnPurpose(state, true);
    if (pm.up) {
      // A server in recovery writes no WAL: there is nothing to archive.
      const marking =
        !this.isStandby &&
        !state.storageRecovery &&
        pm.state === 'ready' &&
        !ctx.stopper.stopping(pgdata, pm.pid)
          ? await archiveBeforeStop(this.admin(), state, () => this.save(state), ctx.log)
          : undefined;
      if (marking) return marking;
      return wait(await ctx.stopper.step(pgdata, pm.pid, 'fast'), 'stopping PostgreSQL');
    }
    if (starting && !starting.proc.exit) {
      return wait(100, 'waiting for PostgreSQL to finish starting before stopping it');
    }
    // Nothing of the tenant's runs while its server does not (see start);
    // its primary stops last (local-driver.ts), and sweeps.
    if (!this.isStandby && (await ctx.users.killAll(user)) > 0) {
      return wait(100, "stopping the processes of the service's OS user");
    }
    ctx.stopper.forget(pgdata);
    ctx.spawned.delete(pgdata);
    return DONE;
  }

  /**
   * Running as the spec asks: started when it is not (unless its storage or
   * the restarts' backoff holds it), moved into its cgroups, restarted when
   * a setting, its confinement or its storage level needs it. Undefined
   * when it runs as it should.
   */
  private async startOrRestart(
    user: OsUser,
    state: NodeState,
    c: Configured,
  ): Promise<Progress | undefined> {
    const { ctx, spec, ref, pgdata } = this;
    const { pm, starting, recovery, restartHash, loadedHash, cgroups } = c;
    // Past its storage limit: the watch stopped it, and it is not started,
    // by the restarts' backoff either. Its stop was Basin's, no death: the
    // start once it is under its limit is at once (restarts.ts).
    const stopped = storageHold(ctx.storage, spec.serviceId, this.what());
    if (stopped) {
      await this.stoppingOnPurpose(state);
      throw stopped;
    }
    if (!pm.up) {
      // A postmaster of ours just killed is a zombie until Node reaps it, a
      // turn of its loop later: its exit, which says how it ended in the
      // death's entry (restarts.ts), is waited for; so is one just spawned.
      if (starting && !starting.proc.exit) {
        const dying = state.upSince !== undefined;
        return wait(STARTUP_POLL_MS, dying ? ENDING : 'starting PostgreSQL');
      }
      // One that died on its own is restarted, later each time it keeps dying (restarts.ts).
      const held = await holdRestart(ctx, ref, pgdata, state, () => this.save(state));
      if (held) return held;
      // Archiving works from the server's first segment on: its stanza is there first.
      if (!this.isStandby) {
        await ctx.backups.ensureConfig(spec, user);
        await ctx.backups.ensureStanza(spec.serviceId, user);
      }
      if (!this.isStandby) {
        await prepareRecovery(pgdata, user, state, recovery, () => this.save(state));
      }
      return this.start(user, state, restartHash, loadedHash, cgroups);
    }
    if (starting?.proc.pid === pm.pid && this.isReady(pm)) starting.sawReady = true;
    if (await ctx.cgroups.place(nodeUnit(ref), pm.pid, spec.size.shared, pgdata)) {
      ctx.log.info(
        { serviceId: spec.serviceId, node: ref.node },
        'moved PostgreSQL into its cgroups',
      );
    }
    // A server an older Basin started runs without no_new_privs, a
    // private /tmp or its network namespace: restarted once, confined
    // (confine.ts).
    const inNetwork = (pid: number) => ctx.networks.holds(spec.serviceId, pid);
    const unconfined = !(await isConfined(pm.pid, ctx.privateTmp !== undefined, inNetwork));
    // In storage recovery, but its own tenant promoted it (the promotion
    // took standby.signal away): restarted in recovery.
    const promoted = recovery && state.storageRecovery === true && !(await isStandbyData(pgdata));
    const why = unconfined
      ? 'restarting PostgreSQL to confine it (no_new_privs, private /tmp, its network namespace)'
      : promoted
        ? 'restarting PostgreSQL in recovery: its storage is past its ceiling, and it left recovery'
        : recovery !== (state.storageRecovery === true)
          ? `restarting PostgreSQL ${recovery ? 'in' : 'out of'} recovery for its storage level`
          : 'restarting PostgreSQL to apply new settings';
    const mustRestart = state.startedWith !== restartHash || unconfined || promoted;
    if (mustRestart || pm.state === 'stopping' || ctx.stopper.stopping(pgdata, pm.pid)) {
      const first = mustRestart && !ctx.stopper.stopping(pgdata, pm.pid);
      if (first) ctx.log.info({ serviceId: spec.serviceId }, why);
      // Basin's own restart (new settings, its confinement, its storage
      // level) is no death; a server stopping on its own (a tenant's
      // signal), which Basin only hurries, is one (restarts.ts).
      if (mustRestart) await this.stoppingOnPurpose(state);
      const ms = await ctx.stopper.step(pgdata, pm.pid, 'fast');
      // Undone from inside: said in the service's logs, once.
      const note =
        first && promoted
          ? {
              severity: 'WARNING' as const,
              message: `basin: PostgreSQL left recovery (it was promoted from inside the service) while its storage is past its ceiling: it is restarted in recovery`,
            }
          : undefined;
      return wait(ms, why, note);
    }
    return undefined;
  }

  /**
   * A server that runs as it should: recorded as up, promoted when a
   * failover chose it, waited for until it accepts connections, kept on its
   * primary's timeline (a standby), its configuration reloaded, a fork
   * opened, tsdbadmin's password and the extensions applied.
   */
  private async settle(state: NodeState, c: Configured): Promise<Progress> {
    const { ctx, spec, ref, pgdata } = this;
    const { pm, loadedHash } = c;
    const ready = this.isReady(pm);
    // Running as it should: from now on, found not running it died (restarts.ts).
    if (ready && state.upSince === undefined) {
      state.upSince = Date.now();
      await this.save(state);
    }
    // The recorded primary still a standby: a failover chose it (promoteNode);
    // not one Basin runs in recovery for its storage.
    if (!this.isStandby && ready && !state.storageRecovery && (await isStandbyData(pgdata))) {
      ctx.log.info({ serviceId: spec.serviceId, node: ref.node }, 'promoting the standby');
      try {
        await promote(this.admin());
      } catch (err) {
        throw new DriverError(`Could not promote the standby: ${(err as Error).message}`, true);
      }
      return wait(STARTUP_POLL_MS, 'promoting the standby');
    }
    if (!ready) {
      if (state.fork === 'recovering')
        return wait(recoveryPoll(state), "recovering the parent's WAL");
      return wait(STARTUP_POLL_MS, 'waiting for PostgreSQL to accept connections');
    }
    // A node across hosts follows its primary's timeline by
    // recovery_target_timeline=latest alone (its primary is not here).
    if (this.isStandby && !this.replication?.remote) {
      const replication = this.replicationOf();
      const save = () => this.save(state);
      const admin = this.admin();
      const diverged = await checkFollows(ctx, spec, this.node, replication, admin, state, save);
      if (diverged) return diverged;
    }

    if (state.loaded !== loadedHash) {
      try {
        await reloadConfig(this.admin());
      } catch (err) {
        throw new DriverError(
          `Could not reload the configuration: ${(err as Error).message}`,
          true,
        );
      }
      state.loaded = loadedHash;
      await this.save(state);
    }
    if (this.isStandby) return DONE; // read-only: it has the primary's roles and extensions
    if (state.fork === 'recovering') {
      // A moved service keeps its own settings, hot standby among them: its
      // server accepts (Basin's) connections while it still recovers. It
      // opens once its recovery ended, which removes recovery.signal.
      if (spec.relocated && (await lstat(join(pgdata, 'recovery.signal')).catch(() => null))) {
        return wait(RECOVERY_POLL_MS, 'recovering its archived WAL');
      }
      return openFork(
        ctx,
        spec,
        state,
        () => this.applySql(state),
        () => this.save(state),
      );
    }
    // In recovery nothing can be written: the password and extensions wait
    // until it is out (the level's change brings a converge).
    if (!state.storageRecovery) await this.applySql(state);
    return DONE;
  }

  /** Whether its server accepts what it should: connections (a standby: in recovery). */
  private isReady(pm: PostmasterStatus): boolean {
    return pm.up && (pm.state === 'ready' || (this.isStandby && pm.state === 'standby'));
  }

  /** How its storage errors name it. */
  private what(): 'service' | 'replica set' {
    return this.replication?.separateUser ? 'replica set' : 'service';
  }

  /** A new node, cloned from the template. */
  private async clone(userMade: Promise<OsUser>): Promise<void> {
    const { ctx, spec, ref } = this;
    try {
      await cloneNode(ctx.layout, ref, userMade);
    } catch (err) {
      if (err instanceof DriverError) throw err; // the user's
      ctx.template.invalidate();
      throw new DriverError(`Could not create the database files: ${(err as Error).message}`, true);
    }
    ctx.log.info({ serviceId: spec.serviceId }, 'created database cluster');
  }

  /**
   * Makes the node's files the service's user's when they are not: a node
   * made before services had OS users of their own ran as the template user.
   * Its server is stopped first (fast shutdown), then the files are handed
   * over, and the start that follows runs it as the service's user.
   */
  private async handOver(user: OsUser): Promise<Progress | undefined> {
    const { ctx, spec, ref, pgdata } = this;
    if (!isRoot() || (await nodeOwner(ctx.layout, ref)) === user.uid) return undefined;
    const why = "moving PostgreSQL to the service's own OS user";
    const pm = await postmasterStatus(pgdata);
    if (pm.up) {
      await this.stoppingOnPurpose();
      if (!ctx.stopper.stopping(pgdata, pm.pid)) ctx.log.info({ serviceId: spec.serviceId }, why);
      return wait(await ctx.stopper.step(pgdata, pm.pid, 'fast'), why);
    }
    const starting = ctx.spawned.get(pgdata);
    if (starting && !starting.proc.exit) return wait(100, why);
    const left = await clusterProcesses(pgdata);
    if (left.length > 0) {
      signalAll(left, 'SIGKILL');
      return wait(100, why);
    }
    ctx.stopper.forget(pgdata);
    await handOverNode(ctx.layout, ref, user);
    ctx.log.info(
      { serviceId: spec.serviceId, osUser: user.name },
      'handed the cluster to its OS user',
    );
    return undefined;
  }

  /** tsdbadmin's password, grants and the extensions, each only when it differs from what was applied. */
  private async applySql(state: NodeState): Promise<void> {
    const { spec } = this;
    const target = this.admin();
    const password = hash(spec.passwordVerifier);
    const missing = wantedExtensions(spec).filter((e) => !state.extensions.includes(e));
    try {
      if (state.password !== password) {
        await setTsdbadminPassword(target, spec.passwordVerifier);
        state.password = password;
        await this.save(state);
      }
      if (missing.length > 0) {
        await createExtensions(target, missing);
        state.extensions = [...state.extensions, ...missing];
        await this.save(state);
      }
      if (state.adminGrants !== ADMIN_GRANTS.version) {
        await grantAdminRoles(target);
        state.adminGrants = ADMIN_GRANTS.version;
        await this.save(state);
      }
    } catch (err) {
      throw new DriverError(`Could not configure the database: ${(err as Error).message}`, true);
    }
  }

  /**
   * Starts the server. A postmaster this process started that exited before
   * ever being ready failed to start: its output says why, once, as a
   * retryable error (a port still held by someone else frees up; a broken
   * setting does not, and the operation fails after its retries).
   */
  private async start(
    user: OsUser,
    state: NodeState,
    restartHash: string,
    loadedHash: string,
    cgroups: string[] | undefined,
  ) {
    const { ctx, spec, ref, pgdata } = this;
    const last = ctx.spawned.get(pgdata);
    if (last && !last.proc.exit) return wait(STARTUP_POLL_MS, 'starting PostgreSQL');
    ctx.spawned.delete(pgdata);
    if (last?.proc.exit && !last.sawReady && last.proc.exit.code !== 0) {
      const { code, signal } = last.proc.exit;
      const why = await startFailure(ctx.layout.startupLog(ref), ctx.layout.logDir(ref), user.uid);
      // A fork whose recovery ended without reaching its target never will.
      if (state.fork === 'recovering' && /recover/i.test(why)) throw recoveryFailed(why);
      throw new DriverError(
        `PostgreSQL did not start (exit ${code ?? signal}): ${why || 'see its logs'}`,
        true,
      );
    }
    if (!(await prepareStart(pgdata, ctx.layout.socketDir(ref)))) {
      return wait(100, 'waiting for the processes of a stopped PostgreSQL to exit');
    }
    // What the service's tsdbadmin started under the previous server (COPY
    // … TO PROGRAM, detached) ends with it: a tenant's processes live and
    // die with its server, in its namespace, with no_new_privs, and none
    // an older Basin left unconfined outlives this start. A service with
    // several nodes spares them: its other servers run as the same user.
    if (spec.nodes.length <= 1 && (await ctx.users.killAll(user)) > 0) {
      return wait(100, "stopping the processes of the service's OS user");
    }
    // PostgreSQL starts as long as it can bind one address, so a port taken
    // on IPv4 alone would leave a server clients cannot reach: check first
    // (in its network namespace, where only the service's own processes
    // can hold it).
    if (
      ctx.listenAddresses !== '' &&
      !(await portFree(ctx.networks, spec.serviceId, this.node.port))
    ) {
      throw new DriverError(`Port ${this.node.port} is in use by another process.`, true);
    }
    const proc = await spawnPostmaster({
      pgBin: ctx.pg.bin,
      pgdata,
      logFile: ctx.layout.startupLog(ref),
      user,
      privateTmp: ctx.privateTmp,
      // Protected from the OOM killer, its children back on the tenant's side (oom-scores.ts).
      prelude: protectedPrelude(ctx.oom, cgroups),
      env: postmasterOomEnv(ctx.oom),
    });
    ctx.spawned.set(pgdata, { proc, sawReady: false });
    // Only now: until the new postmaster is known, the stop stays recorded,
    // so the failover watch never takes a restart for a death (failover.ts).
    ctx.stopper.forget(pgdata);
    state.startedWith = restartHash;
    state.loaded = loadedHash;
    delete state.walMarkedAt; // it runs again: its WAL goes on
    await this.save(state);
    ctx.log.info(
      { serviceId: spec.serviceId, node: ref.node, pid: proc.pid, osUser: user.name },
      'starting PostgreSQL',
    );
    return wait(STARTUP_POLL_MS, 'starting PostgreSQL');
  }

  /** Whether a server of this node was spawned or runs but does not accept connections yet. */
  private async isStarting(): Promise<boolean> {
    const pm = await postmasterStatus(this.pgdata);
    if (pm.up) return pm.state !== 'ready';
    const spawned = this.ctx.spawned.get(this.pgdata);
    return spawned !== undefined && !spawned.proc.exit;
  }

  /** The node's bounds: its size's, its processes from its settings (node-bounds.ts). */
  private bounds(state: NodeState): Bounds {
    const s = this.settings(state);
    return nodeBounds(this.spec.size, {
      maxConnections: Number(s.max_connections),
      maxWorkerProcesses: Number(s.max_worker_processes),
    });
  }

  /** The node's settings; a recovering fork's recovery settings with them. */
  private settings(state: NodeState) {
    const { ctx, spec, ref, node, replication } = this;
    const standby = this.isStandby ? this.replicationOf() : undefined;
    const settings = postgresqlSettings(
      spec,
      {
        socketDir: ctx.layout.socketDir(ref),
        backupConf: ctx.layout.backupConf(ref.id),
        pgbackrest: ctx.pg.pgbackrest,
        forkSourceConf: ctx.layout.forkSource(ref.id).conf,
        forkSourcePg: ctx.layout.forkSource(ref.id).pg,
      },
      {
        listenAddresses: ctx.networks.listenAddresses(spec.serviceId, ctx.listenAddresses),
        publicCidrs: ctx.publicCidrs,
        hostMemoryMb: Math.floor(totalmem() / 1024 / 1024),
        storage: {
          allowance: ctx.allowance(spec.size),
          readOnly: storageReadOnly(ctx.storage, spec.serviceId),
        },
      },
      state.fork === 'recovering' ? state.recovery : undefined,
      {
        index: node.index,
        port: node.port,
        ...(replication?.synchronousStandbys && !this.isStandby
          ? { synchronousStandbys: replication.synchronousStandbys }
          : {}),
        ...(standby
          ? {
              standby: {
                conninfo: standbyConninfo({
                  primaryPort: standby.primary.port,
                  secret: standby.secret,
                  name: (standby.nameOf ?? nodeName)(node.index),
                  pgdata: this.pgdata,
                  via: standby.via,
                  host: standby.remote?.host,
                }),
                slot: standby.remote?.noSlot ? '' : (standby.nameOf ?? nodeName)(node.index),
              },
            }
          : {}),
      },
    );
    return replication?.floor ? raiseTo(settings, replication.floor) : settings;
  }

  private replicationOf(): NodeReplication {
    if (!this.replication) throw new DriverError('A standby needs its primary.', false);
    return this.replication;
  }

  private configFiles(user: OsUser, state: NodeState): NodeConfigFiles {
    try {
      return {
        conf: renderConf(this.settings(state)),
        // A fork admits nobody but Basin until it is open (fork-open.ts).
        hba: pgHba(
          this.spec,
          this.ctx.publicCidrs,
          state.fork === 'recovering',
          true,
          this.hbaSources(),
        ),
        ident: pgIdent(this.ctx.adminOsUsers(user)),
      };
    } catch (err) {
      throw new DriverError(`Invalid service configuration: ${(err as Error).message}`, false);
    }
  }

  /**
   * Who reaches the node besides its clients: the host's (or its
   * namespace's) sources, and across hosts a primary's read replica sets'
   * hosts (replication), a set's node's HAProxies on every host (proxy).
   */
  private hbaSources(): HbaSources {
    const own = this.ctx.networks.hbaSources(this.spec.serviceId);
    const proxies = (this.replication?.remote?.proxies ?? []).map((a) =>
      a.includes('/') ? a : a.includes(':') ? `${a}/128` : `${a}/32`,
    );
    return {
      proxy: [...new Set([...own.proxy, ...proxies])],
      replication: [...new Set([...own.replication, ...this.peers])],
    };
  }

  private admin(): AdminTarget {
    return {
      socketDir: this.ctx.layout.socketDir(this.ref),
      port: this.node.port,
      pgdata: this.pgdata,
      bounds: this.ctx.adminBounds,
    };
  }

  /**
   * Basin is about to stop the server: it will not have died on its own
   * (restarts.ts). With `forgetDeaths` (the service is stopped), its next
   * start, a user's, is a first one again.
   */
  private async stoppingOnPurpose(state?: NodeState, forgetDeaths = false): Promise<void> {
    const s = state ?? (await readNodeState(this.ctx.layout.stateFile(this.ref)));
    if (s.upSince === undefined && !(forgetDeaths && s.restarts)) return;
    delete s.upSince;
    if (forgetDeaths) delete s.restarts;
    await this.save(s);
  }

  private save(state: NodeState): Promise<void> {
    return writeNodeState(this.ctx.layout.stateFile(this.ref), state);
  }
}

/** `settings` with each number of `floor` taken where it is higher. */
function raiseTo(settings: Settings, floor: Settings): Settings {
  const out = { ...settings };
  for (const [k, v] of Object.entries(floor)) {
    if (Number(v) > Number(out[k] ?? 0)) out[k] = v;
  }
  return out;
}
