// Basin's Prometheus metrics (docs/decisions.md, Prometheus metrics): what
// the API answered, what the engine has queued and what failed, and each
// service's usage. A scrape reads only what Basin already holds: the
// driver's cached samples (Driver.metrics, "must be cheap"), the store's
// rows; it never asks PostgreSQL anything.

import { Counter, Gauge, Histogram, type Metric, Registry } from 'prom-client';
import type { MetricName } from '../domain/series/catalogue.js';
import type { SeriesStore } from '../domain/series/series-store.js';
import type { Driver } from '../drivers/driver.js';
import type { Clock } from '../lib/clock.js';
import type { Store } from '../store/store.js';
import { RequestHistogram } from './request-histogram.js';

export interface MetricsSources {
  store: Store;
  driver: Driver;
  clock: Clock;
  /** The metric series' samples (domain/series/): connections and replication lag, per node. */
  series?: SeriesStore;
}

/** Labels of a per-service series: a service's primary, or a replica set's node. */
const SERVICE_LABELS = ['project', 'service', 'node', 'role'] as const;

/** Request durations' buckets, in seconds: polls take a millisecond, creates a few hundred. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Operation durations' buckets, in seconds: a stop takes a second, a fork of a large service minutes. */
const OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600];

/** How often the store's backups are read again (their ages are computed per scrape). */
const BACKUPS_REREAD_MS = 30_000;

export class BasinMetrics {
  readonly registry = new Registry();
  private readonly http: RequestHistogram;
  private readonly operations: Histogram<'kind' | 'outcome'>;
  private readonly attemptFailures: Counter<'kind'>;

  constructor(private readonly sources: MetricsSources) {
    const registers = [this.registry];
    this.http = new RequestHistogram(
      'basin_http_request_duration_seconds',
      'API requests by method, route pattern and status code, and how long they took',
      HTTP_BUCKETS,
    );
    this.registry.registerMetric(this.http as unknown as Metric);
    this.operations = new Histogram({
      name: 'basin_engine_operation_duration_seconds',
      help: 'Operations this process ended, by kind and outcome (done, failed), from their acceptance to their end',
      labelNames: ['kind', 'outcome'],
      buckets: OPERATION_BUCKETS,
      registers,
    });
    this.attemptFailures = new Counter({
      name: 'basin_engine_operation_attempt_failures_total',
      help: 'Failed attempts of operations, by kind (each retry that failed counts)',
      labelNames: ['kind'],
      registers,
    });
    const { store } = sources;
    new Gauge({
      name: 'basin_engine_queue_depth',
      help: 'Operations queued or running in the engine',
      registers,
      async collect() {
        this.set((await store.operations.listPending()).length);
      },
    });
    new Gauge({
      name: 'basin_engine_operation_failures',
      help: 'Operations whose latest attempt failed, by kind (the store keeps the latest failure per resource)',
      labelNames: ['kind'],
      registers,
      async collect() {
        this.reset();
        const byKind = new Map<string, number>();
        for (const f of await store.operations.latestFailures())
          byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
        for (const [kind, n] of byKind) this.set({ kind }, n);
      },
    });
    this.serviceGauges();
  }

  /** When each service's last backup started (epoch ms), as last read; see lastBackups(). */
  private backupStarts = new Map<string, number>();
  private backupsReadAt = -Infinity;
  private backupsRead = false;
  private readingBackups: Promise<void> | undefined;

  /**
   * When each service's last backup started, read from the store at most
   * every BACKUPS_REREAD_MS and in the background (a lookup per service is
   * half of a scrape's time with 1,000 services, and backups come daily):
   * only the first scrape waits for it. The age itself is computed per scrape.
   */
  private async lastBackups(serviceIds: readonly string[]): Promise<Map<string, number>> {
    const { clock } = this.sources;
    if (clock() - this.backupsReadAt >= BACKUPS_REREAD_MS && !this.readingBackups) {
      this.backupsReadAt = clock();
      const reading = this.readBackups(serviceIds).finally(() => (this.readingBackups = undefined));
      // A failed read is tried again at the next scrape (the first scrape reports it).
      reading.catch(() => (this.backupsReadAt = -Infinity));
      this.readingBackups = reading;
    }
    if (!this.backupsRead && this.readingBackups) await this.readingBackups;
    return this.backupStarts;
  }

  private async readBackups(serviceIds: readonly string[]): Promise<void> {
    const starts = new Map<string, number>();
    for (const id of serviceIds) {
      for (const b of await this.sources.store.backups.listByService(id)) {
        const t = Date.parse(b.startedAt);
        if (t > (starts.get(id) ?? -Infinity)) starts.set(id, t);
      }
    }
    this.backupStarts = starts;
    this.backupsRead = true;
  }

  /** Counts one answered request (Fastify's onResponse hook; app.ts). */
  observeRequest(method: string, route: string | undefined, status: number, ms: number): void {
    // A request that matched no route is one series, not one per URL.
    this.http.observe(method, route ?? 'unmatched', status, ms / 1000);
  }

  /** The engine's observer (engine.ts, OperationObserver): how operations end. */
  readonly operationObserver = {
    settled: (kind: string, outcome: 'done' | 'failed', seconds: number) =>
      this.operations.observe({ kind, outcome }, seconds),
    attemptFailed: (kind: string) => this.attemptFailures.inc({ kind }),
  };

  /** The text format, as Prometheus scrapes it. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /**
   * Per-service gauges, all filled by one pass over the store when a scrape
   * collects the first of them (the others' collect() find it done).
   */
  private serviceGauges(): void {
    const registers = [this.registry];
    // The first gauge's collect() starts the pass; the others wait for it.
    // Registry.metrics() calls each metric's collect() in registration order,
    // each running up to its first await before the next is called. Two
    // scrapes at once share one pass.
    let filling: Promise<void> | undefined;
    let first = true;
    const gauge = (name: string, help: string, extra: string[] = []) => {
      const starts = first;
      first = false;
      return new Gauge({
        name,
        help,
        labelNames: [...SERVICE_LABELS, ...extra],
        registers,
        collect: starts
          ? async () => {
              filling ??= fill().finally(() => (filling = undefined));
              await filling;
            }
          : async () => void (await filling),
      });
    };
    const up = gauge(
      'basin_service_up',
      '1 when the service is READY (a replica set: active), 0 otherwise',
    );
    const status = gauge(
      'basin_service_status',
      'The service status: 1 on the series of its current status (no series for the others)',
      ['status'],
    );
    const cpu = gauge('basin_service_cpu_millicores', 'CPU the node used lately, in millicores');
    const memory = gauge('basin_service_memory_bytes', 'Memory the node holds, in bytes');
    const storage = gauge('basin_service_storage_bytes', 'What the node holds on disk, in bytes');
    const allowance = gauge(
      'basin_service_storage_allowance_bytes',
      "The service's storage allowance, in bytes (where the driver keeps allowances)",
    );
    const sinceBackup = gauge(
      'basin_service_seconds_since_last_backup',
      'Seconds since the last completed backup started (absent before the first)',
    );
    const connections = gauge(
      'basin_service_connections',
      'Client connections to the node at its last sample (pg_stat_activity)',
    );
    const lagBytes = gauge(
      'basin_service_replication_lag_bytes',
      'WAL the replica has yet to replay at its last sample, as the primary sees it',
    );
    const lagSeconds = gauge(
      'basin_service_replication_lag_seconds',
      "The replica's replay lag at its last sample",
    );
    const poolerClients = gauge(
      'basin_service_pooler_client_connections',
      "Clients logged in to the service's pooler at its last sample, served or waiting",
    );
    const poolerServers = gauge(
      'basin_service_pooler_server_connections',
      "Server connections the service's pooler held at its last sample, in use or idle",
    );
    // Counters of the server (since it started), as its last sample read
    // them: Prometheus' rate() handles their resets.
    const counter = (name: string, help: string) =>
      new Counter({
        name,
        help,
        labelNames: SERVICE_LABELS,
        registers,
        collect: async () => void (await filling),
      });
    const commits = counter(
      'basin_service_xact_commit_total',
      'Transactions the node committed since its server started, at its last sample (pg_stat_database)',
    );
    const rollbacks = counter(
      'basin_service_xact_rollback_total',
      'Transactions the node rolled back since its server started, at its last sample (pg_stat_database)',
    );
    const fromSeries: [Gauge | Counter, MetricName][] = [
      [connections, 'timescale_cloud_database_num_connections'],
      [lagBytes, 'basin_replication_lag_bytes'],
      [lagSeconds, 'basin_replication_lag_seconds'],
      [poolerClients, 'basin_pooler_client_connections'],
      [poolerServers, 'basin_pooler_server_connections'],
      [commits, 'basin_database_xact_commit_total'],
      [rollbacks, 'basin_database_xact_rollback_total'],
    ];
    const all = [
      up,
      status,
      cpu,
      memory,
      storage,
      allowance,
      sinceBackup,
      ...fromSeries.map(([g]) => g),
    ];
    const MB = 1024 * 1024;
    const { store, driver, clock, series } = this.sources;
    const fill = async () => {
      const services = await store.services.listAll();
      const lastBackups = await this.lastBackups(services.map((s) => s.id));
      for (const g of all) g.reset();
      const now = clock();
      for (const svc of services) {
        const labels = { project: svc.projectId, service: svc.id, node: '0', role: 'primary' };
        up.set(labels, svc.status === 'READY' ? 1 : 0);
        // The current status only: one series per service, not one per
        // status (10x the scrape with 1,000 services); the old one goes
        // stale in Prometheus when the status changes.
        status.set({ ...labels, status: svc.status }, 1);
        const m = driver.metrics({ kind: 'service', id: svc.id });
        if (m) {
          cpu.set(labels, m.milliCpu);
          memory.set(labels, m.memoryMb * MB);
          storage.set(labels, m.storageMb * MB);
          if (m.storageAllowanceMb !== undefined) allowance.set(labels, m.storageAllowanceMb * MB);
        }
        // The collector's last samples, each node under its own labels.
        for (const [m, name] of fromSeries)
          for (const l of series?.latest(svc.id, name) ?? []) {
            const at = {
              project: svc.projectId,
              service: svc.id,
              node: l.labels.node ?? '0',
              role: l.labels.role ?? 'primary',
            };
            // A counter is set by one increment from its reset (a tenant can
            // make its own read negative; a counter cannot be).
            if (m instanceof Counter) m.inc(at, Math.max(0, l.value));
            else m.set(at, l.value);
          }
        const last = lastBackups.get(svc.id);
        if (last !== undefined) sinceBackup.set(labels, Math.max(0, (now - last) / 1000));
      }
      for (const rs of await store.replicaSets.listAll()) {
        const labels = { project: rs.projectId, service: rs.id, node: '0', role: 'replica_set' };
        up.set(labels, rs.status === 'active' ? 1 : 0);
        const m = driver.metrics({ kind: 'replicaSet', id: rs.id });
        if (m) {
          cpu.set(labels, m.milliCpu);
          memory.set(labels, m.memoryMb * MB);
          storage.set(labels, m.storageMb * MB);
        }
      }
    };
  }
}
