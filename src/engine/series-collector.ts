// Feeds the metric series store (domain/series/): every `intervalMs`, each
// running service's nodes are sampled by the driver (Driver.sampleSeries),
// and each of its read replica sets' (Driver.sampleReplicaSetSeries, kept
// under the set's id, which the series API takes as it takes a service's),
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
import { replicaSetSpec, serviceSpec } from './specs.js';
import type { SeriesSample } from '../domain/series/catalogue.js';

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
      const replicaSets = driver.sampleReplicaSetSeries ? await store.replicaSets.listAll() : [];
      series.keepOnly(new Set([...services, ...replicaSets].map((r) => r.id)));
      const byId = new Map(services.map((s) => [s.id, s]));
      // What to sample: each running service, and each replica set of one.
      const targets: { id: string; take: () => Promise<SeriesSample[]> }[] = [];
      for (const s of services) {
        const spec = serviceSpec(s, undefined);
        if (spec.running) targets.push({ id: s.id, take: () => sample(spec) });
      }
      const sampleSet = driver.sampleReplicaSetSeries?.bind(driver);
      for (const rs of replicaSets) {
        const primary = byId.get(rs.serviceId);
        if (!sampleSet || !primary || !serviceSpec(primary, undefined).running) continue;
        const spec = replicaSetSpec(rs, primary, undefined);
        targets.push({ id: rs.id, take: () => sampleSet(spec) });
      }
      let next = 0;
      const worker = async () => {
        while (next < targets.length) {
          const target = targets[next++]!;
          try {
            series.record(target.id, at, await target.take());
          } catch (err) {
            log.debug({ err, id: target.id }, 'series sample failed');
          }
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    } catch (err) {
      log.warn({ err }, 'series round failed');
    }
  }
}
