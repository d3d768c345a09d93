// Feeds the metric series store (domain/series/): every `intervalMs`, each
// running service's nodes are sampled by the driver (Driver.sampleSeries),
// a few services at a time, and recorded at the time the round began. A
// round still going when the next is due makes that one skip (a hung node
// holds a round back at most the admin connection's bounds), and samples of
// services no longer stored are dropped at every round. Nothing here runs on
// a request.

import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { SeriesStore } from '../domain/series/series-store.js';
import type { Driver } from '../drivers/driver.js';
import type { Store } from '../store/store.js';
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
    },
    private readonly intervalMs: number,
  ) {}

  start(): void {
    if (this.timer !== undefined || !this.deps.driver.sampleSeries) return;
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
    const { store, driver, series, clock, log } = this.deps;
    const sample = driver.sampleSeries?.bind(driver);
    if (!sample) return;
    try {
      const at = clock();
      const services = await store.services.listAll();
      series.keepOnly(new Set(services.map((s) => s.id)));
      const specs = services.map((s) => serviceSpec(s, undefined)).filter((s) => s.running);
      let next = 0;
      const worker = async () => {
        while (next < specs.length) {
          const spec = specs[next++]!;
          try {
            series.record(spec.serviceId, at, await sample(spec));
          } catch (err) {
            log.debug({ err, serviceId: spec.serviceId }, 'series sample failed');
          }
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    } catch (err) {
      log.warn({ err }, 'series round failed');
    }
  }
}
