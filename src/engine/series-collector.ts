// Feeds the metric series store (domain/series/): every `intervalMs`, each
// running service's nodes are sampled by the driver (Driver.sampleSeries),
// and each of its read replica sets' (Driver.sampleReplicaSetSeries, kept
// under the set's id, which the series API takes as it takes a service's),
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
import type { Store, UsageRound } from '../store/store.js';
import { replicaSetSpec, serviceSpec } from './specs.js';
import type { SeriesSample } from '../domain/series/catalogue.js';
import type { Metrics } from '../domain/types.js';
import { usageKey } from './shared-usage.js';

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
      // Published rounds carry every replica set's usage too.
      const replicaSets =
        driver.sampleReplicaSetSeries || publish ? await store.replicaSets.listAll() : [];
      const keep = [...services, ...replicaSets].map((r) => r.id);
      if (!publish) series.keepOnly(new Set(keep));
      const byId = new Map(services.map((s) => [s.id, s]));
      // What to sample: each running service, and each replica set of one.
      const targets: { id: string; take: () => Promise<SeriesSample[]> }[] = [];
      for (const s of services) {
        const spec = serviceSpec(s, undefined);
        if (sample && spec.running) targets.push({ id: s.id, take: () => sample(spec) });
      }
      const sampleSet = driver.sampleReplicaSetSeries?.bind(driver);
      for (const rs of replicaSets) {
        const primary = byId.get(rs.serviceId);
        if (!sampleSet || !primary || !serviceSpec(primary, undefined).running) continue;
        const spec = replicaSetSpec(rs, primary, undefined);
        targets.push({ id: rs.id, take: () => sampleSet(spec) });
      }
      const sampled: Record<string, readonly SeriesSample[]> = {};
      let next = 0;
      const worker = async () => {
        while (next < targets.length) {
          const target = targets[next++]!;
          try {
            const samples = await target.take();
            if (publish) sampled[target.id] = samples;
            else series.record(target.id, at, samples);
          } catch (err) {
            log.debug({ err, id: target.id }, 'series sample failed');
          }
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      if (publish) {
        const metrics: Record<string, Metrics> = {};
        const usageOf = [
          ...services.map((s) => ({ kind: 'service' as const, id: s.id })),
          ...replicaSets.map((r) => ({ kind: 'replicaSet' as const, id: r.id })),
        ];
        for (const t of usageOf) {
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
