// The CA this host issues its services' certificates from: a key made here
// (it never leaves the host), signed by the control plane as a CA under the
// installation's services root, so that clients verify every service of
// every host with the one root (docs/decisions.md, "Several hosts").

import { CONTROL_PLANE_CN } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import { makeKeyAndRequest } from '../lib/x509.js';
import type { AgentIdentity } from './agent-files.js';

/** The pair for the local driver's CA: this host's CA certificate, then the root, and its key. */
export async function servicesCaFor(id: AgentIdentity): Promise<{ cert: string; key: string }> {
  const { key, csr } = await makeKeyAndRequest('host services CA');
  const res = await httpsJson(`${id.controlPlane}/v1/hosts/services-ca`, {
    ca: id.ca,
    cert: id.cert,
    key: id.key,
    peerCn: CONTROL_PLANE_CN,
    body: { csr },
  });
  if (res.status !== 200) {
    throw new Error(
      `The control plane did not sign this host's services CA (HTTP ${res.status}): ${res.text}`,
    );
  }
  const b = res.body as { certificate: string; root_certificate: string };
  return { cert: `${b.certificate.trim()}\n${b.root_certificate.trim()}\n`, key };
}
