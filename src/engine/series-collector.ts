// Feeds the metric series store (domain/series/): every `intervalMs`, each
// running service's nodes are sampled by the driver (Driver.sampleSeries),
// a few services at a time, and recorded at the time the round began. A
// round still going when the next is due makes that one skip (a hung node
// holds a round back at most the admin connection's bounds), and samples of
// services no longer stored are dropped at every round. Nothing here runs on
// a request. With a store several processes share, the round is published
// instead (with each service's and replica set's latest usage), and every
// process records it from there (shared-usage.ts).

import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { SeriesStore } from '../domain/series/series-store.js';
import type { Driver } from '../drivers/driver.js';
import type { SeriesSample } from '../domain/series/catalogue.js';
import type { Metrics } from '../domain/types.js';
import type { Store, UsageRound } from '../store/store.js';
import { usageKey } from './shared-usage.js';
import { serviceSpec } from './specs.js';

/** Services sampled at once: each costs one admin connection per node. */
const CONCURRENCY = 8;

export class SeriesCollector {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;

  constructor(
    private readonly deps: {
      store: Store;
      driver: Driver;
      series: SeriesStore;
      clock: Clock;
      log: Logger;
      /** Several processes: the round goes to the store (Store.usage), not to `series`. */
      publish?: (round: UsageRound) => Promise<void>;
    },
    private readonly intervalMs: number,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    if (!this.deps.driver.sampleSeries && !this.deps.publish) return;
    this.timer = setInterval(() => void this.collect(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.round;
  }

  /** One round now, unless one is under way (tests and the timer). */
  collect(): Promise<void> {
    return (this.round ??= this.sampleAll().finally(() => (this.round = undefined)));
  }

  private async sampleAll(): Promise<void> {
    const { store, driver, series, clock, log, publish } = this.deps;
    const sample = driver.sampleSeries?.bind(driver);
    if (!sample && !publish) return;
    try {
      const at = clock();
      const services = await store.services.listAll();
      const keep = services.map((s) => s.id);
      if (!publish) series.keepOnly(new Set(keep));
      const specs = sample
        ? services.map((s) => serviceSpec(s, undefined)).filter((s) => s.running)
        : [];
      const sampled: Record<string, readonly SeriesSample[]> = {};
      let next = 0;
      const worker = async () => {
        while (next < specs.length && sample) {
          const spec = specs[next++]!;
          try {
            const samples = await sample(spec);
            if (publish) sampled[spec.serviceId] = samples;
            else series.record(spec.serviceId, at, samples);
          } catch (err) {
            log.debug({ err, serviceId: spec.serviceId }, 'series sample failed');
          }
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      if (publish) {
        const metrics: Record<string, Metrics> = {};
        const targets = [
          ...services.map((s) => ({ kind: 'service' as const, id: s.id })),
          ...(await store.replicaSets.listAll()).map((r) => ({
            kind: 'replicaSet' as const,
            id: r.id,
          })),
        ];
        for (const t of targets) {
          const m = driver.metrics(t);
          if (m) metrics[usageKey(t)] = m;
        }
        await publish({ at, keep, metrics, series: sampled });
      }
    } catch (err) {
      log.warn({ err }, 'series round failed');
    }
  }
}
