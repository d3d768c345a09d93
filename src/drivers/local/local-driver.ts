// The local driver: every service node is a real PostgreSQL 15 cluster on
// this host (docs/architecture.md §9), cloned from a template, run as the service's own
// unprivileged OS user (docs/security.md), with TLS, JSON logs and WAL
// archiving. Each call moves a node one step towards its spec and returns
// `wait` rather than blocking while a server starts or stops; all it needs
// to know survives in files (the data directory, postmaster.pid,
// state.json), so a restarted Basin adopts the running clusters as they
// are: databases outlive the API server.

import type { SeriesSample } from '../../domain/series/catalogue.js';
import { sampleServiceSeries } from './metrics/series-sample.js';
import { type PoolerCounts, samplePoolers } from './metrics/pooler-sample.js';
import { readStatsSecret } from './endpoints/pooler-stats.js';
import { lstat, readdir, readFile, realpath } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import type { Metrics } from '../../domain/types.js';
import {
  type AllowancePolicy,
  allowanceOf,
  DEFAULT_ALLOWANCE,
  DEFAULT_RESERVE,
  MB,
  type ReservePolicy,
} from '../../domain/storage.js';
import { makeDataDir } from '../../lib/data-dir.js';
import { type Logger, silentLogger } from '../../lib/logger.js';
import {
  type BackupProgress,
  DriverError,
  type Driver,
  type FailoverView,
  type ForkParent,
  type Health,
  patroniNodeId,
  type PatroniNodeMember,
  type PatroniNodeSpec,
  type PatroniNodeView,
  type ObservedNode,
  type PrimaryEvent,
  type ReplicaSetServer,
  type ReplicaSetSpec,
  type ReplicaSetAdmission,
  type AdmittedReplicaSet,
  type ReplicaNodeSpec,
  type ServiceSpec,
  type StorageEvent,
} from '../driver.js';
import { DONE, type Progress, wait } from '../../domain/progress.js';
import type { Capabilities } from '../../domain/types.js';
import type { LogPage, LogQuery, Target } from '../../domain/logs.js';
import type { ProgressNote } from '../../domain/progress.js';
import { removeLeftBackupCgroups } from './host/cgroups/backup-cgroup.js';
import { readNodeState } from './node/node-state.js';
import { ADMIN_BOUNDS, type AdminBounds } from './node/admin.js';
import { LocalBackups, type SourceInfo } from './backups/backups.js';
import type { RemoteIdentity } from './backups/repository/remote.js';
import {
  checkConfineTools,
  detectPrivateTmp,
  isConfined,
  type PrivateTmp,
  type PrivateTmpMode,
} from './host/confine.js';
import { checkHost, pgInstall, type PgInstall } from './host-check.js';
import { readNodeLogs } from './logs/read-node-logs.js';
import { MetricsSampler } from './metrics/metrics-sampler.js';
import { KeyedLock } from './keyed-lock.js';
import { forkTask, Tasks } from './tasks.js';
import { Layout, type NodeRef } from './layout.js';
import { forgetSpawned, poolerSockets, ServicePooler } from './endpoints/pooler.js';
import { PoolerWatch } from './endpoints/pooler-watch.js';
import { adminOf, convergeNodes, namespacePorts, observeNodes } from './converge/converge-nodes.js';
import { Haproxy } from './endpoints/haproxy.js';
import { PrimaryWatch, prepareFailover } from './replication/failover.js';
import {
  convergeReplicaSet,
  dropReplicaSetSlots,
  inspectReplicaSet,
  replicaSetCounts,
} from './converge/replica-set.js';
import { ReplicaSetPooler } from './endpoints/replica-set-pooler.js';
import {
  admitPeers,
  convergeReplicaNode,
  ensureReplicaSetEndpoint,
  ensureReplicaSetSlots,
  inspectReplicaNode,
  releaseReplicaSetOnPrimary,
} from './converge/remote-replica.js';
import { isRoot, ensureTraversable, OTHERS, resolveOsUser, type OsUser } from './host/os-user.js';
import { postmasterStatus, Stopper } from './node/postmaster.js';
import { clusterProcesses, signalAll } from './host/processes.js';
import { isStandbyData, mkdirIn, nodeExists, removeTrees } from './node/node-files.js';
import { readyForkParent } from './backups/fork-parent.js';
import { checkUserTools, ensureInstallation, ServiceUsers } from './host/service-users.js';
import { type Repositories, startRepositories } from './backups/repository/repositories.js';
import { Template } from './node/template.js';
import { tightenLayout } from './host/tighten.js';
import { removeLeftCgroups, removeLeftovers } from './leftovers.js';
import { keepBounds, type NodeCgroups, startNodeCgroups } from './host/cgroups/node-cgroups.js';
import { serviceNproc, sharedMemoryBytes } from './host/cgroups/node-bounds.js';
import { type OomScores, protectedPrelude, startOomScores } from './host/cgroups/oom-scores.js';
import { OomWatch } from './host/cgroups/oom-watch.js';
import { processCounts } from './config/conf.js';
import { ensureCa } from './node/tls.js';
import { ServiceNetworks, type ServiceNetworkMode } from './network/service-networks.js';
import {
  DEFAULT_UID_RANGE,
  memoryUidAllocator,
  type AllocateUid,
  type UidRange,
} from './host/uids.js';
import { DEFAULT_RESTARTS, type RestartPolicy, stoppedByBasin } from './node/restarts.js';
import { type DiskState, StorageWatch, type StorageWatchOptions } from './storage/storage-watch.js';
import type { DriverContext } from './context.js';
import { primaryNode } from './primary-node.js';
import { ensurePatroniEndpoint } from './endpoints/patroni-endpoint.js';
import { nodePoolerRuns, stopNodePooler } from './endpoints/patroni-pooler.js';
import {
  applyPatroniNode,
  type FetchPatroniSecrets,
  inspectPatroniNode,
  nodeFiles,
  openPatroniSource,
  readyPatroniParent,
} from './patroni/patroni-node.js';
import {
  type NodePorts,
  restartNode,
  staleSettings,
  stopNode,
  switchover,
} from './patroni/node-ops.js';
import { PatroniLogTail } from './patroni/patroni-log.js';
import type { IdlePolicy } from './idle/idle-policy.js';
import { type IdleView, IdleServices } from './idle/idle-services.js';

export interface LocalDriverOptions {
  /** Basin's data directory; the driver keeps everything under <dataDir>/local. */
  dataDir: string;
  /** The host name clients connect to; server certificates are issued for it. */
  publicHost: string;
  /**
   * The CA to issue the services' certificates from, when the installation
   * has one (a host of several: its CA under the installation's, then the
   * root, in PEM); made here otherwise.
   */
  ca?: () => Promise<{ cert: string; key: string }>;
  /**
   * On a host of several: signs the keys of a service's side of its
   * repository on the repository host (backups/repository/remote.ts).
   */
  remoteIdentity?: RemoteIdentity;
  /** PostgreSQL 15 server binaries (default /usr/lib/postgresql/15/bin). */
  pgBin?: string;
  /** PostgreSQL 15 shared data (default /usr/share/postgresql/15). */
  pgShare?: string;
  /**
   * The OS user that owns the template cluster when Basin is root (default
   * postgres); services run as OS users of their own (docs/security.md).
   */
  osUser?: string;
  /** PostgreSQL's listen_addresses (default '*'). */
  listenAddresses?: string;
  /** CIDRs admitted to every service's public endpoint (default everyone). */
  publicCidrs?: string[];
  /** How often memory and CPU of the clusters are sampled (default 5 s). */
  metricsIntervalMs?: number;
  /** The uids of the services' OS users (default 2000000-2999999; uids.ts). */
  serviceUidRange?: UidRange;
  /**
   * Hands out those uids upward, never one twice: basin.ts keeps the mark
   * in the store. The default counts in memory from the range's start, for
   * tests and tools only: a restarted process would give uids again.
   */
  allocateUid?: AllocateUid;
  /**
   * Private /tmp, /var/tmp, /dev/shm and /run/lock for each service's
   * server (confine.ts): 'auto' (default) where the host allows it, 'on'
   * required (start fails without), 'off' never.
   */
  privateTmp?: PrivateTmpMode;
  /** The size of each of those private file systems, in MiB (default 1024). */
  privateTmpMb?: number;
  /**
   * The memory every `shared` node of the installation shares, in MiB
   * (default a quarter of the host's: node-bounds.ts).
   */
  sharedMemoryMb?: number;
  /**
   * A network namespace per service and read replica set, with addresses
   * from this IPv4 block (network/service-networks.ts), or 'off' (the
   * default here, for tools and driver tests; Basin's configuration gives
   * 198.18.0.0/15: --service-network).
   */
  serviceNetwork?: ServiceNetworkMode;
  /**
   * A pgBackRest repository server per new service, as an OS user of its
   * own (repository/); needs root and service networks. Off by default.
   */
  repositoryServers?: boolean;
  /**
   * Idle services suspend: a service of these environments with no client
   * connection for `afterMs` has its server stopped, and the next
   * connection wakes it (idle/). Off when absent.
   */
  idleSuspend?: IdlePolicy;
  /**
   * Each service's storage allowance and the host's reserve (default
   * DEFAULT_ALLOWANCE, DEFAULT_RESERVE: domain/storage.ts); `watch`
   * changes the storage watch's pace (tests).
   */
  storage?: {
    allowance?: AllowancePolicy;
    reserve?: ReservePolicy;
    watch?: Pick<StorageWatchOptions, 'tickMs' | 'periodMs' | 'walk'>;
  };
  log?: Logger;
  /** Bounds of Basin's administrative connections to its clusters (default ADMIN_BOUNDS; tests shorten them). */
  adminBounds?: Partial<AdminBounds>;
  /** How nodes that keep dying are restarted (default DEFAULT_RESTARTS: restarts.ts). */
  restarts?: Partial<RestartPolicy>;
  /**
   * Whether this process may still act on the host: asked by the driver's
   * own supervisors (the primaries' watch, HAProxy's restart, the storage
   * stop, the poolers' login guard, idle services' suspend and wake) before
   * they act. A leader of several Basin processes answers
   * false once its lease may have lapsed (src/engine/leadership.ts);
   * default: always.
   */
  mayAct?: () => boolean;
  /**
   * On a host of several: asks the control plane for what a node of an HA
   * service across hosts needs for its Patroni (agent/patroni-node.ts).
   */
  patroniSecrets?: FetchPatroniSecrets;
}

/** What LocalDriver.start learnt of the host (checkHost). */
interface HostFacts {
  pg: PgInstall;
  report: Awaited<ReturnType<typeof checkHost>>;
  /** The template's owner (and every service's, when Basin is not root). */
  templateUser: OsUser;
  /** Whether each service gets an OS user of its own (Basin is root). */
  perService: boolean;
}

/** What holds tenants apart on this host (LocalDriver.startIsolation). */
interface Isolation {
  installation: string;
  networks: ServiceNetworks;
  oom: OomScores;
  cgroups: NodeCgroups;
  privateTmp: PrivateTmp | undefined;
}

/** The services' and repositories' OS users (LocalDriver.startUsers). */
interface People {
  uidRange: UidRange;
  nproc: number;
  users: ServiceUsers;
  repositories: Repositories | undefined;
}

export class LocalDriver implements Driver {
  readonly name = 'local';
  readonly capabilities: Capabilities = {
    forks: true,
    haReplicas: true,
    replicaSets: true,
    pooler: true,
    replicaSetPooler: true,
  };
  private readonly log: Logger;
  private readonly locks = new KeyedLock();
  /** Each Patroni node's log, read as it grows (patroni/patroni-log.ts). */
  private readonly patroniLogs = new PatroniLogTail();
  private readonly sampler: MetricsSampler;
  private ctx: DriverContext | undefined;
  private readonly downListeners: ((serviceId: string, event: PrimaryEvent) => void)[] = [];
  private readonly storageListeners: ((event: StorageEvent) => void)[] = [];
  private readonly noteListeners: ((target: Target, note: ProgressNote) => void)[] = [];
  /** The kills at the memory bounds, told to the engine (oom-watch.ts). */
  private readonly oomWatch = new OomWatch(
    () => this.context(),
    (target, note) => {
      for (const l of this.noteListeners) l(target, note);
    },
  );
  /** The primaries of running services with standbys (failover.ts). */
  private readonly watch = new PrimaryWatch(
    () => this.context(),
    (id, event) => {
      for (const l of this.downListeners) l(id, event);
    },
    () => this.mayAct(),
  );
  /** The poolers' failed logins, per client address (pooler-watch.ts). */
  private readonly poolerWatch = new PoolerWatch(
    () => this.context(),
    undefined,
    () => this.mayAct(),
  );
  /** Idle services that suspend and wake on connect (idle/). */
  private readonly idle: IdleServices;

  constructor(private readonly options: LocalDriverOptions) {
    this.log = options.log ?? silentLogger;
    this.sampler = new MetricsSampler({ intervalMs: options.metricsIntervalMs ?? 5_000 });
    this.idle = new IdleServices({
      ctx: () => this.context(),
      // Suspending and waking act on the host: a deposed leader does neither.
      applyNow: (spec) =>
        this.mayAct()
          ? this.applyNow(spec)
          : Promise.reject(
              new DriverError('This Basin process may not act now: it does not lead.', true),
            ),
      note: (id, note) => {
        for (const l of this.noteListeners) l({ kind: 'service', id }, note);
      },
      policy: options.idleSuspend,
      log: this.log,
    });
  }

  /**
   * Checks the host (throws HostCheckError naming what is missing), prepares
   * the directories and the CA, and starts building the template in the
   * background: start stays fast, and the first create waits for the
   * template (a few seconds, once per data directory). Running clusters need
   * nothing: they are found through their postmaster.pid when asked about.
   *
   * In its steps: the host's programs → the data directory (a dead Basin's
   * leftovers swept, the CA) → the host's isolation (networks, OOM scores,
   * cgroups, modes, private /tmp) → the services' users and repositories →
   * the context (the template, the installation's proxy, the watches'
   * parts) → adopting what runs → the watches started → ready.
   */
  async start(): Promise<void> {
    const host = await this.checkHost();
    const layout = await this.prepareDataDir(host);
    const isolation = await this.startIsolation(layout);
    const people = await this.startUsers(host, layout, isolation);
    const ctx = this.makeContext(host, layout, isolation, people);
    this.ctx = ctx;
    await this.adopt(ctx);
    await this.startWatches(ctx);
    this.reportReady(host, layout, isolation, people);
  }

  /** PostgreSQL, pgBackRest and the other programs, and whether Basin may make OS users. */
  private async checkHost(): Promise<HostFacts> {
    const pg = pgInstall(this.options.pgBin, this.options.pgShare);
    const report = await checkHost(pg);
    const templateUser = resolveOsUser(this.options.osUser);
    // Only root can make users (and run PostgreSQL as them).
    const perService = isRoot();
    if (perService) checkUserTools();
    checkConfineTools();
    return { pg, report, templateUser, perService };
  }

  /** The driver's tree under the data directory, a dead Basin's leftovers gone, the CA made. */
  private async prepareDataDir({ templateUser, perService }: HostFacts): Promise<Layout> {
    makeDataDir(this.options.dataDir);
    // /proc reports real paths; so must the layout, for processes to be recognised.
    const dataDir = await realpath(resolve(this.options.dataDir));
    const layout = new Layout(dataDir);
    for (const dir of [
      layout.root,
      layout.instancesDir,
      layout.socketsDir,
      layout.archivesDir,
      layout.backupsDir,
      layout.repositoriesDir,
    ]) {
      await mkdirIn(dir, 0o711);
    }
    await ensureTraversable(layout.root, dataDir, perService ? OTHERS : templateUser);
    // createBasin holds the data directory's lock: what is staged here is a dead Basin's.
    await removeLeftovers(layout, this.log);
    await ensureCa(layout, this.options.ca);
    removeLeftBackupCgroups(layout.backupsDir);
    return layout;
  }

  /** What holds tenants apart on this host: networks, OOM scores, cgroups, modes, private /tmp. */
  private async startIsolation(layout: Layout): Promise<Isolation> {
    const installation = await ensureInstallation(layout);
    const networks = await ServiceNetworks.start({
      layout,
      installation,
      mode: this.options.serviceNetwork ?? 'off',
      log: this.log,
    });
    // Basin itself first: whether it can be protected says whether anything can.
    const oom = await startOomScores(this.log);
    const cgroups = await startNodeCgroups(
      installation,
      this.log,
      sharedMemoryBytes(totalmem(), this.options.sharedMemoryMb),
    );
    await removeLeftCgroups(layout, cgroups, this.log);
    await tightenLayout(layout);
    const privateTmp = await detectPrivateTmp(
      this.options.privateTmp ?? 'auto',
      { sizeMb: this.options.privateTmpMb ?? 1024, keep: layout.root },
      this.log,
    );
    return { installation, networks, oom, cgroups, privateTmp };
  }

  /** The services' OS users and the repositories' (with servers of their own, when on). */
  private async startUsers(
    { pg, templateUser, perService }: HostFacts,
    layout: Layout,
    { installation, networks, oom, cgroups, privateTmp }: Isolation,
  ): Promise<People> {
    const uidRange = this.options.serviceUidRange ?? DEFAULT_UID_RANGE;
    const nproc = serviceNproc(await pidMax());
    // Services' and repositories' users take their uids from one allocator.
    const allocateUid = this.options.allocateUid ?? memoryUidAllocator(uidRange);
    const users = new ServiceUsers({
      perService,
      layout,
      shared: templateUser,
      installation,
      uidRange,
      allocateUid,
      nproc,
      ...(networks.enabled ? { networks } : {}),
      log: this.log,
    });
    const repositories = await startRepositories({
      on: this.options.repositoryServers === true,
      perService,
      networks,
      users: new ServiceUsers({
        perService,
        kind: 'repository',
        layout,
        shared: templateUser,
        installation,
        uidRange,
        allocateUid,
        nproc,
        log: this.log,
      }),
      layout,
      cgroups,
      oom,
      privateTmp,
      pgbackrest: pg.pgbackrest,
      log: this.log,
    });
    return { uidRange, nproc, users, repositories };
  }

  /** What the driver's parts share (context.ts), the template and the installation's proxy in it. */
  private makeContext(
    { pg, templateUser }: HostFacts,
    layout: Layout,
    { networks, oom, cgroups, privateTmp }: Isolation,
    { users, repositories }: People,
  ): DriverContext {
    const adminOsUsers = (user: OsUser) => (isRoot() ? ['root', user.name] : [user.name]);
    const template = new Template({
      layout,
      pg,
      user: templateUser,
      adminOsUsers: adminOsUsers(templateUser),
      privateTmp,
      log: this.log,
    });
    const parts: Omit<DriverContext, 'backups'> = {
      haproxy: new Haproxy({
        layout,
        listenAddresses: this.options.listenAddresses ?? '*',
        log: this.log,
        prelude: protectedPrelude(oom),
      }),
      locks: this.locks,
      tasks: new Tasks(),
      layout,
      pg,
      users,
      template,
      privateTmp,
      stopper: new Stopper(),
      spawned: new Map(),
      unresponsive: new Map(),
      cgroups,
      oom,
      networks,
      storage: new StorageWatch({
        layout,
        reserve: this.options.storage?.reserve ?? DEFAULT_RESERVE,
        stop: (target, nodes) => this.stopForStorage(target, nodes),
        log: this.log,
        resting: (id) => this.idle.keepsAsleep(id),
        ...this.options.storage?.watch,
      }),
      allowance: (size) => allowanceOf(this.allowancePolicy, size),
      publicHost: this.options.publicHost,
      listenAddresses: this.options.listenAddresses ?? '*',
      publicCidrs: this.options.publicCidrs ?? ['0.0.0.0/0', '::/0'],
      adminOsUsers,
      adminBounds: { ...ADMIN_BOUNDS, ...this.options.adminBounds },
      restarts: { ...DEFAULT_RESTARTS, ...this.options.restarts },
      repositories,
      remoteIdentity: this.options.remoteIdentity,
      log: this.log,
    };
    return { ...parts, backups: new LocalBackups(parts) };
  }

  /**
   * The template's build started, and what runs adopted. Adopting running
   * clusters is only this: they are found by their postmaster.pid whenever
   * asked about; here they start being sampled, and held at the storage
   * level their records say.
   */
  private async adopt(ctx: DriverContext): Promise<void> {
    await ctx.template.poll().catch(() => {}); // kicks off the build; a failure resurfaces on apply
    const ids = (await readdir(ctx.layout.instancesDir)).filter((id) => ID.test(id));
    for (const id of ids) await this.track(id);
    await ctx.storage.adopt(ids);
    await this.idle.adopt(ids);
    ctx.storage.onNotice(({ target, change }) => {
      for (const l of this.storageListeners) l({ target, ...(change ? { change } : {}) });
    });
  }

  /** The background watches: usage, primaries, storage, OOM kills, poolers' logins; HAProxy. */
  private async startWatches(ctx: DriverContext): Promise<void> {
    this.sampler.start();
    this.watch.start();
    ctx.storage.start();
    this.oomWatch.start();
    this.poolerWatch.start();
    this.idle.start();
    await ctx.haproxy.supervise().catch((err: Error) => {
      this.log.error({ err: err.message }, 'could not start HAProxy');
    });
  }

  /** What this host gives the services, in Basin's log (a warning when they are not isolated). */
  private reportReady(
    { report, templateUser, perService }: HostFacts,
    layout: Layout,
    { networks, oom, cgroups, privateTmp }: Isolation,
    { uidRange, nproc, repositories }: People,
  ): void {
    if (!perService) {
      this.log.warn(
        { osUser: templateUser.name },
        `WARNING: Basin does not run as root, so every service's PostgreSQL runs as the same OS user ` +
          `(${templateUser.name}): services are NOT isolated from each other. A service's tsdbadmin ` +
          '(CREATEROLE) can grant itself pg_execute_server_program and read or change every other ' +
          "service's data, and Basin's. Run Basin as root to give each service an OS user of its own " +
          '(docs/security.md).',
      );
    }
    this.log.info(
      {
        postgres: report.postgresVersion,
        osUsers: perService
          ? `one per service, uids ${uidRange.min}-${uidRange.max}`
          : templateUser.name,
        templateUser: templateUser.name,
        privateTmp: privateTmp ? privateTmp.dirs : 'no',
        cgroups: cgroups.describe(),
        oomScoreAdj: { protected: oom.protected ?? 'not possible', tenants: oom.tenant },
        serviceNproc: perService ? nproc : 'none',
        serviceNetwork: networks.describe(),
        repositoryServers: repositories?.enabled ? 'one per new service' : 'off',
        idleSuspend: this.options.idleSuspend
          ? {
              afterMs: this.options.idleSuspend.afterMs,
              environments: this.options.idleSuspend.environments,
              ...(networks.enabled ? {} : { note: 'no service networks: nothing suspends' }),
            }
          : 'off',
        storage: describeStorage(this.allowancePolicy),
        root: layout.root,
      },
      'local driver ready',
    );
  }

  /**
   * Stops sampling. Databases keep running: they outlive the API server, and
   * the next start adopts them; with none left, the installation's network
   * table goes (network/service-networks.ts).
   */
  async close(): Promise<void> {
    this.sampler.stop();
    this.watch.stop();
    this.ctx?.storage.stop();
    this.oomWatch.stop();
    this.poolerWatch.stop();
    await this.idle.close();
    await this.ctx?.networks.closeIfUnused();
  }

  watchPrimaries(on: (serviceId: string, event: PrimaryEvent) => void): void {
    this.downListeners.push(on);
  }

  /** See storage/storage-watch.ts: changes of level, and levels not applied yet. */
  watchStorage(on: (event: StorageEvent) => void): void {
    this.storageListeners.push(on);
  }

  /** The data directory's file system and its reserve, as the storage watch last saw them. */
  disk(): DiskState | undefined {
    return this.ctx?.storage.diskState();
  }

  /**
   * The stop of the storage ladder (storage-watch.ts): every process of
   * the target's OS user at once (the writer among them), its servers
   * recorded as stopped by the driver (the failover watch takes that for
   * no death, and so do the restarts: restarts.ts), and whatever of its
   * clusters is left. Its converge does not start it again while it is
   * stopped (storage/node-storage.ts).
   */
  private async stopForStorage(target: Target, nodes: readonly number[]): Promise<void> {
    if (!this.mayAct()) return;
    const ctx = this.context();
    // The writer first, every millisecond is disk: before anything is
    // awaited, every process in its cgroups (its nodes', its pooler's and
    // its helpers': node-cgroups.ts).
    ctx.cgroups.killAllNow(target.id, nodes);
    if (target.kind === 'service') this.watch.forget(target.id);
    // Then anything else of its OS user (kill -1 as it), its servers
    // recorded as stopped by the driver, and whatever of them is left.
    const user = ctx.users.lookup(target.id);
    if (user) await ctx.users.killAllNow(user);
    const refs = await this.nodesOf(target.id);
    for (const ref of refs) {
      const pgdata = ctx.layout.pgdata(ref);
      ctx.stopper.killed(pgdata);
      signalAll(await clusterProcesses(pgdata), 'SIGKILL');
    }
    if (user) await ctx.users.killAll(user);
    // Its nodes did not die on their own: once it is under its limit, their
    // start is no crash loop's. Under the lock: a converge writes those files too.
    await this.locks.run(target.id, async () => {
      for (const ref of refs) await stoppedByBasin(ctx.layout.stateFile(ref));
    });
  }

  /** Processes killed at a memory bound (oom-watch.ts). */
  watchNotes(on: (target: Target, note: ProgressNote) => void): void {
    this.noteListeners.push(on);
  }

  /** See failover.ts: a dead primary fenced, and how far each standby got. */
  async prepareFailover(spec: ServiceSpec): Promise<FailoverView> {
    checkId(spec.serviceId);
    const ctx = this.context();
    return this.locks.run(spec.serviceId, () => prepareFailover(ctx, spec));
  }

  /** The CA certificate clients trust for sslmode=verify-full. */
  get caCertPath(): string {
    return this.context().layout.caCert;
  }

  async applyService(spec: ServiceSpec): Promise<Progress> {
    checkId(spec.serviceId);
    if (spec.source.kind === 'fork') checkId(spec.source.parentServiceId);
    // An operation works on it: its idle time starts again (idle/).
    this.idle.seen(spec);
    this.idle.busy(spec.serviceId);
    return this.locks.run(spec.serviceId, () => this.applyNow(spec));
  }

  /**
   * One step of applyService, under the service's lock. A suspended
   * service (idle/) is converged as a stopped one while its spec lets it
   * sleep (a resize writes the settings its wake starts with); one whose
   * spec no longer does (stopped, HA, a pooler) is released first, then
   * converged as its spec says.
   */
  private async applyNow(asked: ServiceSpec): Promise<Progress> {
    const ctx = this.context();
    let spec = asked;
    if (this.idle.keepsAsleep(spec.serviceId)) {
      const why = this.idle.whyAwake(spec);
      if (why === undefined) spec = { ...spec, running: false };
      else await this.idle.release(spec.serviceId, why);
    }
    // Its ports lead into its network namespace, whatever its state: no
    // other tenant's process can ever take them (network/).
    if (ctx.networks.enabled) {
      await ctx.networks.forward(spec.serviceId, { ports: namespacePorts(spec) });
    }
    // The pooler stops before its server and starts after it (pooler.ts);
    // it follows the recorded primary, so a failover re-points it here.
    const pooler = new ServicePooler(ctx, spec);
    // Stopped by its storage (storage/node-storage.ts), its pooler is too:
    // the watch's stop of every process can fall between a converge's
    // start of the node and of its pooler, which then ran on alone.
    const storageStopped = () => ctx.storage.state(spec.serviceId).level === 'stopped';
    if (!spec.running || !spec.pooler.enabled || storageStopped()) {
      const stopping = await pooler.stop(!spec.pooler.enabled);
      if (!stopping.done) return stopping;
    }
    this.watch.track(spec);
    await this.trackStorage(spec);
    const level = ctx.storage.state(spec.serviceId).level;
    const progress = await convergeNodes(ctx, spec);
    await this.track(spec.serviceId, primaryNode(spec).index);
    // A local repository left from before repository servers moves into
    // one of its own user's (repository/move.ts).
    if (progress.done && spec.running) {
      await ctx.backups.moveRepository(spec, await ctx.users.ensure(spec.serviceId));
    }
    // Its repository's server runs while it does (started with its first
    // start; started again here if it died, say at a memory bound).
    if (progress.done && spec.running && (await ctx.backups.serverOf(spec.serviceId))) {
      await ctx.repositories?.ensure(spec.serviceId);
    }
    if (progress.done) {
      // Its nodes may have been made, restored or rebuilt: measured afresh.
      ctx.storage.due(spec.serviceId);
      if (spec.running) await ctx.storage.applied(spec.serviceId, level);
    }
    if (!progress.done || !spec.running || !spec.pooler.enabled) return progress;
    if (storageStopped()) return pooler.stop(false);
    return pooler.converge(await ctx.users.ensure(spec.serviceId));
  }

  /**
   * Stops a fork's restore, if one runs, and every process of the service
   * at once (immediate shutdown: the data is going away), then every other
   * process of its OS user (what its tsdbadmin started), removes its
   * cgroups (its nodes', pooler's and helpers'), its nodes, stanza and
   * sockets, then every other file its OS user owns on the host
   * (service-users.ts), and finally the OS user. Each step is repeated safely by the next call after a crash
   * anywhere.
   */
  async deleteService(serviceId: string): Promise<Progress> {
    checkId(serviceId);
    const ctx = this.context();
    await ctx.tasks.abort(forkTask(serviceId));
    this.watch.forget(serviceId);
    ctx.storage.forget(serviceId);
    return this.locks.run(serviceId, async () => {
      // Its waker first: it listens on its namespace's host side.
      await this.idle.forget(serviceId);
      const { layout, stopper, users } = ctx;
      const refs = await this.nodesOf(serviceId);
      let waitMs = 0;
      for (const ref of refs) {
        const pgdata = layout.pgdata(ref);
        const pm = await postmasterStatus(pgdata);
        const starting = ctx.spawned.get(pgdata);
        if (pm.up) {
          waitMs = Math.max(waitMs, await stopper.step(pgdata, pm.pid, 'immediate'));
        } else if (starting && !starting.proc.exit) {
          signalAll([starting.proc.pid], 'SIGQUIT'); // not yet in postmaster.pid
          waitMs = Math.max(waitMs, 100);
        } else {
          const left = await clusterProcesses(pgdata);
          signalAll(left, 'SIGKILL');
          if (left.length > 0) waitMs = Math.max(waitMs, 100);
        }
      }
      if (waitMs > 0) return wait(waitMs, 'stopping PostgreSQL');
      // A read replica set's slots on its service's primary go before its files.
      const dropping = await dropReplicaSetSlots(ctx, serviceId);
      if (dropping) return dropping;
      await ctx.haproxy.removeService(serviceId);
      const user = users.lookup(serviceId);
      if (user && (await users.killAll(user)) > 0) {
        return wait(100, "stopping the processes of the service's OS user");
      }
      // Its repository's server, user and files (its backups), if it has
      // one: first, since a backup runs as that user (its wait next ends
      // with its processes).
      if (ctx.repositories && !(await ctx.repositories.remove(serviceId))) {
        return wait(100, "stopping the processes of the service's repository");
      }
      ctx.backups.closeSource(serviceId);
      await ctx.backups.settle(serviceId);
      // Its cgroups, by name (also of nodes whose files a crash already took).
      if (!(await ctx.cgroups.removeAll(serviceId))) {
        return wait(100, 'waiting for the processes of its cgroups to exit');
      }
      // Its network namespace, veth and ports, after its last process.
      await ctx.networks.remove(serviceId);
      for (const ref of refs) {
        stopper.forget(layout.pgdata(ref));
        ctx.spawned.delete(layout.pgdata(ref));
      }
      forgetSpawned(ctx, layout.pooler(serviceId)); // killed with its user's processes
      // The instance directory last: it is what says which nodes there were.
      // Its stanza is its repository: removing it deletes every backup.
      await removeTrees([
        ...refs.map((ref) => layout.socketDir(ref)),
        layout.socketDir({ id: serviceId, node: 0 }),
        layout.archiveDir(serviceId),
        layout.backupDir(serviceId),
        layout.instanceDir(serviceId),
      ]);
      if (user) {
        await users.removeLeftovers(user);
        // Something ran as the user meanwhile (someone outside Basin's
        // services ran a setuid file of its): kill and sweep again.
        if ((await users.killAll(user)) > 0) {
          return wait(100, "stopping the processes of the service's OS user");
        }
        await users.remove(serviceId);
      }
      this.sampler.untrack(metricsKey(serviceId));
      this.sampler.untrack(replicaSetKey(serviceId));
      if (refs.length > 0) this.log.info({ serviceId }, 'deleted service databases');
      return DONE;
    });
  }

  /** This host's node of an HA service across hosts, under Patroni (patroni/patroni-node.ts). */
  async applyPatroniNode(spec: ServiceSpec, node: PatroniNodeSpec): Promise<Progress> {
    checkId(spec.serviceId);
    const ctx = this.context();
    // Under the node's own resource's lock: its deleteService takes the same.
    return this.locks.run(patroniNodeId(spec.serviceId, node.index), () =>
      applyPatroniNode(ctx, spec, node, this.options.patroniSecrets),
    );
  }

  async applyPatroniEndpoint(spec: ServiceSpec, members: PatroniNodeMember[]): Promise<Progress> {
    checkId(spec.serviceId);
    const ctx = this.context();
    await this.locks.run(spec.serviceId, () => ensurePatroniEndpoint(ctx, spec, members));
    return DONE;
  }

  async openPatroniSource(
    spec: ServiceSpec,
    node: { index: number; port: number; apiPort: number },
  ): Promise<SourceInfo> {
    checkId(spec.serviceId);
    const ctx = this.context();
    const local = patroniNodeId(spec.serviceId, node.index);
    return this.locks.run(local, () => openPatroniSource(ctx, spec, local, node));
  }

  async readyPatroniParent(
    serviceId: string,
    node: { index: number; port: number },
    archive: boolean,
  ): Promise<ForkParent> {
    checkId(serviceId);
    const ctx = this.context();
    const local = patroniNodeId(serviceId, node.index);
    return this.locks.run(local, () => readyPatroniParent(ctx, local, node, archive === true));
  }

  async closePatroniSource(serviceId: string, index: number): Promise<void> {
    checkId(serviceId);
    this.context().backups.closeSource(patroniNodeId(serviceId, index));
  }

  /** The settings this host's node runs with that take a restart to match its YAML (patroni/node-ops.ts). */
  async stalePatroniSettings(
    serviceId: string,
    node: { index: number; port: number },
  ): Promise<string[] | null> {
    checkId(serviceId);
    return staleSettings(this.context(), patroniNodeId(serviceId, node.index), node);
  }

  /** This host's node restarted by its Patroni when it runs with stale settings (a rolling restart's step). */
  async restartPatroniNode(serviceId: string, node: NodePorts): Promise<Progress> {
    checkId(serviceId);
    const ctx = this.context();
    const local = patroniNodeId(serviceId, node.index);
    return this.locks.run(local, () => restartNode(ctx, local, node));
  }

  /** This host's node, the leader, asked by its agent to hand over to `candidate` (Patroni decides). */
  async switchoverPatroni(
    serviceId: string,
    node: NodePorts,
    candidate: string,
  ): Promise<Progress> {
    checkId(serviceId);
    if (typeof candidate !== 'string' || !/^node\d+$/.test(candidate)) {
      throw new DriverError(`Not a member's name: ${String(candidate)}.`, false);
    }
    const ctx = this.context();
    const local = patroniNodeId(serviceId, node.index);
    return this.locks.run(local, () => switchover(ctx, local, node, candidate));
  }

  /**
   * This host's node's Patroni stopped, and its PostgreSQL with it (the
   * service stopped); the service's pooler on this host first, as a
   * pooler stops before its server on one host.
   */
  async stopPatroniNode(serviceId: string, index: number): Promise<Progress> {
    checkId(serviceId);
    const ctx = this.context();
    const local = patroniNodeId(serviceId, index);
    return this.locks.run(local, async () => {
      const pooler = await stopNodePooler(ctx, local);
      return pooler.done ? stopNode(ctx, local) : pooler;
    });
  }

  async inspectPatroniNode(
    serviceId: string,
    node: { index: number; apiPort: number; pooler?: boolean; logSince?: number },
  ): Promise<PatroniNodeView> {
    checkId(serviceId);
    const ctx = this.context();
    const host = ctx.publicHost.includes(':') ? `[${ctx.publicHost}]` : ctx.publicHost;
    const local = patroniNodeId(serviceId, node.index);
    const view = await inspectPatroniNode(
      ctx,
      local,
      `node${node.index}`,
      `https://${host}:${node.apiPort}`,
    );
    // What its Patroni decided since the control plane last heard (its log
    // read as it grows: a few hundred bytes between two inspections).
    const since = typeof node.logSince === 'number' ? node.logSince : undefined;
    const events = await this.patroniLogs.events(nodeFiles(ctx, local).log, since);
    const told = events.length > 0 ? { ...view, events } : view;
    // A pooler that died is started again by the apply that its report brings.
    return node.pooler === true ? { ...told, pooler: await nodePoolerRuns(ctx, local) } : told;
  }

  /**
   * 'running' when the postmaster accepts connections; 'failed' when the
   * service should run and does not (crashed, killed, still recovering);
   * 'stopped' when it should not and does not; 'missing' without a node.
   */
  async inspectService(spec: ServiceSpec): Promise<Health> {
    checkId(spec.serviceId);
    const ctx = this.context();
    const { layout, privateTmp } = ctx;
    const primary = primaryNode(spec);
    const ref = { id: spec.serviceId, node: primary.index };
    this.watch.track(spec);
    this.idle.seen(spec);
    if (!(await nodeExists(layout, ref))) return 'missing';
    await this.trackStorage(spec);
    const pm = await postmasterStatus(layout.pgdata(ref));
    this.sampler.track(metricsKey(spec.serviceId), {
      pgdata: layout.pgdata(ref),
      pid: pm.up ? pm.pid : undefined,
    });
    // Suspended (idle/): available, its waker in front of it. Not a crash.
    if (this.idle.isAsleep(spec.serviceId)) return 'running';
    if (!pm.up) return spec.running ? 'failed' : 'stopped';
    // A server started by an older Basin, without no_new_privs or a private
    // /tmp: reported failed, so that the engine applies the spec, which
    // restarts it confined (service-node.ts).
    const inNetwork = (pid: number) => ctx.networks.holds(spec.serviceId, pid);
    if (spec.running && !(await isConfined(pm.pid, privateTmp !== undefined, inNetwork))) {
      return 'failed';
    }
    // A bound is not its health: a node outside its cgroups is moved in,
    // and the service stays READY (node-cgroups.ts).
    if (spec.running) {
      const indices = spec.nodes.length > 0 ? spec.nodes.map((n) => n.index) : [primary.index];
      await keepBounds(ctx, spec.serviceId, spec.size, processCounts(spec), indices);
    }
    if (pm.state !== 'ready') return spec.running ? 'failed' : 'running';
    // In recovery for its storage, but promoted by its own tenant: the
    // apply that 'failed' brings restarts it in recovery (service-node.ts).
    if (
      spec.running &&
      ctx.storage.state(spec.serviceId).level === 'recovery' &&
      (await readNodeState(layout.stateFile(ref))).storageRecovery &&
      !(await isStandbyData(layout.pgdata(ref)))
    ) {
      return 'failed';
    }
    // Every standby runs too, and the endpoint routes to the primary.
    if (spec.running && spec.nodes.length > 1) {
      for (const n of spec.nodes) {
        const st = await postmasterStatus(layout.pgdata({ id: spec.serviceId, node: n.index }));
        if (!st.up) return 'failed';
      }
      if (!(await ctx.haproxy.hasService(spec.serviceId))) return 'failed';
    }
    // So is its repository's server (repository/repositories.ts); a local
    // repository still to move into one is converged (repository/move.ts).
    if (
      spec.running &&
      ctx.repositories &&
      (await ctx.backups.serverOf(spec.serviceId)) &&
      (await ctx.repositories.pid(spec.serviceId)) === undefined
    ) {
      return 'failed';
    }
    if (spec.running && (await ctx.backups.moveDue(spec.serviceId))) return 'failed';
    // A pooler that died is started again by the apply that 'failed' brings.
    if (spec.running && spec.pooler.enabled) {
      const pooler = new ServicePooler(ctx, spec);
      await pooler.trimLog();
      if (!(await pooler.keepBounds())) return 'failed';
    }
    return 'running';
  }

  /** Role, timeline, WAL position and lag of each node (converge-nodes.ts). */
  async observeService(spec: ServiceSpec): Promise<ObservedNode[]> {
    checkId(spec.serviceId);
    return observeNodes(this.context(), spec);
  }

  /** A full backup with pgBackRest, in the background (backups.ts). */
  async backupService(spec: ServiceSpec, since: number): Promise<BackupProgress> {
    checkId(spec.serviceId);
    const ctx = this.context();
    // A backup keeps the service awake until it is taken; a suspended one
    // is woken for it (idle/), and sleeps again once idle after it.
    this.idle.hold(spec.serviceId);
    if (this.idle.isAsleep(spec.serviceId)) {
      return {
        done: false,
        retryAfterMs: 1_000,
        reason: 'waking the suspended service for its backup',
      };
    }
    const progress = await this.locks.run(spec.serviceId, async () => {
      const user = await ctx.users.ensure(spec.serviceId);
      return ctx.backups.backup(spec, user, since);
    });
    if (progress.done) this.idle.unhold(spec.serviceId);
    return progress;
  }

  /**
   * A backup on the repository host reads the service through its own
   * pgBackRest server: started here for it (backups.ts openSource), and
   * stopped by closeBackupSource once the backup is taken.
   */
  async openBackupSource(spec: ServiceSpec): Promise<SourceInfo> {
    checkId(spec.serviceId);
    const ctx = this.context();
    this.idle.hold(spec.serviceId);
    if (this.idle.isAsleep(spec.serviceId)) {
      throw new DriverError('waking the suspended service for its backup', true);
    }
    return this.locks.run(spec.serviceId, async () =>
      ctx.backups.openSource(spec, await ctx.users.ensure(spec.serviceId)),
    );
  }

  /**
   * A fork restored from the repository host, for the hosts driver: the
   * parent's side, on the parent's host (fork-parent.ts), under its lock.
   */
  async readyForkParent(serviceId: string, archive: boolean): Promise<ForkParent> {
    checkId(serviceId);
    const ctx = this.context();
    if (archive && this.idle.isAsleep(serviceId)) {
      // Woken (and kept awake a while) for it: the next attempt archives.
      this.idle.hold(serviceId);
      throw new DriverError('waking the suspended parent for its fork', true);
    }
    return this.locks.run(serviceId, () => readyForkParent(ctx, serviceId, archive === true));
  }

  /** Whether a fork's data is in place here (restored, recovering or open): it needs its parent no more. */
  async forkMade(serviceId: string): Promise<boolean> {
    checkId(serviceId);
    return nodeExists(this.context().layout, { id: serviceId, node: 0 });
  }

  async closeBackupSource(serviceId: string): Promise<void> {
    checkId(serviceId);
    this.context().backups.closeSource(serviceId);
    this.idle.unhold(serviceId);
  }

  async expireBackups(serviceId: string, oldestKept: string): Promise<void> {
    checkId(serviceId);
    const ctx = this.context();
    await this.locks.run(serviceId, async () => {
      const user = ctx.users.perService
        ? ctx.users.lookup(serviceId)
        : await ctx.users.ensure(serviceId);
      // pgBackRest runs in the service's network namespace, as all of its user does.
      if (user && ctx.networks.enabled) await ctx.networks.ensure(serviceId);
      if (user) await ctx.backups.expire(serviceId, user, oldestKept);
    });
  }

  /**
   * Hot standbys of the service behind one endpoint (replica-set.ts), and
   * the set's pooler (replica-set-pooler.ts): stopped before the nodes are
   * converged when it is disabled, started or updated after them otherwise.
   */
  async applyReplicaSet(spec: ReplicaSetSpec): Promise<Progress> {
    checkId(spec.replicaSetId);
    checkId(spec.serviceId);
    const ctx = this.context();
    // Its service never sleeps while it streams from it (idle/).
    this.idle.streamedFrom(spec.serviceId);
    return this.locks.run(spec.replicaSetId, async () => {
      await this.trackReplicaSetStorage(spec);
      // Its nodes' and pooler's ports lead into its namespace; its
      // connections to its service's arrive there from that one's gateway.
      if (ctx.networks.enabled) {
        await ctx.networks.forward(spec.replicaSetId, {
          ports: [...spec.nodePorts, ...(spec.pooler.port === null ? [] : [spec.pooler.port])],
          streamsFrom: spec.serviceId,
        });
      }
      if (!spec.pooler.enabled) {
        const stopping = await new ReplicaSetPooler(ctx, spec).stop(true);
        if (!stopping.done) return stopping;
      }
      const progress = await convergeReplicaSet(ctx, spec);
      if (progress.done) ctx.storage.due(spec.replicaSetId);
      const pgdata = ctx.layout.pgdata({ id: spec.replicaSetId, node: 0 });
      const pm = await postmasterStatus(pgdata);
      this.sampler.track(replicaSetKey(spec.replicaSetId), {
        pgdata,
        pid: pm.up ? pm.pid : undefined,
      });
      if (!progress.done || !spec.pooler.enabled) return progress;
      return new ReplicaSetPooler(ctx, spec).converge(await ctx.users.ensure(spec.replicaSetId));
    });
  }

  /**
   * The primary's side of a read replica set across hosts
   * (converge/remote-replica.ts): the set's addresses into the service's
   * peers (its pg_hba admits them at the service's next converge, which
   * the control plane runs next), then the role and the set's slots.
   */
  async admitReplicaSet(
    spec: ServiceSpec,
    admit: ReplicaSetAdmission,
  ): Promise<AdmittedReplicaSet> {
    checkId(spec.serviceId);
    checkId(admit.replicaSetId);
    const ctx = this.context();
    return this.locks.run(spec.serviceId, async () => {
      await admitPeers(ctx, spec.serviceId, admit);
      return ensureReplicaSetSlots(ctx, spec, admit);
    });
  }

  /** The set's slots dropped and its addresses out of the service's peers (its pg_hba at its next converge). */
  async releaseReplicaSet(spec: ServiceSpec, replicaSetId: string): Promise<Progress> {
    checkId(spec.serviceId);
    checkId(replicaSetId);
    const ctx = this.context();
    return this.locks.run(spec.serviceId, () =>
      releaseReplicaSetOnPrimary(ctx, spec, replicaSetId),
    );
  }

  /** This host's node of a read replica set across hosts, a resource of its own (`nodeId`). */
  async applyReplicaNode(nodeId: string, node: ReplicaNodeSpec): Promise<Progress> {
    checkId(nodeId);
    checkId(node.set.replicaSetId);
    const ctx = this.context();
    return this.locks.run(nodeId, () => convergeReplicaNode(ctx, nodeId, node));
  }

  async inspectReplicaNode(nodeId: string, node: ReplicaNodeSpec): Promise<Health> {
    checkId(nodeId);
    const ctx = this.context();
    return inspectReplicaNode(ctx, nodeId, node);
  }

  async applyReplicaSetEndpoint(
    spec: ReplicaSetSpec,
    servers: ReplicaSetServer[],
  ): Promise<Progress> {
    checkId(spec.replicaSetId);
    const ctx = this.context();
    await this.locks.run(spec.replicaSetId, () => ensureReplicaSetEndpoint(ctx, spec, servers));
    return DONE;
  }

  /** Its nodes stop, its slots on the primary are dropped, then everything of it goes, as a service's. */
  async deleteReplicaSet(replicaSetId: string): Promise<Progress> {
    return this.deleteService(replicaSetId);
  }

  async inspectReplicaSet(spec: ReplicaSetSpec): Promise<Health> {
    checkId(spec.replicaSetId);
    const ctx = this.context();
    this.idle.streamedFrom(spec.serviceId);
    await this.trackReplicaSetStorage(spec);
    const health = await inspectReplicaSet(ctx, spec);
    await keepBounds(
      ctx,
      spec.replicaSetId,
      spec.size,
      replicaSetCounts(spec),
      spec.nodePorts.map((_, i) => i),
    );
    // A pooler that died is started again by the converge that 'failed' brings.
    if (health === 'running' && spec.pooler.enabled) {
      const pooler = new ReplicaSetPooler(ctx, spec);
      await pooler.trimLog();
      if (!(await pooler.keepBounds())) return 'failed';
    }
    return health;
  }

  /**
   * The node's JSON log files (pgdata/log), newest first; see
   * logs/read-node-logs.ts. Only files of the data directory's owner are
   * read: the service's user can put links to anything in there. Each page
   * is bounded (logs/scan-budget.ts) and stops when `query.signal` aborts.
   */
  async readLogs(target: Target, query: LogQuery): Promise<LogPage> {
    const node = query.node ?? 0;
    // A driver that was not started (a follower of several Basin
    // processes) reads the same files: the layout is all it needs.
    const layout = this.ctx?.layout ?? new Layout(resolve(this.options.dataDir));
    // A node of an HA service across hosts (`<serviceId>n<i>`, asked by
    // the control plane for that node) keeps its data directory under
    // Patroni's files; its user's `data` directory says who may own them.
    const patroni = nodeFiles({ layout }, target.id);
    const patroniOwner = (await lstat(patroni.data).catch(() => undefined))?.uid;
    if (patroniOwner !== undefined) {
      const scope = `${target.kind}:${target.id}:patroni`;
      return readNodeLogs(join(patroni.pgdata, 'log'), query, scope, { owner: patroniOwner });
    }
    const ref = { id: target.id, node };
    // No data directory: no logs either, and -1 is nobody.
    const owner = (await lstat(layout.pgdata(ref)).catch(() => undefined))?.uid ?? -1;
    return readNodeLogs(layout.logDir(ref), query, `${target.kind}:${target.id}:${node}`, {
      owner,
    });
  }

  /**
   * The latest background sample of the service's primary (see
   * metrics/metrics-sampler.ts), with its storage, allowance and level
   * (storage/storage-watch.ts); undefined until both were taken.
   */
  metrics(target: Target): Metrics | undefined {
    const sampled = this.sampler.latest(
      target.kind === 'service' ? metricsKey(target.id) : replicaSetKey(target.id),
    );
    const view = this.ctx?.storage.view(target.id);
    if (!sampled || !view) return undefined;
    return {
      ...sampled,
      storageMb: Math.round((view.usage.data / MB) * 10) / 10,
      storageAllowanceMb: view.limits.allowance / MB,
      storageLevel: view.level,
      ...(target.kind === 'service' ? idleMetrics(this.idle.view(target.id)) : {}),
    };
  }

  async sampleSeries(spec: ServiceSpec): Promise<SeriesSample[]> {
    const ctx = this.context();
    const view = ctx.storage.view(spec.serviceId);
    const nodes = spec.nodes.map((n) => ({
      index: n.index,
      admin: adminOf(ctx, spec.serviceId, n),
    }));
    return sampleServiceSeries(
      nodes,
      this.sampler.latest(metricsKey(spec.serviceId)),
      view?.usage.data,
      spec.pooler.enabled && spec.pooler.port !== null
        ? {
            node: primaryNode(spec).index,
            read: () => this.readPooler(spec.serviceId, spec.pooler.port as number),
          }
        : undefined,
    );
  }

  async sampleReplicaSetSeries(spec: ReplicaSetSpec): Promise<SeriesSample[]> {
    const ctx = this.context();
    const id = spec.replicaSetId;
    const nodes = spec.nodePorts.map((port, index) => ({
      index,
      admin: adminOf(ctx, id, { index, role: 'standby', port }),
    }));
    return sampleServiceSeries(
      nodes,
      this.sampler.latest(replicaSetKey(id)),
      ctx.storage.view(id)?.usage.data,
      spec.pooler.enabled && spec.pooler.port !== null
        ? { node: 0, read: () => this.readPooler(id, spec.pooler.port as number) }
        : undefined,
      true,
    );
  }

  /** The pools' counts of a service's or replica set's pooler (metrics/pooler-sample.ts); undefined before its first converge. */
  private async readPooler(id: string, port: number): Promise<PoolerCounts | undefined> {
    const files = this.context().layout.pooler(id);
    const stats = await readStatsSecret(files.stats);
    if (stats === undefined) return undefined;
    const sockets = await poolerSockets(files);
    return samplePoolers(sockets.map((socketDir) => ({ socketDir, port, secret: stats.secret })));
  }

  /** Samples the service's primary with its current postmaster, if it has a node. */
  private async track(id: string, primary = 0): Promise<void> {
    const { layout } = this.context();
    const ref = { id, node: primary };
    if (!(await nodeExists(layout, ref))) return;
    const pm = await postmasterStatus(layout.pgdata(ref));
    this.sampler.track(metricsKey(id), {
      pgdata: layout.pgdata(ref),
      pid: pm.up ? pm.pid : undefined,
    });
  }

  /** The storage watch follows the service's allowance (its size's) and nodes. */
  private trackStorage(spec: ServiceSpec): Promise<void> {
    const ctx = this.context();
    return ctx.storage.track({
      target: { kind: 'service', id: spec.serviceId },
      allowance: ctx.allowance(spec.size),
      nodes: spec.nodes.length > 0 ? spec.nodes.map((n) => n.index) : [primaryNode(spec).index],
      grows: this.allowancePolicy.kind === 'perMemoryGb',
    });
  }

  /** A read replica set holds its service's data: its allowance is its service's. */
  private trackReplicaSetStorage(spec: ReplicaSetSpec): Promise<void> {
    const ctx = this.context();
    return ctx.storage.track({
      target: { kind: 'replicaSet', id: spec.replicaSetId },
      allowance: ctx.allowance(spec.primary.size),
      nodes: spec.nodePorts.map((_, i) => i),
      grows: this.allowancePolicy.kind === 'perMemoryGb',
    });
  }

  private mayAct(): boolean {
    return this.options.mayAct?.() ?? true;
  }

  private get allowancePolicy(): AllowancePolicy {
    return this.options.storage?.allowance ?? DEFAULT_ALLOWANCE;
  }

  private context(): DriverContext {
    if (!this.ctx) throw new DriverError('The local driver is not started.', false);
    return this.ctx;
  }

  private async nodesOf(id: string): Promise<NodeRef[]> {
    try {
      const names = await readdir(this.context().layout.instanceDir(id));
      return names.filter((n) => /^\d+$/.test(n)).map((n) => ({ id, node: Number(n) }));
    } catch {
      return [];
    }
  }
}

/** The host's pid_max: RLIMIT_NPROC is a share of it (node-bounds.ts). */
async function pidMax(): Promise<number> {
  const n = Number((await readFile('/proc/sys/kernel/pid_max', 'utf8').catch(() => '')).trim());
  return Number.isInteger(n) && n > 0 ? n : 32_768;
}

/** Whether a service that may suspend sleeps, as Metrics says it (idle/). */
function idleMetrics(view: IdleView | undefined): Pick<Metrics, 'suspended' | 'suspendedSince'> {
  if (!view) return {};
  return { suspended: view.suspended, ...(view.since ? { suspendedSince: view.since } : {}) };
}

const metricsKey = (serviceId: string) => `service:${serviceId}`;
const replicaSetKey = (id: string) => `replicaSet:${id}`;

/** Ids become path components: only the store's lowercase alphanumerics are accepted. */
const ID = /^[a-z0-9]{1,32}$/;
function checkId(id: string): void {
  if (!ID.test(id)) throw new DriverError(`Invalid service id ${JSON.stringify(id)}.`, false);
}

/** The storage allowance, as the `local driver ready` line says it. */
function describeStorage(policy: AllowancePolicy): string {
  const gb = (bytes: number) => `${Math.round((bytes / 1024 ** 3) * 100) / 100} GB`;
  return policy.kind === 'fixed'
    ? `an allowance of ${gb(policy.bytes)} per service`
    : `an allowance of ${gb(policy.bytesPerGb)} per GB of memory, ${gb(policy.sharedBytes)} for shared`;
}

export function createLocalDriver(options: LocalDriverOptions): LocalDriver {
  return new LocalDriver(options);
}
