// The installation's CA for the mutual TLS between its control plane and its
// hosts, and the control plane's own certificate from it. Both live in the
// store (SecretRepo), not a data directory: every control-plane process must
// present the same identity and trust the same hosts. Made on first use; two
// processes making them at once keep the first one stored.

import { CONTROL_PLANE_CN } from '../domain/hosts.js';
import { certSha256, type KeyPair, makeCa, makeKeyAndRequest, signRequest } from '../lib/x509.js';
import type { Store } from '../store/store.js';

const CA = 'hosts-ca';
const SERVICES_CA = 'services-ca';
const CONTROL_PLANE = 'hosts-control-plane';
/** Leaves last as long as TLS clients accept (825 days); renewal comes with rotation (docs). */
export const LEAF_DAYS = 825;

export interface InstallationCa extends KeyPair {
  /** What a joining host pins: SHA-256 of the CA certificate. */
  sha256: string;
}

export async function installationCa(store: Store): Promise<InstallationCa> {
  const pair = await stored(store, CA, () => makeCa('Basin installation CA'));
  return { ...pair, sha256: certSha256(pair.cert) };
}

/** The certificate the control plane serves hosts with, and shows them as a client. */
export async function controlPlaneIdentity(store: Store, ca: InstallationCa): Promise<KeyPair> {
  return stored(store, CONTROL_PLANE, async () => {
    const { key, csr } = await makeKeyAndRequest(CONTROL_PLANE_CN);
    const cert = await signRequest(ca, csr, { cn: CONTROL_PLANE_CN, names: [], days: LEAF_DAYS });
    return { cert, key };
  });
}

/** The key pair stored as `name`, made on first use; of two made at once, the first stored is kept. */
export async function stored(
  store: Store,
  name: string,
  make: () => Promise<KeyPair>,
): Promise<KeyPair> {
  const found = await store.secrets.get(name);
  if (found !== undefined) return JSON.parse(found) as KeyPair;
  const made = JSON.stringify(await make());
  return JSON.parse(await store.transaction((tx) => tx.secrets.putIfAbsent(name, made))) as KeyPair;
}

/**
 * The CA clients trust for every service of an installation of hosts
 * (`sslmode=verify-full`): a root that signs one CA per host
 * (hostServicesCa), which issues that host's server certificates. Apart
 * from the hosts' CA: a service's certificate must never be one a host or
 * the control plane would accept, nor the other way.
 */
export async function servicesCa(store: Store): Promise<KeyPair> {
  return stored(store, SERVICES_CA, () => makeCa('Basin services CA', 1));
}

/** Signs a host's request for the CA of its services (under servicesCa). */
export async function hostServicesCa(store: Store, hostName: string, csr: string): Promise<string> {
  const root = await servicesCa(store);
  return signRequest(root, csr, {
    cn: `Basin services CA (host ${hostName})`,
    names: [],
    days: 3650,
    ca: true,
  });
}
