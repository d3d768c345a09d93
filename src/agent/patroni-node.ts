// What this host is given for the Patroni of a node it runs of an HA
// service across hosts (docs/decisions.md, "HA across hosts"), asked of the
// control plane over the host's mutual TLS: the service's etcd identity (a
// key made here, which never leaves the host; a certificate without a CN
// that only opens TLS; the etcd user and its password) and the passwords
// every node of the service shares (replication, REST API). The control
// plane answers only for a service with a node placed on this host. The
// passwords are secrets: they go into the node's Patroni configuration and
// nowhere else (never a log line).

import { CONTROL_PLANE_CN } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import { makeKeyAndRequest } from '../lib/x509.js';
import type { PatroniSecrets } from '../drivers/local/patroni/patroni-node.js';
import type { AgentIdentity } from './agent-files.js';

export class PatroniNodeRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function patroniNodeSecrets(
  id: AgentIdentity,
  serviceId: string,
): Promise<PatroniSecrets> {
  const { key, csr } = await makeKeyAndRequest('patroni etcd client');
  const res = await httpsJson(`${id.controlPlane}/v1/hosts/patroni-node`, {
    ca: id.ca,
    cert: id.cert,
    key: id.key,
    peerCn: CONTROL_PLANE_CN,
    body: { service_id: serviceId, csr },
  });
  if (res.status !== 200) {
    const b = res.body as { message?: string };
    throw new PatroniNodeRefused(
      res.status,
      `The control plane gave nothing for a Patroni node of service ${serviceId} (HTTP ${res.status}): ${b.message ?? res.text}`,
    );
  }
  const b = res.body as {
    etcd: {
      certificate: string;
      ca_certificate: string;
      endpoints: string[];
      username: string;
      password: string;
    };
    replication_password: string;
    restapi_password: string;
  };
  return {
    etcd: {
      cert: b.etcd.certificate,
      key,
      ca: b.etcd.ca_certificate,
      endpoints: b.etcd.endpoints,
      username: b.etcd.username,
      password: b.etcd.password,
    },
    replicationPassword: b.replication_password,
    restApiPassword: b.restapi_password,
  };
}
