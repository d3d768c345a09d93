// A service's identity in etcd, for its Patroni (issue 22; the contract in
// docs/decisions.md, "etcd on the hosts"): a client certificate whose CN is
// the etcd user `basin-service-<id>`, whose one role may read and write
// `/basin/<id>/` and nothing else. A tenant is root in its OS user and so
// reads its Patroni's key: with it, it touches only its own service's keys.

import { AppError } from '../domain/errors.js';
import { ETCD_SERVICE_ID, serviceEtcdPrefix, serviceEtcdUser } from '../domain/etcd.js';
import type { Store } from '../store/store.js';
import { etcdMembersCa, signClientCert } from './etcd-ca.js';
import { enableAuth, rootClient } from './etcd-cluster.js';
import { etcdctl, memberList } from './etcdctl.js';

export interface ServiceEtcdIdentity {
  /** The user's certificate (for the key of the request). */
  certificate: string;
  /** What the members' certificates are verified with. */
  ca: string;
  /** The members' client URLs: Patroni's `etcd3.hosts`. */
  endpoints: string[];
}

/**
 * Grants service `serviceId` its user and role (idempotent) and signs
 * `csr` (a key made where Patroni runs) as that user. Needs the cluster
 * up: UNAVAILABLE otherwise, retryable.
 */
export async function grantServiceEtcd(
  store: Store,
  serviceId: string,
  csr: string,
): Promise<ServiceEtcdIdentity> {
  if (!ETCD_SERVICE_ID.test(serviceId)) {
    throw new AppError('INVALID_REQUEST', `Not a service id: ${serviceId}.`);
  }
  const user = serviceEtcdUser(serviceId);
  const client = await rootClient(store);
  let endpoints: string[];
  try {
    const members = await memberList(client);
    endpoints = members.flatMap((m) => m.clientUrls);
    // Not before RBAC is on (the loop may not have turned it on yet).
    await enableAuth(client);
    await idempotent(etcdctl(client, ['role', 'add', user]));
    await etcdctl(client, [
      'role', 'grant-permission', user, 'readwrite', serviceEtcdPrefix(serviceId), '--prefix',
    ]); // prettier-ignore
    await idempotent(etcdctl(client, ['user', 'add', user, '--no-password']));
    await idempotent(etcdctl(client, ['user', 'grant-role', user, user]));
  } catch (err) {
    throw new AppError('UNAVAILABLE', `etcd did not grant ${user}: ${(err as Error).message}`);
  }
  let certificate: string;
  try {
    certificate = await signClientCert(store, csr, user);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  return {
    certificate,
    ca: (await etcdMembersCa(store)).cert,
    endpoints: endpoints.length > 0 ? endpoints : [...client.endpoints],
  };
}

/**
 * Takes a service's user, role and keys away: a certificate issued to it
 * names a user that no longer exists, and etcd refuses it.
 */
export async function revokeServiceEtcd(store: Store, serviceId: string): Promise<void> {
  if (!ETCD_SERVICE_ID.test(serviceId)) return;
  const user = serviceEtcdUser(serviceId);
  const client = await rootClient(store);
  const gone = (run: Promise<unknown>) =>
    run.catch((err: Error) => {
      if (!/not found/i.test(err.message)) throw err;
    });
  await gone(etcdctl(client, ['user', 'delete', user]));
  await gone(etcdctl(client, ['role', 'delete', user]));
  await etcdctl(client, ['del', serviceEtcdPrefix(serviceId), '--prefix']);
}

async function idempotent(run: Promise<unknown>): Promise<void> {
  try {
    await run;
  } catch (err) {
    if (!/already/i.test((err as Error).message)) throw err;
  }
}
