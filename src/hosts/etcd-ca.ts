// The CAs of etcd on the hosts (docs/decisions.md, "etcd on the hosts"),
// kept in the store's secrets as the hosts' CA is. Two, not one and not the
// hosts' CA: the members CA signs only members' certificates (peers accept
// only it, so a service's client certificate can never speak raft), and the
// clients CA signs the identities that call etcd: the control plane's
// `root` (whose CN is its etcd user) and one per service for its Patroni
// (no CN: it only opens TLS, and the service's user has a password).
// Neither is trusted by anything of the hosts' mutual TLS, nor the other way.

import { ETCD_MEMBER_CN, ETCD_ROOT_USER } from '../domain/etcd.js';
import { type KeyPair, makeCa, makeKeyAndRequest, signRequest } from '../lib/x509.js';
import type { Store } from '../store/store.js';
import { LEAF_DAYS, stored } from './installation-ca.js';

export function etcdMembersCa(store: Store): Promise<KeyPair> {
  return stored(store, 'etcd-members-ca', () => makeCa('Basin etcd members CA'));
}

export function etcdClientsCa(store: Store): Promise<KeyPair> {
  return stored(store, 'etcd-clients-ca', () => makeCa('Basin etcd clients CA'));
}

/** The control plane's etcd identity: the user `root`. Only the store holds it. */
export function etcdRootIdentity(store: Store): Promise<KeyPair> {
  return stored(store, 'etcd-root', async () => {
    const { key, csr } = await makeKeyAndRequest(ETCD_ROOT_USER);
    const cert = await signRequest(await etcdClientsCa(store), csr, {
      cn: ETCD_ROOT_USER,
      names: [],
      days: LEAF_DAYS,
    });
    return { cert, key };
  });
}

/** A member's certificate (peer and client port) for the key of `csr`, valid for `address`. */
export async function signMemberCert(store: Store, csr: string, address: string): Promise<string> {
  return signRequest(await etcdMembersCa(store), csr, {
    cn: ETCD_MEMBER_CN,
    names: [address],
    days: LEAF_DAYS,
  });
}

/**
 * A service's client certificate: no CN, a client's use only. It opens TLS
 * (`--client-cert-auth`) and names no etcd user, because Patroni 3.0 speaks
 * to etcd 3.4's JSON gateway, which refuses a certificate with a CN once
 * auth is on; the service's user logs in with its password.
 */
export async function signServiceClientCert(store: Store, csr: string): Promise<string> {
  return signRequest(await etcdClientsCa(store), csr, {
    cn: null,
    names: [],
    days: LEAF_DAYS,
    use: 'client',
  });
}
