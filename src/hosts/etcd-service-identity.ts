// A service's identity in etcd, for its Patroni (issue 22; the contract in
// docs/decisions.md, "etcd on the hosts"): the etcd user
// `basin-service-<id>` with a password, whose one role may read and write
// `/basin/<id>/` and nothing else, and a client certificate without a CN
// that only opens TLS. Not the certificate's CN as the user: Patroni 3.0
// speaks to etcd 3.4's JSON gateway, which takes no user from a certificate
// and, with auth on, refuses one that has a CN. A tenant is root in its OS
// user and so reads its Patroni's password and key: with them, it touches
// only its own service's keys.

import { AppError } from '../domain/errors.js';
import { ETCD_SERVICE_ID, serviceEtcdPrefix, serviceEtcdUser } from '../domain/etcd.js';
import type { Store } from '../store/store.js';
import { etcdMembersCa, signServiceClientCert } from './etcd-ca.js';
import { enableAuth, rootClient } from './etcd-cluster.js';
import { type EtcdClient, etcdctl, memberList } from './etcdctl.js';
import { serviceSecret } from './service-secrets.js';

export interface ServiceEtcdIdentity {
  /** The client certificate (for the key of the request): no CN, TLS only. */
  certificate: string;
  /** What the members' certificates are verified with. */
  ca: string;
  /** The members' client URLs: Patroni's `etcd3.hosts`. */
  endpoints: string[];
  /** Patroni's `etcd3.username` and `etcd3.password`. */
  username: string;
  password: string;
}

/**
 * Grants service `serviceId` its user (with its password: set again at each
 * call, so a grant converges) and role (idempotent), and signs `csr` (a key
 * made where Patroni runs). Needs the cluster up: UNAVAILABLE otherwise,
 * retryable. The answer holds a secret: hand it over mutual TLS only, never
 * log it.
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
  let certificate: string;
  try {
    certificate = await signServiceClientCert(store, csr);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  const password = await serviceSecret(store, serviceId, 'etcd');
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
    // The password on stdin, never in a command line (/proc/<pid>/cmdline is world-readable).
    const added = await etcdctl(client, ['user', 'add', user, '--interactive=false'], password)
      .then(() => true)
      .catch((err: Error) => {
        if (!/already/i.test(err.message)) throw err;
        return false;
      });
    // A user there already keeps its password when it still logs in:
    // changing it (even to itself) would void the tokens of the service's
    // running Patronis.
    if (!added && !(await logsIn(client, serviceId, password))) {
      await etcdctl(client, ['user', 'passwd', user, '--interactive=false'], password);
    }
    await idempotent(etcdctl(client, ['user', 'grant-role', user, user]));
  } catch (err) {
    throw new AppError('UNAVAILABLE', `etcd did not grant ${user}: ${(err as Error).message}`);
  }
  return {
    certificate,
    ca: (await etcdMembersCa(store)).cert,
    endpoints: endpoints.length > 0 ? endpoints : [...client.endpoints],
    username: user,
    password,
  };
}

/**
 * Takes a service's user, role and keys away: its password then logs in as
 * no one, and its certificate alone names no user.
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

/** Whether the service's user logs in with `password` (and reads its own prefix). */
async function logsIn(client: EtcdClient, serviceId: string, password: string): Promise<boolean> {
  const name = serviceEtcdUser(serviceId);
  try {
    await etcdctl(client, ['get', serviceEtcdPrefix(serviceId), '--prefix', '--keys-only', '--limit=1'], undefined, { name, password }); // prettier-ignore
    return true;
  } catch (err) {
    if (/authentication failed|invalid auth/i.test((err as Error).message)) return false;
    throw err;
  }
}

async function idempotent(run: Promise<unknown>): Promise<void> {
  try {
    await run;
  } catch (err) {
    if (!/already/i.test((err as Error).message)) throw err;
  }
}
