// The control plane calling a host's agent: as a client with the control
// plane's certificate, and trusting only the certificate issued to that
// host (its CN names the host's id), so an agent answering at a host's
// address is that host.

import { AppError } from '../domain/errors.js';
import { agentUrl, type Host, hostCertCn } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import type { Store } from '../store/store.js';
import { controlPlaneIdentity, installationCa } from './installation-ca.js';

export async function checkAgent(store: Store, host: Host): Promise<unknown> {
  const ca = await installationCa(store);
  const me = await controlPlaneIdentity(store, ca);
  let res;
  try {
    res = await httpsJson(agentUrl(host, '/v1/agent/health'), {
      ca: ca.cert,
      cert: me.cert,
      key: me.key,
      peerCn: hostCertCn(host.id),
      timeoutMs: 5000,
    });
  } catch (err) {
    throw new AppError(
      'UNAVAILABLE',
      `Host ${host.name} does not answer: ${(err as Error).message}`,
    );
  }
  if (res.status !== 200) {
    throw new AppError('UNAVAILABLE', `Host ${host.name} answered HTTP ${res.status}: ${res.text}`);
  }
  return res.body;
}
