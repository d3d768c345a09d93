// What the control plane answers a host's agent about its etcd member
// (POST /v1/hosts/etcd): none, or how to start it with a certificate for
// the key of the agent's request (the key never leaves the host) and the
// CAs its peers and clients are checked against.

import { AppError } from '../domain/errors.js';
import { etcdClientsCa, etcdMembersCa, signMemberCert } from './etcd-ca.js';
import { memberPlan } from './etcd-cluster.js';
import { registeredHost } from './host-registry.js';
import type { Store } from '../store/store.js';

export async function etcdMemberAnswer(
  store: Store,
  hostId: string,
  presentedSha256: string,
  csr: string | undefined,
): Promise<unknown> {
  const host = await registeredHost(store, hostId, presentedSha256);
  const plan = await memberPlan(store, host);
  if (!plan) return { member: null };
  const member = {
    name: plan.name,
    initial_cluster: plan.initialCluster,
    state: plan.state,
    token: plan.token,
  };
  if (csr === undefined) return { member };
  let certificate: string;
  try {
    certificate = await signMemberCert(store, csr, host.address);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  return {
    member,
    certificate,
    members_ca: (await etcdMembersCa(store)).cert,
    clients_ca: (await etcdClientsCa(store)).cert,
  };
}
