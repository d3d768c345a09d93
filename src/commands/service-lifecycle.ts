// Creating, forking, starting, stopping and deleting services. Each command
// checks the domain rule, writes the desired state and an operation in one
// transaction and returns at once; the engine does the slow part.

import { forkSource } from '../domain/backups.js';
import { invalid } from '../domain/errors.js';
import { replicaSetDelete, serviceConverge, serviceDelete } from '../domain/operations.js';
import { cascadeDelete } from '../domain/replica-set-transitions.js';
import { applyServiceAction, NEW_SERVICE_STATUS, serviceMove } from '../domain/service-status.js';
import { checkHa, checkName, NAME_MAX, typeFromAddons } from '../domain/service-rules.js';
import { pickSize } from '../domain/sizes.js';
import type { Addon, Environment, ForkStrategy, Service } from '../domain/types.js';
import { iso } from '../lib/clock.js';
import { resourceId } from '../lib/ids.js';
import { generatePassword, scramVerifier } from '../lib/secrets.js';
import type { Tx } from '../store/store.js';
import { nodePlan } from './service-nodes.js';
import {
  type Ctx,
  type Principal,
  allocatePort,
  portOwner,
  requireCapability,
  requireDiskRoom,
  requireHostRoom,
  visibleProject,
} from './context.js';
import { loadService } from './service-lookup.js';
import { checkRegion } from './vpcs.js';

export interface CreateServiceInput {
  name: string;
  addons?: Addon[];
  cpu_millis?: string;
  memory_gbs?: string;
  environment_tag?: Environment;
  region_code?: string;
  replica_count?: number;
}

/** A new service and the password it was created with (shown once, never stored). */
export interface Created {
  service: Service;
  initialPassword: string;
}

export async function createService(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  body: CreateServiceInput,
): Promise<Created> {
  visibleProject(p, projectId);
  requireDiskRoom(ctx, 'services');
  const { type, vector } = typeFromAddons(body.addons);
  const size =
    pickSize(ctx.settings.sizes, { cpu: body.cpu_millis, memory: body.memory_gbs }, true) ??
    defaultSize(ctx);
  const ha = checkHa(
    { replicaCount: body.replica_count ?? 0, syncReplicaCount: 0 },
    { replicaCount: 0, syncReplicaCount: 0 },
  );
  if (ha.replicaCount > 0) requireCapability(ctx, 'haReplicas', 'HA replicas');
  // Each node of an HA service across hosts needs a host of its own.
  await requireHostRoom(ctx, size, 'place new services', undefined, 1 + ha.replicaCount);
  const regionCode = checkRegion(ctx, body.region_code ?? ctx.settings.defaultRegion);
  const password = generatePassword();
  const fields = {
    name: checkName('name', body.name),
    type,
    vector,
    size,
    ha,
    regionCode,
    environment: body.environment_tag ?? 'DEV',
    passwordVerifier: scramVerifier(password),
    forkedFrom: null,
  } satisfies Partial<Service>;
  const service = await insertNewService(ctx, projectId, fields);
  return { service, initialPassword: password };
}

export interface ForkInput {
  fork_strategy: ForkStrategy;
  target_time?: string;
  cpu_millis?: string;
  memory_gbs?: string;
  name?: string;
  environment_tag?: Environment;
}

/**
 * A fork is a new, independent service made from the parent's data. It keeps
 * the parent's type, region and size unless told otherwise, starts without HA
 * replicas, and gets its own password (the data is the parent's, the
 * `tsdbadmin` password is reset to the new one).
 */
export async function forkService(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  parentId: string,
  body: ForkInput,
): Promise<Created> {
  const parent = await loadService(ctx.store, p, projectId, parentId);
  requireCapability(ctx, 'forks', 'forks');
  serviceMove(parent.id, parent.status, 'fork');
  requireDiskRoom(ctx, 'forks');
  if (body.fork_strategy !== 'PITR' && body.target_time !== undefined) {
    throw invalid('target_time is only for the PITR fork strategy.');
  }
  if (body.fork_strategy === 'PITR' && body.target_time === undefined) {
    throw invalid('target_time is required when fork_strategy is PITR.');
  }
  const size =
    pickSize(ctx.settings.sizes, { cpu: body.cpu_millis, memory: body.memory_gbs }, true) ??
    parent.size;
  // A fork is a new service: placed as one (the hosts driver), refused as one.
  await requireHostRoom(ctx, size, 'place new forks');
  const password = generatePassword();
  const service = await insertNewService(
    ctx,
    projectId,
    {
      name: checkName('name', body.name ?? forkName(parent.name)),
      type: parent.type,
      vector: parent.vector,
      size,
      ha: { replicaCount: 0, syncReplicaCount: 0 },
      regionCode: parent.regionCode,
      environment: body.environment_tag ?? 'DEV',
      passwordVerifier: scramVerifier(password),
      forkedFrom: {
        serviceId: parent.id,
        projectId,
        strategy: body.fork_strategy,
        targetTime: null,
      },
    },
    // The parent must still be forkable when the fork is written, and the
    // backup it restores is chosen from the parent's backups then.
    async (tx, fields) => {
      const now = await tx.services.get(parent.id);
      if (!now) throw invalid(`Service ${parent.id} was deleted meanwhile.`);
      serviceMove(now.id, now.status, 'fork');
      const source = forkSource(
        parent.id,
        await tx.backups.listByService(parent.id),
        body.fork_strategy,
        body.target_time,
        ctx.clock(),
      );
      return {
        ...fields,
        forkedFrom: {
          serviceId: parent.id,
          projectId,
          strategy: body.fork_strategy,
          targetTime: source.targetTime,
          backupLabel: source.backup?.label ?? null,
        },
      };
    },
  );
  return { service, initialPassword: password };
}

/**
 * `<parent>-fork`, shortening the parent's name (by characters, never inside
 * one) when the whole would pass the name limit, so the suffix always shows.
 */
function forkName(parentName: string): string {
  const suffix = '-fork';
  return `${[...parentName].slice(0, NAME_MAX - suffix.length).join('')}${suffix}`;
}

type NewFields = Pick<
  Service,
  | 'name'
  | 'type'
  | 'vector'
  | 'size'
  | 'ha'
  | 'regionCode'
  | 'environment'
  | 'passwordVerifier'
  | 'forkedFrom'
>;

async function insertNewService(
  ctx: Ctx,
  projectId: string,
  given: NewFields,
  /** Checks, in the transaction, that the service may be made, and completes its fields. */
  check?: (tx: Tx, fields: NewFields) => Promise<NewFields>,
): Promise<Service> {
  const id = resourceId();
  const now = ctx.clock();
  const service = await ctx.store.transaction(async (tx) => {
    const fields = check ? await check(tx, given) : given;
    const port = await allocatePort(ctx, tx, portOwner.service(id));
    const svc: Service = {
      ...fields,
      id,
      projectId,
      status: NEW_SERVICE_STATUS,
      port,
      pooler: { enabled: false, port: null },
      vpcId: null,
      createdAt: iso(now),
      version: 1,
    };
    svc.nodes = await nodePlan(ctx, tx, svc, svc.ha);
    await tx.services.insert(svc);
    await tx.operations.enqueue(serviceConverge(svc), now);
    return svc;
  });
  ctx.kick();
  return service;
}

function defaultSize(ctx: Ctx) {
  // The smallest dedicated size: what a managed cloud gives when asked for nothing in particular.
  const dedicated = ctx.settings.sizes
    .filter((s) => !s.shared)
    .sort((a, b) => a.cpuMillis - b.cpuMillis);
  return dedicated[0] ?? (ctx.settings.sizes[0] as Service['size']);
}

/** Stop or start: the status moves, and the engine converges to running or stopped. */
export async function setRunning(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
  action: 'stop' | 'start',
): Promise<Service> {
  const svc = await ctx.store.transaction(async (tx) => {
    const current = await loadService(tx, p, projectId, serviceId);
    const next = await tx.services.update(applyServiceAction(current, action));
    await tx.operations.enqueue(serviceConverge(next), ctx.clock());
    return next;
  });
  ctx.kick();
  return svc;
}

/**
 * Deletion wins over whatever was queued: pending work on the service and its
 * replica sets is cancelled, and they are torn down. A fork of the service is
 * independent and stays.
 */
export async function deleteService(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  serviceId: string,
): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const current = await loadService(tx, p, projectId, serviceId);
    const deleting = await tx.services.update(applyServiceAction(current, 'delete'));
    const now = ctx.clock();
    for (const rs of await tx.replicaSets.listByService(current.id)) {
      const next = cascadeDelete(rs);
      if (next) await tx.replicaSets.update(next);
      await tx.operations.cancelForResource('replicaSet', rs.id, now);
      await tx.operations.enqueue(replicaSetDelete(rs), now);
    }
    await tx.operations.cancelForResource('service', current.id, now);
    await tx.operations.cancelForResource('serviceBackups', current.id, now);
    await tx.operations.enqueue(serviceDelete(deleting), now);
  });
  ctx.kick();
}
