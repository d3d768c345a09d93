import { notFound } from '../domain/errors.js';
import { peeringProvision, serviceConverge } from '../domain/operations.js';
import { NEW_PEERING_STATUS } from '../domain/peering-transitions.js';
import { checkName } from '../domain/service-rules.js';
import type { Peering } from '../domain/types.js';
import { iso } from '../lib/clock.js';
import { numericId } from '../lib/ids.js';
import type { Repos } from '../store/store.js';
import type { Ctx, Principal } from './context.js';
import { getVpc } from './vpcs.js';

export async function listPeerings(ctx: Ctx, p: Principal, projectId: string, vpcId: string) {
  const vpc = await getVpc(ctx, p, projectId, vpcId);
  return ctx.store.peerings.listByVpc(vpc.id);
}

export async function getPeering(
  ctx: Ctx | { store: Repos },
  p: Principal,
  projectId: string,
  vpcId: string,
  peeringId: string,
): Promise<Peering> {
  const vpc = await getVpc(ctx, p, projectId, vpcId);
  const peering = await ctx.store.peerings.get(peeringId);
  if (!peering || peering.vpcId !== vpc.id)
    throw notFound(`Peering ${peeringId} not found in VPC ${vpcId}.`);
  return peering;
}

/**
 * Records a peering request as `pending`; the engine hands it to the network
 * provisioner, which moves it to `active` or `failed`.
 */
export async function createPeering(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  vpcId: string,
  body: { peer_account_id: string; peer_region_code: string; peer_vpc_id: string },
): Promise<Peering> {
  const peering = await ctx.store.transaction(async (tx) => {
    const vpc = await getVpc({ store: tx }, p, projectId, vpcId);
    const now = ctx.clock();
    const created: Peering = {
      id: numericId(),
      projectId,
      vpcId: vpc.id,
      peerAccountId: checkName('peer_account_id', body.peer_account_id),
      peerRegionCode: checkName('peer_region_code', body.peer_region_code),
      peerVpcId: checkName('peer_vpc_id', body.peer_vpc_id),
      status: NEW_PEERING_STATUS,
      provisionedId: null,
      errorMessage: null,
      createdAt: iso(now),
      version: 1,
    };
    await tx.peerings.insert(created);
    await tx.operations.enqueue(peeringProvision(created), now);
    return created;
  });
  ctx.kick();
  return peering;
}

export async function deletePeering(
  ctx: Ctx,
  p: Principal,
  projectId: string,
  vpcId: string,
  peeringId: string,
) {
  const converging = await ctx.store.transaction(async (tx) => {
    const peering = await getPeering({ store: tx }, p, projectId, vpcId, peeringId);
    await tx.operations.cancelForResource('peering', peering.id, ctx.clock());
    await tx.peerings.delete(peering.id);
    await tx.events.deleteForResource('peering', peering.id);
    // Its peer network is no longer admitted by the VPC's services: each
    // converges to the VPC's remaining network (domain/vpc-network.ts).
    const attached = (await tx.services.listByProject(projectId)).filter(
      (s) => s.vpcId === peering.vpcId && s.status !== 'DELETING',
    );
    for (const svc of attached) await tx.operations.enqueue(serviceConverge(svc), ctx.clock());
    return attached.length;
  });
  if (converging > 0) ctx.kick();
}
