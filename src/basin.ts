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
import { createLocalDriver } from './drivers/local/local-driver.js';
import { createHostsDriver } from './drivers/hosts/hosts-driver.js';
import { createSimDriver } from './drivers/sim/sim-driver.js';
import { DEFAULT_HOST_LOST_AFTER_MS } from './domain/hosts.js';
import { controlPlaneIdentity, installationCa } from './hosts/installation-ca.js';
import { Engine, type EngineOptions } from './engine/engine.js';
import { SeriesCollector } from './engine/series-collector.js';
import { SeriesStore } from './domain/series/series-store.js';
import { type NetworkProvisioner, recordingProvisioner } from './engine/network-provisioner.js';
import { type Clock, systemClock } from './lib/clock.js';
import { secureDataDir } from './lib/data-dir.js';
import { lockDataDir } from './lib/data-dir-lock.js';
import { portIsFree } from './lib/port-probe.js';
import { type Logger, silentLogger } from './lib/logger.js';
import { BasinMetrics } from './metrics/basin-metrics.js';
import { localDriverOptions } from './local-driver-options.js';
import { openStore } from './open-store.js';
import type { Store } from './store/store.js';

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
  const lock = lockDataDir(config.dataDir);
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
  const driver = options.driver ?? createDriver(config, clock, log, store);
  const bootstrapped = await bootstrap(store, clock, config.bootstrapApiKey);

  // The engine needs the app's logger and the commands need the engine's kick.
  const engineRef: { current?: Engine } = {};
  // The metric series, in memory (docs/decisions.md, "Metric series").
  const series = new SeriesStore(config.seriesIntervalMs);
  const ctx: Ctx = {
    series,
    store,
    driver,
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
  const metrics = new BasinMetrics({ store, driver, clock, series });
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
  const engine = new Engine(
    { store, driver, clock, provisioner: options.provisioner ?? recordingProvisioner, backups },
    log,
    {
      reconcileIntervalMs: config.reconcileIntervalMs,
      slots: config.engineSlots,
      projectSlots: config.engineProjectSlots,
      drainTimeoutMs: config.drainTimeoutMs,
      operationTimeoutMs: config.operationTimeoutMs,
      retry: { maxAttempts: config.operationMaxAttempts, maxWaitMs: config.operationMaxWaitMs },
      observer: metrics.operationObserver,
      ...options.engine,
    },
  );
  engineRef.current = engine;
  const collector = new SeriesCollector(
    { store, driver, series, clock, log },
    config.seriesIntervalMs,
  );
  await driver.start();
  await engine.start();
  collector.start();

  return {
    app,
    engine,
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
      store.close();
      parts.release();
    },
  };
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

function createDriver(config: Config, clock: Clock, log: Logger, store: Store): Driver {
  switch (config.driver) {
    case 'sim':
      return createSimDriver({ delayMs: config.simDelayMs, clock });
    case 'local':
      return createLocalDriver(
        localDriverOptions(config, {
          // The high-water mark of service uids lives in the store, so that
          // no uid is given twice, across restarts too (docs/security.md).
          allocateUid: () =>
            store.transaction((tx) => tx.counters.next('service-uid', config.serviceUidRange.min)),
          log,
        }),
      );
    case 'hosts':
      return createHostsDriver({
        hosts: () => store.hosts.list(),
        placements: {
          list: () => store.placements.list(),
          get: (id) => store.placements.get(id),
          put: (p) => store.transaction((tx) => tx.placements.put(p)),
          remove: (id) => store.transaction((tx) => tx.placements.remove(id)),
        },
        identity: async () => {
          const ca = await installationCa(store);
          return { ...(await controlPlaneIdentity(store, ca)), ca: ca.cert };
        },
        lostAfterMs: DEFAULT_HOST_LOST_AFTER_MS,
        clock,
        log,
      });
  }
}
