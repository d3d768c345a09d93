// The composition root: store, driver, engine and HTTP app, wired once.
// main.ts runs it as a server; tests build it with a temporary data directory.

import type { FastifyInstance } from 'fastify';
import { fileURLToPath } from 'node:url';
import { type Logger as PinoLogger, type LoggerOptions, pino } from 'pino';
import type { ConsoleOptions } from './api/console.js';
import { buildApp } from './app.js';
import type { Ctx } from './commands/context.js';
import { bootstrap } from './commands/admin.js';
import type { Config } from './config.js';
import type { Driver } from './drivers/driver.js';
import { Layout } from './drivers/local/layout.js';
import { etcdHealth } from './hosts/etcd-cluster.js';
import { revokeServiceEtcd } from './hosts/etcd-service-identity.js';
import { serviceSecret } from './hosts/service-secrets.js';
import { controlPlaneIdentity, installationCa } from './hosts/installation-ca.js';
import { Engine, type EngineOptions } from './engine/engine.js';
import { leaderDriver } from './engine/leader-driver.js';
import { serviceSpec } from './engine/specs.js';
import { Leadership, type LeadershipOptions } from './engine/leadership.js';
import { SeriesCollector } from './engine/series-collector.js';
import { SharedUsage, usageFromRounds } from './engine/shared-usage.js';
import { SeriesStore } from './domain/series/series-store.js';
import { type NetworkProvisioner, recordingProvisioner } from './engine/network-provisioner.js';
import { type Clock, systemClock } from './lib/clock.js';
import { secureDataDir } from './lib/data-dir.js';
import { lockDataDir } from './lib/data-dir-lock.js';
import { fenceHolder } from './lib/leader-process.js';
import { portIsFree } from './lib/port-probe.js';
import { type Logger, silentLogger } from './lib/logger.js';
import { BasinMetrics } from './metrics/basin-metrics.js';
import { openStore } from './open-store.js';
import { FencedError, type Store } from './store/store.js';

export interface Basin {
  app: FastifyInstance;
  engine: Engine;
  store: Store;
  driver: Driver;
  /** The Prometheus series (metrics/); main.ts serves them where --metrics-listen says. */
  metrics: BasinMetrics;
  /** The metric series store and what fills it (tests record into the one, or run a round of the other). */
  series: SeriesStore;
  collector: SeriesCollector;
  /** Set when an empty data directory was bootstrapped: show it once. */
  bootstrapped: Awaited<ReturnType<typeof bootstrap>>;
  close(): Promise<void>;
}

export interface BasinOptions {
  clock?: Clock;
  driver?: Driver;
  /**
   * Basin's logger (main.ts: lib/logger.ts's createServerLog), or pino
   * options for one; no logging when absent.
   */
  logger?: PinoLogger | LoggerOptions;
  https?: { cert: string; key: string } | null;
  /** Engine settings beyond the configuration (tests: retry policy, leases). */
  engine?: Partial<EngineOptions>;
  /** Builds VPC peerings (default: recordingProvisioner, which records them). */
  provisioner?: NetworkProvisioner;
  /**
   * With a PostgreSQL store: called (synchronously) when this Basin led and
   * lost leadership; it has stopped acting. main.ts exits.
   */
  onLeadershipLost?: (reason: string) => void;
  /** The leadership's lease and polling (tests). */
  leadership?: LeadershipOptions;
}

export async function createBasin(config: Config, options: BasinOptions = {}): Promise<Basin> {
  const clock = options.clock ?? systemClock;
  const logger = !options.logger
    ? undefined
    : isLogger(options.logger)
      ? options.logger
      : pino(options.logger);
  const log: Logger = logger ?? silentLogger;
  // Before the store opens: its files (and anything else there) become
  // Basin's alone, whatever an older Basin left. The local driver's tree
  // keeps its own modes (the driver sets them).
  secureDataDir(config.dataDir, { ownModes: ['local'], log });
  // Held until close (or the process's end): a second Basin here is refused.
  // Basins that share a PostgreSQL store share the data directory too (on
  // one host): only their leader acts in it (engine/leadership.ts).
  const lock = config.storeUrl === null ? lockDataDir(config.dataDir) : { release() {} };
  try {
    return await assemble(config, options, { clock, logger, log, release: () => lock.release() });
  } catch (err) {
    lock.release();
    throw err;
  }
}

async function assemble(
  config: Config,
  options: BasinOptions,
  parts: { clock: Clock; logger: PinoLogger | undefined; log: Logger; release: () => void },
): Promise<Basin> {
  const { clock, logger, log } = parts;
  const { store } = await openStore(config);
  // With a PostgreSQL store, several Basins may serve: one leads
  // (engine/leadership.ts), and what it runs writes through a store fenced
  // by its term. Alone (SQLite), this Basin simply leads, unfenced.
  const shared = config.storeUrl !== null;
  const lead: { store: Store; mayAct: () => boolean; term?: number } = {
    store,
    mayAct: () => !shared,
  };
  const driver = options.driver ?? (await createDriver(config, clock, log, store, lead));
  await driver.prime?.();
  const bootstrapped = await bootstrap(store, clock, config.bootstrapApiKey);

  // The engine needs the app's logger and the commands need the engine's kick.
  const engineRef: { current?: Engine } = {};
  // The metric series, in memory (docs/decisions.md, "Metric series").
  const series = new SeriesStore(config.seriesIntervalMs);
  // Several processes: usage and series come from the leader's rounds in
  // the store, in every process alike (engine/shared-usage.ts).
  const usage = shared && store.usage ? new SharedUsage(series) : undefined;
  if (usage) await store.usage?.follow((round) => usage.take(round));
  const apiDriver = usage ? usageFromRounds(driver, usage) : driver;
  const ctx: Ctx = {
    series,
    store,
    driver: apiDriver,
    clock,
    settings: {
      regions: config.regions,
      defaultRegion: config.defaultRegion,
      sizes: config.sizes,
      portRange: config.portRange,
      adminEmail: config.adminEmail,
    },
    kick: () => engineRef.current?.kick(),
    // Sim endpoints are not real; the local driver's are ports on this host.
    portUsable: config.driver === 'local' ? portIsFree : async () => true,
  };
  const metrics = new BasinMetrics({ store, driver: apiDriver, clock, series });
  const app = await buildApp({
    metrics,
    deps: {
      ctx,
      present: {
        publicHost: config.publicHost,
        serviceHostnames: config.serviceHostnames,
        volumeType: driver.name === 'sim' ? 'sim' : 'local',
        endpointHost: (id) => driver.endpointHost?.(id),
        serviceTypeName: config.serviceTypeName,
      },
    },
    bodyLimitBytes: config.bodyLimitBytes,
    http: config.http,
    loggerInstance: logger,
    rateLimits: config.rateLimits,
    https: options.https ?? null,
    webConsole: config.console ? webConsole(config, driver) : null,
  });
  const backups = { scheduleMs: config.backupScheduleMs, windowMs: config.pitrWindowMs };
  const makeEngine = (engineStore: Store, engineDriver: Driver) =>
    new Engine(
      {
        store: engineStore,
        driver: engineDriver,
        clock,
        provisioner: options.provisioner ?? recordingProvisioner,
        backups,
      },
      log,
      {
        reconcileIntervalMs: config.reconcileIntervalMs,
        slots: config.engineSlots,
        projectSlots: config.engineProjectSlots,
        drainTimeoutMs: config.drainTimeoutMs,
        operationTimeoutMs: config.operationTimeoutMs,
        retry: { maxAttempts: config.operationMaxAttempts, maxWaitMs: config.operationMaxWaitMs },
        observer: metrics.operationObserver,
        // Every other lease holder is an engine of an earlier term, fenced
        // now: its work resumes here at once (docs/decisions.md).
        ...(shared ? { isDeadWorker: () => true } : {}),
        ...options.engine,
      },
    );
  const collector = new SeriesCollector(
    {
      store,
      driver,
      series,
      clock,
      log,
      // The leader's store, fenced by its term: a deposed leader publishes nothing.
      ...(usage
        ? { publish: (round) => lead.store.usage?.publish(round) ?? Promise.resolve() }
        : {}),
    },
    config.seriesIntervalMs,
  );
  let engine = makeEngine(store, driver);
  const startLeading = async () => {
    await driver.start();
    await engine.start();
    collector.start();
  };
  const leadership = shared
    ? followTheLeader(store, log, {
        async lead(term, mayAct, fenced) {
          lead.term = term;
          lead.mayAct = mayAct;
          lead.store = fenced;
          engine = makeEngine(fenced, leaderDriver(driver, mayAct));
          engineRef.current = engine;
          // Any process may queue an operation: its NOTIFY wakes this engine.
          store.watchQueue?.(() => engine.kick());
          await startLeading();
          log.info({ term }, 'leader: driver, engine and reconciler started');
        },
        lost(reason) {
          // It takes no more work (what runs is refused by the guard and
          // the fence); the driver's databases and files are left as they
          // are, for the new leader. main.ts exits.
          void engine.close();
          options.onLeadershipLost?.(reason);
        },
        ...(options.leadership ? { options: options.leadership } : {}),
      })
    : undefined;
  engineRef.current = engine;
  if (leadership) leadership.start();
  else await startLeading();

  return {
    app,
    get engine() {
      return engine;
    },
    store,
    driver,
    metrics,
    series,
    collector,
    bootstrapped,
    async close() {
      await collector.stop();
      await app.close();
      await engine.close();
      await driver.close();
      await leadership?.close();
      store.close();
      parts.release();
    },
  };
}

/**
 * The leadership of a shared store (engine/leadership.ts): `lead` gets the
 * guard and the store fenced by the term, whose FencedError (a write of a
 * deposed leader) loses leadership at once; `lost` is told either way.
 */
function followTheLeader(
  store: Store,
  log: Logger,
  role: {
    lead(term: number, mayAct: () => boolean, fenced: Store): Promise<void>;
    lost(reason: string): void;
    options?: LeadershipOptions;
  },
): Leadership {
  const leadership: Leadership = new Leadership(
    store.leadership,
    {
      lead: (term) => {
        const fenced = store.fenced(term);
        const guarded: Store = {
          ...fenced,
          transaction: (fn) =>
            fenced.transaction(fn).catch((err: unknown) => {
              if (err instanceof FencedError) leadership.fenced(err.term, err.current);
              throw err;
            }),
        };
        return role.lead(term, () => leadership.mayAct(), guarded);
      },
      lost: (_term, reason) => role.lost(reason),
    },
    log,
    // A former leader on this host is killed before this one acts (its
    // step under way cannot carry on beside ours); tests may replace it.
    { fence: fenceHolder, ...role.options },
  );
  return leadership;
}

/**
 * The console Vite built beside this file (dist/console/, next to
 * dist/basin.js; run from src/, there is none and `/` says so), and what its
 * Create form offers: the installation's catalogue.
 */
function webConsole(config: Config, driver: Driver): ConsoleOptions {
  return {
    dir: fileURLToPath(new URL('./console/', import.meta.url)),
    installation: {
      regions: config.regions,
      defaultRegion: config.defaultRegion,
      sizes: config.sizes.map((s) => (s.shared ? 'shared' : `${s.cpuMillis}m/${s.memoryGbs}GB`)),
      pitrWindowMs: config.pitrWindowMs,
      driver: driver.name,
    },
    caCertificatePath: driver.name === 'local' ? new Layout(config.dataDir).caCert : null,
  };
}

function isLogger(l: PinoLogger | LoggerOptions): l is PinoLogger {
  return typeof (l as PinoLogger).child === 'function';
}

/**
 * The driver `--driver` names, its modules loaded only then: the local
 * driver is half of Basin's modules (and `yaml`, `pg`), which a Basin on the
 * sim or hosts driver never runs (docs/architecture.md §6).
 */
async function createDriver(
  config: Config,
  clock: Clock,
  log: Logger,
  store: Store,
  lead: { store: Store; mayAct: () => boolean; term?: number },
): Promise<Driver> {
  switch (config.driver) {
    case 'sim': {
      const { createSimDriver } = await import('./drivers/sim/sim-driver.js');
      return createSimDriver({ delayMs: config.simDelayMs, clock });
    }
    case 'local': {
      const [{ createLocalDriver }, { localDriverOptions }] = await Promise.all([
        import('./drivers/local/local-driver.js'),
        import('./local-driver-options.js'),
      ]);
      return createLocalDriver(
        localDriverOptions(config, {
          // The high-water mark of service uids lives in the store, so that
          // no uid is given twice, across restarts too (docs/security.md).
          // (The leader's store, fenced by its term, when several Basins share it.)
          allocateUid: () =>
            lead.store.transaction((tx) =>
              tx.counters.next('service-uid', config.serviceUidRange.min),
            ),
          mayAct: () => lead.mayAct(),
          log,
        }),
      );
    }
    case 'hosts': {
      const { createHostsDriver } = await import('./drivers/hosts/hosts-driver.js');
      // The installation's CA and the control plane's certificate do not
      // change once made (no rotation yet): read once, not at every call to
      // a host (two reads of the store and a certificate parsed, each call;
      // the reconciler calls every host of every HA service each round).
      // A failed read is tried again at the next call.
      let identity: Promise<{ cert: string; key: string; ca: string }> | undefined;
      const readIdentity = async () => {
        const ca = await installationCa(store);
        return { ...(await controlPlaneIdentity(store, ca)), ca: ca.cert };
      };
      // Placements are the leader's writes (its engine places services): fenced too.
      return createHostsDriver({
        hosts: () => store.hosts.list(),
        placements: {
          list: () => store.placements.list(),
          get: (id) => store.placements.get(id),
          put: (p) => lead.store.transaction((tx) => tx.placements.put(p)),
          remove: (id) => lead.store.transaction((tx) => tx.placements.remove(id)),
        },
        identity: () =>
          (identity ??= readIdentity().catch((err: unknown) => {
            identity = undefined;
            throw err;
          })),
        serviceSpec: async (id) => {
          const svc = await store.services.get(id);
          if (!svc) return undefined;
          const vpc = svc.vpcId === null ? undefined : await store.vpcs.get(svc.vpcId);
          return serviceSpec(svc, vpc);
        },
        forksBeingMade: async (id) =>
          (await store.services.listAll())
            .filter(
              (s) =>
                s.forkedFrom?.serviceId === id &&
                (s.status === 'QUEUED' || s.status === 'CONFIGURING'),
            )
            .map((s) => s.id),
        hasBackup: async (id) => (await store.backups.listByService(id)).length > 0,
        // Not a service being deleted: its set's delete leaves it alone (no converge).
        replicaSetService: async (id) => {
          const rs = await store.replicaSets.get(id);
          const svc = rs && (await store.services.get(rs.serviceId));
          return svc && svc.status !== 'DELETING' ? svc.id : undefined;
        },
        replicaSetsOf: async (id) => (await store.replicaSets.listByService(id)).map((r) => r.id),
        replicationSecret: (id) => serviceSecret(store, id, 'replication'),
        lostAfterMs: config.hostLostAfterMs,
        restoreLost: config.restoreLostServices,
        clock,
        log,
        // Patroni elects a leader only with etcd's quorum (an HA service's 503 without it).
        etcdQuorum: async () => (await etcdHealth(store).catch(() => null))?.quorum ?? false,
        // A deleted HA service's etcd user and keys.
        forgetService: (serviceId) => revokeServiceEtcd(store, serviceId),
        term: () => lead.term,
      });
    }
  }
}
