// Joining an installation: the agent fetches the control plane's CA and
// trusts it only when its SHA-256 is the one the operator was given with the
// token (`basin host token` prints both), so a machine in the middle cannot
// pose as the control plane. It then sends a signing request for a key that
// never leaves this host, with the token; the control plane answers with the
// host's certificate, naming the host by the id it chose.

import { CONTROL_PLANE_CN, type HostRole } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import { certSha256, makeKeyAndRequest } from '../lib/x509.js';
import type { AgentIdentity } from './agent-files.js';
import { hostCapacity, wireCapacity } from './capacity.js';

export interface JoinOptions {
  controlPlane: string;
  token: string;
  caSha256: string;
  name: string;
  address: string;
  agentPort: number;
  zone: string;
  role: HostRole;
  dataDir: string;
}

export class JoinError extends Error {}

export async function join(o: JoinOptions): Promise<AgentIdentity> {
  const caAnswer = await httpsJson(`${o.controlPlane}/v1/hosts/ca`);
  const ca = caAnswer.text;
  let sha: string | undefined;
  try {
    sha = caAnswer.status === 200 ? certSha256(ca) : undefined;
  } catch {
    sha = undefined;
  }
  if (sha !== o.caSha256.toLowerCase().replaceAll(':', '')) {
    throw new JoinError(
      `The control plane at ${o.controlPlane} does not present the CA of --ca-sha256 (it answered ${sha ?? `HTTP ${caAnswer.status}`}): check the address, and the hash that \`basin host token\` printed.`,
    );
  }
  const { key, csr } = await makeKeyAndRequest(`join ${o.name}`);
  const res = await httpsJson(`${o.controlPlane}/v1/hosts/join`, {
    ca,
    peerCn: CONTROL_PLANE_CN,
    body: {
      token: o.token,
      csr,
      name: o.name,
      address: o.address,
      agent_port: o.agentPort,
      zone: o.zone,
      role: o.role,
      capacity: wireCapacity(hostCapacity(o.dataDir)),
    },
  });
  if (res.status !== 201) {
    const b = res.body as { message?: string };
    throw new JoinError(
      `The control plane refused the join (HTTP ${res.status}): ${b.message ?? res.text}`,
    );
  }
  const b = res.body as { host_id: string; certificate: string; ca_certificate: string };
  return {
    hostId: b.host_id,
    name: o.name,
    role: o.role,
    controlPlane: o.controlPlane,
    cert: b.certificate,
    key,
    ca: b.ca_certificate,
  };
}
