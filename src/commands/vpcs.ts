import { conflict, invalid, notFound } from '../domain/errors.js';
import { format, overlaps, parseVpcCidr } from '../domain/cidr.js';
import { checkName } from '../domain/service-rules.js';
import type { Vpc } from '../domain/types.js';
import { iso } from '../lib/clock.js';
import { numericId } from '../lib/ids.js';
import type { Repos } from '../store/store.js';
import { type Ctx, type Principal, visibleProject } from './context.js';

export async function listVpcs(ctx: Ctx, p: Principal, projectId: string): Promise<Vpc[]> {
  return ctx.store.vpcs.listByProject(visibleProject(p, projectId));
}

export async function getVpc(
  ctx: Ctx | { store: Repos },
  p: Principal,
  projectId: string,
  vpcId: string,
): Promise<Vpc> {
  visibleProject(p, projectId);
  const vpc = await ctx.store.vpcs.get(vpcId);
  if (!vpc || vpc.projectId !== projectId)
    throw notFound(`VPC ${vpcId} not found in project ${projectId}.`);
  return vpc;
}

export async function createVpc(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  body: { name: string; cidr: string; region_code: string },
): Promise<Vpc> {
  visibleProject(p, projectId);
  const name = checkName('name', body.name);
  const block = parseVpcCidr(body.cidr);
  const cidr = format(block);
  checkRegion(ctx, body.region_code);
  const vpc: Vpc = {
    id: numericId(),
    projectId,
    name,
    cidr,
    regionCode: body.region_code,
    createdAt: iso(ctx.clock()),
    version: 1,
  };
  await ctx.store.transaction(async (tx) => {
    // Within a project and region, VPCs can be peered and services moved
    // between them: their blocks must not overlap, or an address would be in two.
    const clash = (await tx.vpcs.listByProject(projectId)).find(
      (v) => v.regionCode === vpc.regionCode && overlaps(parseVpcCidr(v.cidr), block),
    );
    if (clash) {
      throw conflict(
        `cidr ${cidr} overlaps ${clash.cidr} of VPC ${clash.id} (${clash.name}) in ${clash.regionCode}; choose a block that does not.`,
      );
    }
    await tx.vpcs.insert(vpc);
  });
  return vpc;
}

export async function renameVpc(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  vpcId: string,
  newName: string,
): Promise<Vpc> {
  const name = checkName('name', newName);
  return ctx.store.transaction(async (tx) => {
    const vpc = await getVpc({ store: tx }, p, projectId, vpcId);
    return tx.vpcs.update({ ...vpc, name });
  });
}

export async function deleteVpc(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  vpcId: string,
): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const vpc = await getVpc({ store: tx }, p, projectId, vpcId);
    const services = await tx.services.countByVpc(vpc.id);
    if (services > 0) {
      throw conflict(`VPC ${vpcId} still has ${services} service(s) attached; detach them first.`);
    }
    const peerings = await tx.peerings.listByVpc(vpc.id);
    if (peerings.length > 0) {
      throw conflict(`VPC ${vpcId} still has ${peerings.length} peering(s); delete them first.`);
    }
    await tx.vpcs.delete(vpc.id);
  });
}

export function checkRegion(ctx: Ctx, region: string): string {
  if (!ctx.settings.regions.includes(region)) {
    throw invalid(
      `Unknown region_code ${JSON.stringify(region)}; this installation offers ${ctx.settings.regions.join(', ')}.`,
    );
  }
  return region;
}
