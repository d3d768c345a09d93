// The composition root: store, driver, engine and HTTP app, wired once.
// main.ts runs it as a server; tests build it with a temporary data directory.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type Logger as PinoLogger, type LoggerOptions, pino } from 'pino';
import { buildApp } from './app.js';
import type { Ctx } from './commands/context.js';
import { bootstrap } from './commands/admin.js';
import type { Config } from './config.js';
import type { Driver } from './drivers/driver.js';
import { createLocalDriver } from './drivers/local/local-driver.js';
import { createSimDriver } from './drivers/sim/sim-driver.js';
import { Engine } from './engine/engine.js';
import { recordingProvisioner } from './engine/network-provisioner.js';
import { type Clock, systemClock } from './lib/clock.js';
import { portIsFree } from './lib/port-probe.js';
import { type Logger, silentLogger } from './lib/logger.js';
import { openSqliteStore } from './store/sqlite/sqlite-store.js';
import type { Store } from './store/store.js';

export interface Basin {
  app: FastifyInstance;
  engine: Engine;
  store: Store;
  driver: Driver;
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
}

export async function createBasin(config: Config, options: BasinOptions = {}): Promise<Basin> {
  const clock = options.clock ?? systemClock;
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const store = openSqliteStore(join(config.dataDir, 'basin.db'));
  const logger = !options.logger
    ? undefined
    : isLogger(options.logger)
      ? options.logger
      : pino(options.logger);
  const log: Logger = logger ?? silentLogger;
  const driver = options.driver ?? createDriver(config, clock, log);
  const bootstrapped = await bootstrap(store, clock, config.bootstrapApiKey);

  // The engine needs the app's logger and the commands need the engine's kick.
  const engineRef: { current?: Engine } = {};
  const ctx: Ctx = {
    store,
    driver,
    clock,
    settings: {
      regions: config.regions,
      defaultRegion: config.defaultRegion,
      sizes: config.sizes,
      portRange: config.portRange,
    },
    kick: () => engineRef.current?.kick(),
    // Sim endpoints are not real; the local driver's are ports on this host.
    portUsable: config.driver === 'local' ? portIsFree : async () => true,
  };
  const app = await buildApp({
    deps: {
      ctx,
      present: {
        publicHost: config.publicHost,
        volumeType: driver.name === 'sim' ? 'sim' : 'local',
      },
    },
    bodyLimitBytes: config.bodyLimitBytes,
    loggerInstance: logger,
    rateLimits: config.rateLimits,
    https: options.https ?? null,
  });
  const engine = new Engine({ store, driver, clock, provisioner: recordingProvisioner }, log, {
    reconcileIntervalMs: config.reconcileIntervalMs,
  });
  engineRef.current = engine;
  await driver.start();
  await engine.start();

  return {
    app,
    engine,
    store,
    driver,
    bootstrapped,
    async close() {
      await app.close();
      await engine.close();
      await driver.close();
      store.close();
    },
  };
}

function isLogger(l: PinoLogger | LoggerOptions): l is PinoLogger {
  return typeof (l as PinoLogger).child === 'function';
}

function createDriver(config: Config, clock: Clock, log: Logger): Driver {
  switch (config.driver) {
    case 'sim':
      return createSimDriver({ delayMs: config.simDelayMs, clock });
    case 'local':
      return createLocalDriver({ dataDir: config.dataDir, publicHost: config.publicHost, log });
  }
}
