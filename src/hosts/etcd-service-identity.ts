// A service's identity in etcd, for its Patroni (issue 22; the contract in
// docs/decisions.md, "etcd on the hosts"): the etcd user
// `basin-service-<id>` with a password, whose one role may read and write
// `/basin/<id>/` and nothing else, and a client certificate without a CN
// that only opens TLS. Not the certificate's CN as the user: Patroni 3.0
// speaks to etcd 3.4's JSON gateway, which takes no user from a certificate
// and, with auth on, refuses one that has a CN. A tenant is root in its OS
// user and so reads its Patroni's password and key: with them, it touches
// only its own service's keys.

import { createHmac, randomBytes } from 'node:crypto';
import { AppError } from '../domain/errors.js';
import { ETCD_SERVICE_ID, serviceEtcdPrefix, serviceEtcdUser } from '../domain/etcd.js';
import { nodePlacements } from '../domain/hosts.js';
import type { Store } from '../store/store.js';
import { etcdMembersCa, signServiceClientCert } from './etcd-ca.js';
import { enableAuth, rootClient } from './etcd-cluster.js';
import { etcdctl, memberList } from './etcdctl.js';
import { registeredHost } from './host-registry.js';

/** The secret (store `secrets`) every service's etcd password is derived from. */
const PASSWORDS_KEY = 'etcd-service-passwords-key';

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
  const password = await serviceEtcdPassword(store, serviceId);
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
    if (!added) await etcdctl(client, ['user', 'passwd', user, '--interactive=false'], password);
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
 * A service's etcd identity for the host that asks (`/v1/hosts/service-etcd`,
 * over mutual TLS with the host's certificate), only when a node of the
 * service is placed on that host: a host, or a tenant root on it, gets the
 * etcd password of its own nodes' services and no other's.
 */
export async function issueServiceEtcd(
  store: Store,
  hostId: string,
  presentedSha256: string,
  serviceId: string,
  csr: string,
): Promise<ServiceEtcdIdentity> {
  const host = await registeredHost(store, hostId, presentedSha256);
  const nodes = nodePlacements(await store.placements.list(), serviceId);
  if (host.role !== 'database' || !nodes.some((p) => p.hostId === host.id)) {
    throw new AppError(
      'FORBIDDEN',
      `No node of service ${serviceId} is placed on host ${host.name}: a host is given the etcd identity of its own nodes' services only.`,
    );
  }
  return grantServiceEtcd(store, serviceId, csr);
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

/**
 * A service's etcd password: HMAC-SHA256 of its id under one random key in
 * the store's secrets (made on first use, first writer wins), so every
 * control-plane process derives the same one, and nothing per service is
 * left in the store once the service is gone. Service ids are random and
 * never reused, so a password never comes back for another service.
 */
async function serviceEtcdPassword(store: Store, serviceId: string): Promise<string> {
  let key = await store.secrets.get(PASSWORDS_KEY);
  if (key === undefined) {
    const made = randomBytes(32).toString('hex');
    key = await store.transaction((tx) => tx.secrets.putIfAbsent(PASSWORDS_KEY, made));
  }
  return createHmac('sha256', Buffer.from(key, 'hex')).update(serviceId).digest('base64url');
}

async function idempotent(run: Promise<unknown>): Promise<void> {
  try {
    await run;
  } catch (err) {
    if (!/already/i.test((err as Error).message)) throw err;
  }
}
