// What every command needs, handed in by the composition root (app.ts).

import type { LogPage, LogQuery, Target } from '../domain/logs.js';
import type { Capabilities, Metrics, Size } from '../domain/types.js';
import { AppError, invalid, notFound } from '../domain/errors.js';
import type { Clock } from '../lib/clock.js';
import type { SeriesStore } from '../domain/series/series-store.js';
import type { Store, Tx } from '../store/store.js';

export interface CommandSettings {
  regions: readonly string[];
  defaultRegion: string;
  sizes: readonly Size[];
  portRange: { min: number; max: number };
  /** The administrator's address: the issuer of the credentials `basin` makes. */
  adminEmail: string;
}

/**
 * What commands may ask of the driver: what it can do, and what it observed.
 * Changes never go through here: commands record desired state and the
 * engine drives the driver. (The driver implements this; commands do not
 * import drivers/.)
 */
export interface DriverReads {
  readonly name: string;
  readonly capabilities: Capabilities;
  readLogs(target: Target, query: LogQuery): Promise<LogPage>;
  /** Latest sampled usage; cheap (it is read on every GET of a service). */
  metrics(target: Target): Metrics | undefined;
  /** The host's disk and its reserve, where the driver keeps one (bytes). */
  disk?(): { free: number; reserve: number; low: boolean } | undefined;
  /**
   * Why no host could take a node of `size` now, where the driver places
   * nodes on hosts (the hosts driver); undefined when one can. With
   * `resourceId` (a resize), whether the host it is placed on can.
   */
  noRoom?(size: Size, resourceId?: string, nodes?: number): Promise<string | undefined>;
  /**
   * Why a service's HA replicas cannot go from `before` to `after` on this
   * driver (the hosts driver: a service runs under Patroni, or not, from
   * its creation); undefined when they can.
   */
  haChangeRefusal?(before: number, after: number): string | undefined;
  /**
   * Why a read replica set of `nodes` nodes of `size` for `serviceId`
   * cannot be made on this driver: `invalid` (a 400: never for such a
   * service), or `unavailable` (a 503: no host has room now; the hosts
   * driver's only answer). With `replicaSetId` (a resize to `size`),
   * why the hosts of its nodes have no room for them at that size.
   */
  replicaSetRefusal?(
    serviceId: string,
    size: Size,
    nodes: number,
    replicaSetId?: string,
  ): Promise<{ invalid?: string; unavailable?: string } | undefined>;
}

export interface Ctx {
  store: Store;
  driver: DriverReads;
  settings: CommandSettings;
  clock: Clock;
  /** Wakes the engine: an operation was just queued. */
  kick(): void;
  /** Whether a port may be handed out (the local driver: nothing else listens on it). */
  portUsable(port: number): Promise<boolean>;
  /** The sampled metric series (domain/series/); absent where nothing samples (some tests). */
  series?: SeriesStore;
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
  serviceNode: (id: string, index: number) => `service:${id}:node:${index}`,
  replicaSet: (id: string) => `replicaSet:${id}`,
  replicaSetPooler: (id: string) => `replicaSet:${id}:pooler`,
  replicaSetNode: (id: string, index: number) => `replicaSet:${id}:node:${index}`,
};

/**
 * Refuses, with a 400 that says so, a request the configured driver cannot
 * carry out (docs/architecture.md §9: a clear 400 when the host lacks what a request needs).
 */
export function requireCapability(ctx: Ctx, capability: keyof Capabilities, what: string): void {
  if (!ctx.driver.capabilities[capability]) {
    throw invalid(
      `This Basin runs the ${ctx.driver.name} driver, which does not support ${what} yet.`,
    );
  }
}

/**
 * Refuses, with a 503 that says why, a node no host has room for (the hosts
 * driver's placement): a new one (`doing`: "place new services"), or a
 * placed `resourceId` grown on its host.
 */
export async function requireHostRoom(
  ctx: Ctx,
  size: Size,
  doing: string,
  resourceId?: string,
  nodes = 1,
): Promise<void> {
  const why = await ctx.driver.noRoom?.(size, resourceId, nodes);
  if (why !== undefined) throw new AppError('UNAVAILABLE', `Basin cannot ${doing} now: ${why}`);
}

/**
 * Refuses what would put new data on a host whose disk is below its
 * reserve (docs/decisions.md, Storage allowances): a 503 that says so, and
 * what to do. The services already there keep what room is left.
 */
export function requireDiskRoom(ctx: Ctx, what: string): void {
  const disk = ctx.driver.disk?.();
  if (!disk?.low) return;
  const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
  throw new AppError(
    'UNAVAILABLE',
    `The host's disk has ${mb(disk.free)} MB free, below the ${mb(disk.reserve)} MB it keeps in reserve: ` +
      `Basin makes no new ${what} until it has room again. Delete what is not needed, or ask the operator to add space.`,
  );
}

/** The owner's port from the configured range, skipping ports in use on the host. */
export function allocatePort(ctx: Ctx, tx: Tx, owner: string): Promise<number> {
  const { min, max } = ctx.settings.portRange;
  return tx.ports.allocate(owner, min, max, ctx.portUsable);
}
