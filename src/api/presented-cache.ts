// Presented services, reused while everything they are made of is the same.
// A client polling its service gets, from the read view (Store.readView), the
// very same frozen service and replica set objects for as long as nothing is
// committed; only the metrics move (sampled every few seconds). So the body,
// and its JSON (see serializers.ts), are made once per service and metrics
// reading, and answered again while both are unchanged.
//
// One instance per app (made in app.ts), shared by the service routes and
// the fast lane (polling-fast-lane.ts): both answer a poll with the same
// body object, hence the same kept JSON.
//
// Keyed by the service object in a WeakMap: an entry lives as long as the
// read view caches that service, and a service read after a commit is a new
// object, hence a new entry. Objects that are not frozen (read outside a read
// view, so possibly changed in place) are presented afresh every time.

import type { Metrics, ReplicaSet, Service } from '../domain/types.js';
import type { ReadView } from '../store/store.js';
import { type PresentOptions, presentService } from './presenters.js';
import { immutableBody } from './serializers.js';

type ServiceBody = ReturnType<typeof presentService>;

interface Entry {
  replicaSets: readonly ReplicaSet[];
  metrics: Metrics | undefined;
  body: ServiceBody;
}

export class PresentedServices {
  private readonly entries = new WeakMap<Service, Entry>();

  /**
   * `options`: the presentation settings, fixed for the life of the app;
   * `metricsOf`: the driver's current metrics of a service.
   */
  constructor(
    private readonly options: Readonly<Omit<PresentOptions, 'metrics'>>,
    private readonly metricsOf: (svc: Service) => Metrics | undefined,
  ) {}

  /** A service read from a GET's read view: its replica sets from the same view, its metrics now. */
  read(svc: Service, view: Pick<ReadView, 'replicaSets'>): ServiceBody {
    return this.present(svc, view.replicaSets.listByService(svc.id), this.metricsOf(svc));
  }

  /** presentService(svc, replicaSets, {...options, metrics}), reused while its inputs are unchanged. */
  present(
    svc: Service,
    replicaSets: readonly ReplicaSet[],
    metrics: Metrics | undefined,
  ): ServiceBody {
    if (!Object.isFrozen(svc) || !Object.isFrozen(replicaSets)) {
      return presentService(svc, replicaSets, { ...this.options, metrics });
    }
    const entry = this.entries.get(svc);
    if (
      entry !== undefined &&
      entry.replicaSets === replicaSets &&
      sameMetrics(entry.metrics, metrics)
    ) {
      return entry.body;
    }
    // A copy, unless frozen (the sim's answers are): a driver may change its own object later.
    const kept = metrics && (Object.isFrozen(metrics) ? metrics : { ...metrics });
    const body = immutableBody(
      presentService(svc, replicaSets, { ...this.options, metrics: kept }),
    );
    this.entries.set(svc, { replicaSets, metrics: kept, body });
    return body;
  }
}

// Drivers hand out a new Metrics object per call: compare by value, every
// field (`satisfies` fails to compile when Metrics grows one not listed here).
const METRIC_FIELDS = Object.keys({
  memoryMb: 0,
  milliCpu: 0,
  storageMb: 0,
  storageAllowanceMb: 0,
  storageLevel: 0,
  suspended: 0,
  suspendedSince: 0,
} satisfies Record<keyof Metrics, 0>) as (keyof Metrics)[];

function sameMetrics(a: Metrics | undefined, b: Metrics | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  for (const k of METRIC_FIELDS) if (a[k] !== b[k]) return false;
  return true;
}
