// What every command needs, handed in by the composition root (app.ts).

import type { Size } from '../domain/types.js';
import { notFound } from '../domain/errors.js';
import type { Driver } from '../drivers/driver.js';
import type { Clock } from '../lib/clock.js';
import type { Store } from '../store/store.js';

export interface CommandSettings {
  regions: readonly string[];
  defaultRegion: string;
  sizes: readonly Size[];
  portRange: { min: number; max: number };
}

export interface Ctx {
  store: Store;
  driver: Driver;
  settings: CommandSettings;
  clock: Clock;
  /** Wakes the engine: an operation was just queued. */
  kick(): void;
}

/** Who is asking: the projects their credential can see. */
export interface Principal {
  credentialId: string;
  projectIds: ReadonlySet<string>;
}

/** A project the principal can see, or a 404 that does not tell whether it exists. */
export function visibleProject(p: Principal, projectId: string): string {
  if (!p.projectIds.has(projectId)) throw notFound(`Project ${projectId} not found.`);
  return projectId;
}

/** Port owners: one naming scheme, so ports are released with their resource. */
export const portOwner = {
  service: (id: string) => `service:${id}`,
  servicePooler: (id: string) => `service:${id}:pooler`,
  replicaSet: (id: string) => `replicaSet:${id}`,
  replicaSetPooler: (id: string) => `replicaSet:${id}:pooler`,
};
