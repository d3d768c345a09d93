// A driver for engine tests: no processes, each call answered by a behaviour
// the test sets per service (succeed, fail permanently or retryably, hang),
// and every call counted.

import {
  type BackupInfo,
  type BackupProgress,
  type Driver,
  DriverError,
  type Health,
  type ServiceSpec,
  type StorageEvent,
} from '../../src/drivers/driver.js';
import { DONE, type Progress, type ProgressNote, wait } from '../../src/domain/progress.js';
import type { Target } from '../../src/domain/logs.js';

export type Behaviour =
  | { do: 'succeed' }
  | { do: 'fail'; retryable: boolean; message: string }
  | { do: 'hang' }
  /** One step that is not done yet, with a note for the logs; then `succeed`. */
  | { do: 'note'; note: ProgressNote }
  /** Never done: each call waits `ms` more (a server that never becomes ready). */
  | { do: 'wait'; ms: number; reason: string };

export class FakeDriver implements Driver {
  readonly name = 'fake';
  readonly capabilities = {
    forks: true,
    haReplicas: true,
    replicaSets: true,
    pooler: true,
    replicaSetPooler: true,
  };
  /** applyService calls per service id. */
  readonly applied = new Map<string, number>();
  readonly deleted = new Map<string, number>();
  private readonly behaviour = new Map<string, Behaviour>();
  private readonly running = new Set<string>();
  private readonly hung: (() => void)[] = [];
  /** Calls currently hanging, per project. */
  readonly hanging = new Map<string, number>();
  private readonly storageListeners: ((event: StorageEvent) => void)[] = [];

  watchStorage(on: (event: StorageEvent) => void): void {
    this.storageListeners.push(on);
  }

  /** What a storage watch would say (engine/storage.ts hears it). */
  emitStorage(event: StorageEvent): void {
    for (const l of this.storageListeners) l(event);
  }

  /** How applyService and deleteService answer for `serviceId` from now on. */
  set(serviceId: string, b: Behaviour): void {
    this.behaviour.set(serviceId, b);
  }

  calls(serviceId: string): number {
    return this.applied.get(serviceId) ?? 0;
  }

  /** Lets every hanging call succeed. */
  releaseHung(): void {
    for (const resolve of this.hung.splice(0)) resolve();
  }

  private readonly noteListeners: ((target: Target, note: ProgressNote) => void)[] = [];

  async start(): Promise<void> {}
  async close(): Promise<void> {}

  watchNotes(on: (target: Target, note: ProgressNote) => void): void {
    this.noteListeners.push(on);
  }

  /** Tells the engine something it saw outside any operation (a process killed at a memory bound). */
  note(target: Target, note: ProgressNote): void {
    for (const l of this.noteListeners) l(target, note);
  }

  async applyService(spec: ServiceSpec): Promise<Progress> {
    this.applied.set(spec.serviceId, this.calls(spec.serviceId) + 1);
    const b = this.behaviour.get(spec.serviceId);
    if (b?.do === 'note') {
      this.behaviour.set(spec.serviceId, { do: 'succeed' });
      return wait(0, 'a step with a note', b.note);
    }
    if (b?.do === 'wait') return wait(b.ms, b.reason);
    await this.act(spec.serviceId, spec.projectId);
    if (spec.running) this.running.add(spec.serviceId);
    else this.running.delete(spec.serviceId);
    return DONE;
  }

  async deleteService(serviceId: string): Promise<Progress> {
    this.deleted.set(serviceId, (this.deleted.get(serviceId) ?? 0) + 1);
    await this.act(serviceId, '');
    this.running.delete(serviceId);
    return DONE;
  }

  /** Services whose host does not answer: inspecting them throws. */
  readonly unreachable = new Set<string>();

  /** A running service's processes gone (killed behind Basin's back). */
  lose(serviceId: string): void {
    this.running.delete(serviceId);
  }

  async inspectService(spec: ServiceSpec): Promise<Health> {
    if (this.unreachable.has(spec.serviceId)) {
      throw new DriverError(`The host of ${spec.serviceId} does not answer.`, true);
    }
    return this.running.has(spec.serviceId) ? 'running' : 'missing';
  }

  /** Backups taken, per service (each done at its first call, a second after the last). */
  readonly backups = new Map<string, BackupInfo[]>();
  /** expireBackups calls: [service id, oldest kept]. */
  readonly expired: [string, string][] = [];
  /** How backupService answers for a service from now on (default: succeed). */
  readonly backupBehaviour = new Map<string, Behaviour>();

  async backupService(spec: ServiceSpec, since: number): Promise<BackupProgress> {
    const b = this.backupBehaviour.get(spec.serviceId) ?? { do: 'succeed' };
    if (b.do === 'fail') throw new DriverError(b.message, b.retryable);
    if (b.do === 'hang') return { done: false, retryAfterMs: 1000, reason: 'backing up' };
    const list = this.backups.get(spec.serviceId) ?? [];
    const start = Math.max(since, ...list.map((x) => Date.parse(x.startedAt) + 1000));
    const backup: BackupInfo = {
      label: `b${list.length}`,
      startedAt: new Date(start).toISOString(),
      stoppedAt: new Date(start + 1000).toISOString(),
    };
    this.backups.set(spec.serviceId, [...list, backup]);
    return { done: true, backup };
  }

  async expireBackups(serviceId: string, oldestKept: string): Promise<void> {
    this.expired.push([serviceId, oldestKept]);
  }

  async applyReplicaSet(): Promise<Progress> {
    return DONE;
  }
  async deleteReplicaSet(): Promise<Progress> {
    return DONE;
  }
  async inspectReplicaSet(): Promise<Health> {
    return 'running';
  }
  async readLogs() {
    return { entries: [] };
  }
  metrics() {
    return undefined;
  }

  private async act(serviceId: string, projectId: string): Promise<void> {
    const b = this.behaviour.get(serviceId) ?? { do: 'succeed' };
    if (b.do === 'fail') throw new DriverError(b.message, b.retryable);
    if (b.do === 'hang') {
      this.hanging.set(projectId, (this.hanging.get(projectId) ?? 0) + 1);
      await new Promise<void>((resolve) => this.hung.push(resolve));
      this.hanging.set(projectId, (this.hanging.get(projectId) ?? 1) - 1);
    }
  }
}
