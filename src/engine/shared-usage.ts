// Usage as every process of a shared store answers it (several Basin
// processes, docs/decisions.md "Several processes"): only the leader runs
// the driver, whose samples live in its memory, so its series collector
// publishes each round (Store.usage, store/postgres/usage-rounds.ts) instead
// of recording it, and every process, the leader too, takes the rounds from
// the store: the metric series it records, and the latest usage of each
// service and replica set, which its API answers instead of the driver's
// (the GET of a service, /metrics, Prometheus). So each process answers the
// same, from the same round, within the notification's delay; and a process
// that starts, or takes over, has the day of rounds the store keeps.

import { deepFreeze } from '../lib/freeze.js';
import type { SeriesStore } from '../domain/series/series-store.js';
import type { Metrics } from '../domain/types.js';
import type { Target } from '../domain/logs.js';
import type { Driver } from '../drivers/driver.js';
import type { UsageRound } from '../store/store.js';

/** The key of a target's usage in a round. */
export const usageKey = (t: Target): string => `${t.kind}:${t.id}`;

export class SharedUsage {
  private latest: Readonly<Record<string, Metrics>> = {};

  constructor(private readonly series: SeriesStore) {}

  /** A round read from the store, in the order they were published. */
  take(round: UsageRound): void {
    this.series.keepOnly(new Set(round.keep));
    for (const [id, samples] of Object.entries(round.series)) {
      this.series.record(id, round.at, samples);
    }
    // Frozen, and the same objects until the next round: the presented
    // body of a polled service is reused while they are (api/presented-cache.ts).
    this.latest = deepFreeze(round.metrics);
  }

  metrics(target: Target): Metrics | undefined {
    return this.latest[usageKey(target)];
  }
}

/** `driver` for the API: its usage from the rounds, everything else its own. */
export function usageFromRounds(driver: Driver, usage: SharedUsage): Driver {
  const metrics = (target: Target) => usage.metrics(target);
  return new Proxy(driver, {
    get(target, prop) {
      if (prop === 'metrics') return metrics;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
    },
  });
}
