// A repository host's identity for its pgBackRest TLS servers
// (docs/decisions.md, "Several hosts": the repository host): a key made
// here (it never leaves the host), signed by the control plane under the
// installation's repositories CA for this host's address, the name
// pgBackRest's clients compare with repo1-host. Asked for at every start
// (a new address, or a CA renewed, takes effect then) and kept in the data
// directory, root's, for the servers to be given.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { CONTROL_PLANE_CN } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import { makeKeyAndRequest } from '../lib/x509.js';
import { type AgentIdentity, writeAtomically } from './agent-files.js';

export interface RepositoryServerIdentity {
  cert: string;
  key: string;
  /** The repositories CA: what the servers verify clients' certificates with. */
  ca: string;
}

/** Where the identity is kept: <data-dir>/repository/tls/. */
export const repositoryTlsDir = (dataDir: string) => join(dataDir, 'repository', 'tls');

export async function repositoryServerIdentity(
  id: AgentIdentity,
  dataDir: string,
): Promise<RepositoryServerIdentity> {
  const { key, csr } = await makeKeyAndRequest('repository server');
  const res = await httpsJson(`${id.controlPlane}/v1/hosts/repository-server`, {
    ca: id.ca,
    cert: id.cert,
    key: id.key,
    peerCn: CONTROL_PLANE_CN,
    body: { csr },
  });
  if (res.status !== 200) {
    const b = res.body as { message?: string };
    throw new Error(
      `The control plane did not sign this repository host's server certificate (HTTP ${res.status}): ${b.message ?? res.text}`,
    );
  }
  const b = res.body as { certificate: string; ca_certificate: string };
  const made = { cert: b.certificate, key, ca: b.ca_certificate };
  const dir = repositoryTlsDir(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeAtomically(join(dir, 'server.key'), made.key);
  writeAtomically(join(dir, 'server.crt'), made.cert);
  writeAtomically(join(dir, 'ca.crt'), made.ca);
  return made;
}

/**
 * A database host's signer for its services' side of their repositories
 * on the repository host (drivers/local/backups/repository/remote.ts): the
 * service's client certificate, or its backup source's server certificate,
 * for a key made here; the control plane signs them only for a service
 * placed on this host.
 */
export function repositoryClientSigner(id: AgentIdentity) {
  return async (serviceId: string, kind: 'client' | 'source' | 'fork', csr: string) => {
    const res = await httpsJson(`${id.controlPlane}/v1/hosts/repository-client`, {
      ca: id.ca,
      cert: id.cert,
      key: id.key,
      peerCn: CONTROL_PLANE_CN,
      body: { service_id: serviceId, csr, kind },
    });
    if (res.status !== 200) {
      const b = res.body as { message?: string };
      throw new Error(
        `The control plane did not sign the service's repository ${kind} certificate (HTTP ${res.status}): ${b.message ?? res.text}`,
      );
    }
    const b = res.body as { certificate: string; ca_certificate: string };
    return { certificate: b.certificate, ca: b.ca_certificate };
  };
}
