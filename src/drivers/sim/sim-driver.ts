// The `sim` driver: a fast, faithful stand-in for a database cloud, with no
// processes. Developers run Basin with BASIN_DRIVER=sim in their own tests: the
// API behaves as with real databases (same statuses, same timing shape, logs to
// page through, metrics to read), state changes just take `delayMs` and nothing
// else happens. Everything is computed from the injected clock: no timers, no I/O.

import type { SeriesSample } from '../../domain/series/catalogue.js';
import type { Metrics } from '../../domain/types.js';
import {
  type BackupProgress,
  DriverError,
  type Driver,
  type FailoverView,
  type PrimaryEvent,
  type Health,
  type ObservedNode,
  type ReplicaSetSpec,
  type ServiceSpec,
} from '../driver.js';
import type { LogPage, LogQuery, Target } from '../../domain/logs.js';
import type { Progress } from '../../domain/progress.js';
import { readSimLogs } from './sim-logs.js';
import { SimBackups } from './sim-backups.js';
import { parseCreatedAt, simMetrics, simSeries } from './sim-metrics.js';
import { SimResources } from './sim-state.js';

export interface SimDriverOptions {
  /** How long a state change takes, in ms (0 in tests: every step is done at once). */
  delayMs: number;
  /** The time source, injectable so tests are deterministic; Date.now by default. */
  clock?: () => number;
}

/**
 * The sim driver. It remembers, in memory only, the last applied spec of each
 * service and replica set. A change to the desired state (running, size, HA,
 * pooler, allowed CIDRs, password, environment) completes `delayMs` after it
 * was first asked for; repeated calls meanwhile answer `wait`. After a restart
 * it has forgotten everything and adopts what the engine inspects as already
 * matching its spec, as the local driver adopts running databases. Test hooks
 * (`crash`, `crashReplicaSet`) let clients exercise the repair path.
 */
export class SimDriver implements Driver {
  readonly name = 'sim';
  readonly capabilities = {
    forks: true,
    haReplicas: true,
    replicaSets: true,
    pooler: true,
    replicaSetPooler: true,
  };
  private readonly clock: () => number;
  private readonly services: SimResources<ServiceSpec>;
  private readonly replicaSets: SimResources<ReplicaSetSpec>;
  private readonly backups: SimBackups;
  /** When the sim first saw each target (`kind:id`): the anchor of its log history. */
  private readonly firstSeen = new Map<string, number>();
  /** Services whose primary died (killPrimary), with that primary's index, until an apply completes. */
  private readonly deadPrimaries = new Map<string, number>();
  private readonly downListeners: ((serviceId: string, event: PrimaryEvent) => void)[] = [];

  constructor(options: SimDriverOptions) {
    if (!Number.isFinite(options.delayMs) || options.delayMs < 0) {
      throw new RangeError(`delayMs must be a non-negative number, got ${options.delayMs}`);
    }
    this.clock = options.clock ?? Date.now;
    this.services = new SimResources(options.delayMs, this.clock, serviceKey);
    this.replicaSets = new SimResources(options.delayMs, this.clock, replicaSetKey);
    this.backups = new SimBackups(options.delayMs, this.clock);
  }

  /** Nothing to prepare: the sim has no host to check and no timers. */
  async start(): Promise<void> {}

  /** Nothing to stop: the sim has no background work. */
  async close(): Promise<void> {}

  /**
   * Converges a service to `spec`. A fork is checked as the local driver
   * checks it before it restores: a parent the sim does not know (never
   * applied nor inspected since start), a backup the parent no longer has,
   * or a PITR target before that backup ended fail permanently; a fork
   * already created needs its parent no more. A stopped parent is forked
   * like a running one.
   */
  async applyService(spec: ServiceSpec): Promise<Progress> {
    const { source } = spec;
    if (source.kind === 'fork' && this.services.get(spec.serviceId) === undefined) {
      const parent = source.parentServiceId;
      const refuse = (why: string) => {
        throw new DriverError(`Cannot fork service ${spec.serviceId}: ${why}.`, false);
      };
      if (this.services.get(parent) === undefined) refuse(`its parent ${parent} does not exist`);
      const why = this.backups.unusable(parent, source.backupLabel, source.targetTime);
      if (why) refuse(why);
    }
    this.see({ kind: 'service', id: spec.serviceId });
    const progress = this.services.apply(spec.serviceId, spec, (previous, crashed) => {
      if (previous === undefined) {
        return source.kind === 'fork' ? `forking from ${source.parentServiceId}` : 'creating';
      }
      if (crashed) return 'restarting after a crash';
      if (previous.running !== spec.running) return spec.running ? 'starting' : 'stopping';
      return 'reconfiguring';
    });
    // Applied: its primary runs (the promoted one, or the dead one restarted).
    if (progress.done) this.deadPrimaries.delete(spec.serviceId);
    return progress;
  }

  watchPrimaries(on: (serviceId: string, event: PrimaryEvent) => void): void {
    this.downListeners.push(on);
  }

  /**
   * After killPrimary, until an apply completes: dead, with every standby
   * caught up (the sim loses nothing). Otherwise not dead.
   */
  async prepareFailover(spec: ServiceSpec): Promise<FailoverView> {
    const dead = this.deadPrimaries.get(spec.serviceId);
    const primary = spec.nodes.find((n) => n.role === 'primary');
    if (dead === undefined || primary?.index !== dead) return { dead: false };
    return {
      dead: true,
      standbys: spec.nodes
        .filter((n) => n.role === 'standby')
        .map((n) => ({ index: n.index, lsn: '0/3000000' })),
    };
  }

  /** Deletes a service (timed like apply); then it and its backups are forgotten. Unknown ids are DONE. */
  async deleteService(serviceId: string): Promise<Progress> {
    const progress = this.services.remove(serviceId);
    if (progress.done) this.backups.forget(serviceId);
    return this.forgetWhenDone({ kind: 'service', id: serviceId }, progress);
  }

  /** A backup takes `delayMs`, of a running service only; see SimBackups. */
  async backupService(spec: ServiceSpec, since: number): Promise<BackupProgress> {
    if (this.services.get(spec.serviceId)?.running !== true) {
      throw new DriverError(
        `Service ${spec.serviceId} is not running: it cannot be backed up.`,
        true,
      );
    }
    return this.backups.take(spec.serviceId, since);
  }

  async expireBackups(serviceId: string, oldestKept: string): Promise<void> {
    this.backups.expire(serviceId, oldestKept);
  }

  /**
   * 'running' or 'stopped' as last applied; 'failed' after `crash`; 'missing'
   * once deleted or while still being created. A service never seen since
   * start is adopted as matching `spec`, so a restart leaves it READY.
   */
  async inspectService(spec: ServiceSpec): Promise<Health> {
    this.see({ kind: 'service', id: spec.serviceId });
    return this.services.health(spec.serviceId, spec, (s) => s.running);
  }

  /**
   * Every node of a service that runs as last applied is ready, in the
   * role its spec records, on timeline 1 and caught up; otherwise none is.
   */
  async observeService(spec: ServiceSpec): Promise<ObservedNode[]> {
    const running = this.services.get(spec.serviceId)?.running === true && spec.running;
    const dead = this.deadPrimaries.get(spec.serviceId);
    return spec.nodes.map((n) => {
      const up = running && n.index !== dead;
      return {
        index: n.index,
        ready: up,
        actsAs: up ? n.role : null,
        timeline: up ? 1 : null,
        lsn: up ? '0/3000000' : null,
        lagBytes: up && n.role === 'standby' ? 0 : null,
      };
    });
  }

  /** Converges a replica set to `spec`, timed like applyService. */
  async applyReplicaSet(spec: ReplicaSetSpec): Promise<Progress> {
    this.see({ kind: 'replicaSet', id: spec.replicaSetId });
    return this.replicaSets.apply(spec.replicaSetId, spec, (previous, crashed) => {
      if (previous === undefined) return 'creating';
      if (crashed) return 'restarting after a crash';
      return previous.nodes === spec.nodes ? 'reconfiguring' : 'changing node count';
    });
  }

  /** Deletes a replica set (timed like apply); then it is forgotten. Unknown ids are DONE. */
  async deleteReplicaSet(replicaSetId: string): Promise<Progress> {
    const target: Target = { kind: 'replicaSet', id: replicaSetId };
    return this.forgetWhenDone(target, this.replicaSets.remove(replicaSetId));
  }

  /** Like inspectService; a replica set always runs once created. */
  async inspectReplicaSet(spec: ReplicaSetSpec): Promise<Health> {
    this.see({ kind: 'replicaSet', id: spec.replicaSetId });
    return this.replicaSets.health(spec.replicaSetId, spec, () => true);
  }

  /**
   * Synthetic PostgreSQL-like logs (see sim-logs.ts). Any target and node has
   * logs, from an hour before the sim first saw it: the API checks that the
   * resource and node exist before asking. A page is computed at once, so
   * an aborted `query.signal` is only looked at before it starts.
   */
  async readLogs(target: Target, query: LogQuery): Promise<LogPage> {
    query.signal?.throwIfAborted();
    const firstSeenMs = this.see(target);
    const node = query.node ?? 0;
    return readSimLogs({ target, node, firstSeenMs, nowMs: this.clock() }, query);
  }

  /** Plausible usage of a created service or replica set; undefined for unknown ones. */
  metrics(target: Target): Metrics | undefined {
    const nowMs = this.clock();
    if (target.kind === 'service') {
      const spec = this.services.get(target.id);
      if (spec === undefined) return undefined;
      const createdMs = parseCreatedAt(spec.createdAt);
      const sinceMs = createdMs <= nowMs ? createdMs : this.see(target);
      return simMetrics({ id: target.id, size: spec.size, running: spec.running, sinceMs, nowMs });
    }
    const spec = this.replicaSets.get(target.id);
    if (spec === undefined) return undefined;
    const sinceMs = this.see(target);
    return simMetrics({ id: target.id, size: spec.size, running: true, sinceMs, nowMs });
  }

  /** Plausible series of a created service's nodes (sim-metrics.ts). */
  async sampleSeries(spec: ServiceSpec): Promise<SeriesSample[]> {
    const nowMs = this.clock();
    const createdMs = parseCreatedAt(spec.createdAt);
    const sinceMs =
      createdMs <= nowMs ? createdMs : this.see({ kind: 'service', id: spec.serviceId });
    const input = { id: spec.serviceId, size: spec.size, running: spec.running, sinceMs, nowMs };
    return simSeries(input, spec.nodes);
  }

  /** Plausible series of a replica set's nodes, all replicas (sim-metrics.ts). */
  async sampleReplicaSetSeries(spec: ReplicaSetSpec): Promise<SeriesSample[]> {
    const nowMs = this.clock();
    const sinceMs = this.see({ kind: 'replicaSet', id: spec.replicaSetId });
    const input = { id: spec.replicaSetId, size: spec.size, running: true, sinceMs, nowMs };
    const nodes = Array.from({ length: spec.nodes }, (_, index) => ({
      index,
      role: 'standby' as const,
    }));
    return simSeries(input, nodes);
  }

  /**
   * Test hook: the service's processes die. inspectService answers 'failed'
   * until an applyService completes (after `delayMs`), so clients can watch
   * UNSTABLE → READY. Returns false when the sim does not know the service.
   */
  crash(serviceId: string): boolean {
    return this.services.crash(serviceId);
  }

  /**
   * Test hook: the primary of a service with standbys dies, as `kill -9`
   * of its postmaster on the local driver: the watch reports it at once,
   * inspectService answers 'failed', prepareFailover reports it dead.
   * Returns false for an unknown service or one without standbys.
   */
  killPrimary(serviceId: string): boolean {
    const spec = this.services.get(serviceId);
    const primary = spec?.nodes.find((n) => n.role === 'primary');
    if (!spec || !primary || spec.nodes.length < 2) return false;
    this.deadPrimaries.set(serviceId, primary.index);
    this.services.crash(serviceId);
    queueMicrotask(() => {
      for (const l of this.downListeners) l(serviceId, { kind: 'dead' });
    });
    return true;
  }

  /**
   * Test hook: the primary of a service with standbys hangs (it runs, and
   * answers nothing), as a stopped postmaster on the local driver: its
   * watch reports two unanswered checks, then the hang, after which it is
   * dead for prepareFailover (it fences it). False as killPrimary.
   */
  hangPrimary(serviceId: string): boolean {
    const spec = this.services.get(serviceId);
    const primary = spec?.nodes.find((n) => n.role === 'primary');
    if (!spec || !primary || spec.nodes.length < 2) return false;
    const report = (event: PrimaryEvent) => {
      for (const l of this.downListeners) l(serviceId, event);
    };
    const timeoutMs = 1_500;
    queueMicrotask(() => {
      report({ kind: 'unanswered', count: 1, limit: 3, timeoutMs });
      report({ kind: 'unanswered', count: 2, limit: 3, timeoutMs });
      this.deadPrimaries.set(serviceId, primary.index);
      this.services.crash(serviceId);
      report({ kind: 'hung', count: 3, timeoutMs });
    });
    return true;
  }

  /** Test hook: like crash, for a replica set. */
  crashReplicaSet(replicaSetId: string): boolean {
    return this.replicaSets.crash(replicaSetId);
  }

  /** Records when a target was first seen and returns that time. */
  private see(target: Target): number {
    const key = `${target.kind}:${target.id}`;
    let ms = this.firstSeen.get(key);
    if (ms === undefined) {
      ms = this.clock();
      this.firstSeen.set(key, ms);
    }
    return ms;
  }

  private forgetWhenDone(target: Target, progress: Progress): Progress {
    if (progress.done) this.firstSeen.delete(`${target.kind}:${target.id}`);
    return progress;
  }
}

/** Creates the sim driver; see SimDriver. */
export function createSimDriver(options: SimDriverOptions): SimDriver {
  return new SimDriver(options);
}

/** The fields of a service spec that make up its desired state. */
function serviceKey(spec: ServiceSpec): string {
  return JSON.stringify([
    spec.running,
    [spec.size.shared, spec.size.cpuMillis, spec.size.memoryGbs],
    [spec.ha.replicaCount, spec.ha.syncReplicaCount],
    spec.nodes.map((n) => [n.index, n.role, n.port]),
    [spec.pooler.enabled, spec.pooler.port],
    [...spec.allowedCidrs].sort(),
    spec.passwordVerifier,
    spec.environment,
  ]);
}

/** The fields of a replica set spec that make up its desired state. */
function replicaSetKey(spec: ReplicaSetSpec): string {
  return JSON.stringify([
    spec.nodes,
    [spec.size.shared, spec.size.cpuMillis, spec.size.memoryGbs],
    [spec.pooler.enabled, spec.pooler.port],
    [...spec.allowedCidrs].sort(),
    spec.environment,
  ]);
}
