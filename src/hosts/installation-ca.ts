// The installation's CA for the mutual TLS between its control plane and its
// hosts, and the control plane's own certificate from it. Both live in the
// store (SecretRepo), not a data directory: every control-plane process must
// present the same identity and trust the same hosts. Made on first use; two
// processes making them at once keep the first one stored.

import {
  CONTROL_PLANE_CN,
  repositoryBackupClientCn,
  serviceRepositoryClientCn,
} from '../domain/hosts.js';
import { certSha256, type KeyPair, makeCa, makeKeyAndRequest, signRequest } from '../lib/x509.js';
import type { Store } from '../store/store.js';

const CA = 'hosts-ca';
const SERVICES_CA = 'services-ca';
const CONTROL_PLANE = 'hosts-control-plane';
const REPOSITORIES_CA = 'repositories-ca';
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

/**
 * The CA of the pgBackRest TLS between database hosts and the repository
 * host (docs/decisions.md, "Several hosts": the repository host): it signs
 * the repository host's server certificate and each service's client
 * certificate (CN basin-service-<id>, what tls-server-auth authorizes for
 * its stanza). A root of its own, apart from the hosts' CA (a client
 * certificate of a service must never pass for a host or the control plane)
 * and from the services root (which every database client trusts, and
 * which each database host holds a CA under: a host could then mint any
 * service's client name).
 */
export async function repositoriesCa(store: Store): Promise<KeyPair> {
  return stored(store, REPOSITORIES_CA, () => makeCa('Basin repositories CA', 0));
}

/**
 * Signs a repository host's request for its pgBackRest servers'
 * certificate: its address as the CN and no SAN (pgBackRest 2.45 compares
 * the CN with repo1-host, and with any SAN present it looks only there and
 * matches no IP address: tried here), for servers only.
 */
export async function repositoryServerCert(
  store: Store,
  address: string,
  csr: string,
): Promise<string> {
  return signRequest(await repositoriesCa(store), csr, {
    cn: address,
    names: [],
    days: LEAF_DAYS,
    use: 'server',
  });
}

/**
 * Signs a database host's request for a service's pgBackRest client
 * certificate (CN basin-service-<id>: what the service's repository server
 * authorizes for its stanza alone), for clients only.
 */
export async function serviceRepositoryClientCert(
  store: Store,
  serviceId: string,
  csr: string,
  days = LEAF_DAYS,
): Promise<string> {
  return signRequest(await repositoriesCa(store), csr, {
    cn: serviceRepositoryClientCn(serviceId),
    names: [],
    days,
    use: 'client',
  });
}

/**
 * Signs the other two identities of a backup across hosts (docs/decisions.md,
 * "Several hosts": backups on the repository host), under the repositories
 * CA: a database host's server that a backup on the repository host reads a
 * service's data through (`source`: the host's address as the CN, which
 * pgBackRest compares with pg1-host, servers only), and the repository
 * host's client at that server (`backup`: CN basin-repository-<id>, clients
 * only).
 */
export async function repositoryPeerCert(
  store: Store,
  kind: 'source' | 'backup',
  name: string,
  csr: string,
): Promise<string> {
  return signRequest(await repositoriesCa(store), csr, {
    cn: kind === 'source' ? name : repositoryBackupClientCn(name),
    names: [],
    days: LEAF_DAYS,
    use: kind === 'source' ? 'server' : 'client',
  });
}
