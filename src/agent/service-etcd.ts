// A service's etcd identity, for the Patroni of a node of it that this
// host runs (docs/decisions.md, "etcd on the hosts"): a key made here (it
// never leaves the host), a certificate without a CN that only opens TLS,
// and the service's etcd user and password, asked of the control plane over
// the host's mutual TLS. The control plane answers only for a service with
// a node placed on this host. The password is a secret: it goes into the
// node's Patroni configuration and nowhere else (never a log line).

import { CONTROL_PLANE_CN } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import { makeKeyAndRequest } from '../lib/x509.js';
import type { AgentIdentity } from './agent-files.js';

export interface NodeEtcdIdentity {
  cert: string;
  key: string;
  /** The etcd members CA: what Patroni verifies the members with. */
  ca: string;
  /** The members' client URLs: Patroni's `etcd3.hosts`. */
  endpoints: string[];
  username: string;
  password: string;
}

export class ServiceEtcdRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function serviceEtcdIdentity(
  id: AgentIdentity,
  serviceId: string,
): Promise<NodeEtcdIdentity> {
  const { key, csr } = await makeKeyAndRequest('service etcd client');
  const res = await httpsJson(`${id.controlPlane}/v1/hosts/service-etcd`, {
    ca: id.ca,
    cert: id.cert,
    key: id.key,
    peerCn: CONTROL_PLANE_CN,
    body: { service_id: serviceId, csr },
  });
  if (res.status !== 200) {
    const b = res.body as { message?: string };
    throw new ServiceEtcdRefused(
      res.status,
      `The control plane gave no etcd identity for service ${serviceId} (HTTP ${res.status}): ${b.message ?? res.text}`,
    );
  }
  const b = res.body as {
    certificate: string;
    ca_certificate: string;
    endpoints: string[];
    username: string;
    password: string;
  };
  return {
    cert: b.certificate,
    key,
    ca: b.ca_certificate,
    endpoints: b.endpoints,
    username: b.username,
    password: b.password,
  };
}
