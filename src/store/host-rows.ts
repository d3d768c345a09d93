// Rows of the hosts and host_tokens tables as domain values: the same
// columns in both stores (BIGINT comes back from PostgreSQL as a number).

import type { Host, HostToken, Placement } from '../domain/hosts.js';

export function hostFromRow(row: unknown): Host | undefined {
  if (row === undefined) return undefined;
  const r = row as Record<string, unknown>;
  return {
    id: r.id as string,
    // Hosts joined before roles were database hosts (migration 9's default).
    role: r.role === 'repository' ? 'repository' : 'database',
    name: r.name as string,
    address: r.address as string,
    agentPort: Number(r.agent_port),
    zone: r.zone as string,
    capacity: JSON.parse(r.capacity as string) as Host['capacity'],
    usage: r.usage === null ? null : (JSON.parse(r.usage as string) as Host['usage']),
    certSha256: r.cert_sha256 as string,
    joinedAt: r.joined_at as string,
    heartbeatAt: Number(r.heartbeat_at),
    ...(Number(r.draining) === 1 ? { draining: true } : {}),
  };
}

export function tokenFromRow(row: unknown): HostToken | undefined {
  if (row === undefined) return undefined;
  const r = row as Record<string, unknown>;
  return {
    id: r.id as string,
    secretHash: r.secret_hash as string,
    createdAt: r.created_at as string,
    expiresAt: Number(r.expires_at),
    usedBy: (r.used_by as string | null) ?? null,
  };
}

/** A host's columns in the order of `INSERT INTO hosts (id, name, address, agent_port, zone, capacity, usage, cert_sha256, joined_at, heartbeat_at, role)`. */
export function hostColumns(h: Host): unknown[] {
  return [
    h.id,
    h.name,
    h.address,
    h.agentPort,
    h.zone,
    JSON.stringify(h.capacity),
    h.usage === null ? null : JSON.stringify(h.usage),
    h.certSha256,
    h.joinedAt,
    h.heartbeatAt,
    h.role,
  ];
}

export function placementFromRow(row: unknown): Placement | undefined {
  if (row === undefined) return undefined;
  const r = row as Record<string, unknown>;
  return {
    resourceId: r.resource_id as string,
    hostId: r.host_id as string,
    cpuMillis: Number(r.cpu_millis),
    memoryMb: Number(r.memory_mb),
    ...(typeof r.moved_from === 'string' ? { movedFrom: r.moved_from } : {}),
  };
}
