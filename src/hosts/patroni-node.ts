// What the host of a node of an HA service across hosts is given for that
// node's Patroni (docs/decisions.md, "HA across hosts"), asked for with its
// host certificate (`/v1/hosts/patroni-node`): the service's etcd identity
// (a certificate for a key made on the host, the user and its password)
// and the passwords every node of the service must share (the replication
// role's, the REST API's). Only while a node of the service is placed on
// that host: a host, or a tenant root on it, learns the secrets of its own
// nodes' services and no other's.

import { AppError } from '../domain/errors.js';
import { nodePlacements } from '../domain/hosts.js';
import type { Store } from '../store/store.js';
import { grantServiceEtcd, type ServiceEtcdIdentity } from './etcd-service-identity.js';
import { registeredHost } from './host-registry.js';
import { serviceSecret } from './service-secrets.js';

export interface PatroniNodeSecrets {
  etcd: ServiceEtcdIdentity;
  replicationPassword: string;
  restApiPassword: string;
}

export async function issuePatroniNode(
  store: Store,
  hostId: string,
  presentedSha256: string,
  serviceId: string,
  csr: string,
): Promise<PatroniNodeSecrets> {
  const host = await registeredHost(store, hostId, presentedSha256);
  const nodes = nodePlacements(await store.placements.list(), serviceId);
  if (host.role !== 'database' || !nodes.some((p) => p.hostId === host.id)) {
    throw new AppError(
      'FORBIDDEN',
      `No node of service ${serviceId} is placed on host ${host.name}: a host is given the secrets of its own nodes' services only.`,
    );
  }
  return {
    etcd: await grantServiceEtcd(store, serviceId, csr),
    replicationPassword: await serviceSecret(store, serviceId, 'replication'),
    restApiPassword: await serviceSecret(store, serviceId, 'patroni-api'),
  };
}
