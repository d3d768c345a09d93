// A small client of a node's Patroni REST API
// (https://patroni.readthedocs.io/en/latest/rest_api.html), for Basin to
// read what Patroni decided: the cluster's members, who leads, each one's
// lag and timeline. Basin reads; it never asks Patroni to fail over (the
// members decide that among themselves, through etcd: docs/decisions.md,
// Patroni). TLS both ways: the node's certificate is checked against the
// installation's CA and for the address Basin dialled; Basin presents its
// own certificate, which the API requires (verify_client: required).

import { Agent, request } from 'node:https';
import { createSecureContext } from 'node:tls';
import type {
  ClusterState,
  MemberRole,
  PatroniMemberState,
  WalSender,
} from '../../../domain/patroni-cluster.js';

export interface ClientTls {
  /** The CA the node's certificate must chain to. */
  ca: string;
  /** Basin's certificate and key, PEM. */
  cert: string;
  key: string;
}

// The cluster's shape is the domain's: the control plane reads it too.
export type {
  ClusterState,
  MemberRole,
  PatroniMemberState,
  WalSender,
} from '../../../domain/patroni-cluster.js';

/** What one GET answered: the status (200, 503…) and its JSON body. */
export interface ApiAnswer {
  status: number;
  body: unknown;
}

/**
 * One agent per identity Basin shows: its TLS context (the CA, its
 * certificate and key, parsed) built once, not at every request, and its
 * TLS sessions resumed (a shorter handshake, on Patroni's side too). An
 * agent polls its nodes' APIs every few seconds; building the context
 * and a full handshake each time was a fifth of its CPU in an HA test
 * file, and a quarter of Patroni's.
 * No keep-alive: a socket Patroni closed meanwhile (a restart) would fail
 * the next request.
 */
const agents = new Map<string, Agent>();
const MAX_AGENTS = 8;

function agentFor(tls: ClientTls): Agent {
  const key = `${tls.ca}\0${tls.cert}\0${tls.key}`;
  let agent = agents.get(key);
  if (!agent) {
    // A renewed certificate is a new identity; the oldest is dropped.
    for (const [k, old] of agents) {
      if (agents.size < MAX_AGENTS) break;
      old.destroy();
      agents.delete(k);
    }
    agent = new Agent({ keepAlive: false, secureContext: createSecureContext(tls) });
    agents.set(key, agent);
  }
  return agent;
}

/** GET `path` of the REST API at `url` (https://address:port). */
export function apiGet(url: string, path: string, tls: ClientTls, timeoutMs = 5000) {
  return apiRequest(url, 'GET', path, tls, timeoutMs);
}

/**
 * A request to the REST API at `url`, with a JSON body and the REST API's
 * password (its unsafe endpoints ask for it) when given.
 */
export function apiRequest(
  url: string,
  method: 'GET' | 'POST' | 'PATCH',
  path: string,
  tls: ClientTls,
  timeoutMs = 5000,
  o: { body?: unknown; auth?: { username: string; password: string } } = {},
) {
  const body = o.body === undefined ? undefined : JSON.stringify(o.body);
  const headers: Record<string, string> = {
    ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    ...(o.auth
      ? {
          authorization: `Basic ${Buffer.from(`${o.auth.username}:${o.auth.password}`).toString('base64')}`,
        }
      : {}),
  };
  return new Promise<ApiAnswer>((resolve, reject) => {
    const req = request(
      new URL(path, url),
      { method, agent: agentFor(tls), timeout: timeoutMs, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // Not JSON: the text is the body.
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from Patroni at ${url} in time`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** The cluster as the node at `url` sees it (GET /cluster). */
export async function clusterState(url: string, tls: ClientTls): Promise<ClusterState> {
  const a = await apiGet(url, '/cluster', tls);
  if (a.status !== 200) throw new Error(`Patroni at ${url} answered ${a.status} to GET /cluster`);
  return parseCluster(a.body);
}

/** Reads GET /cluster's body, keeping only what has the expected shape. */
export function parseCluster(body: unknown): ClusterState {
  const raw = (body as { members?: unknown; pause?: unknown } | null) ?? {};
  const list = Array.isArray(raw.members) ? (raw.members as Record<string, unknown>[]) : [];
  const members: PatroniMemberState[] = [];
  for (const m of list) {
    if (typeof m.name !== 'string' || typeof m.role !== 'string') continue;
    const role = m.role === 'master' || m.role === 'primary' ? 'leader' : m.role;
    if (!['leader', 'sync_standby', 'replica', 'standby_leader'].includes(role)) continue;
    members.push({
      name: m.name,
      role: role as MemberRole,
      state: typeof m.state === 'string' ? m.state : '',
      ...(typeof m.host === 'string' ? { host: m.host } : {}),
      ...(typeof m.port === 'number' ? { port: m.port } : {}),
      ...(typeof m.timeline === 'number' ? { timeline: m.timeline } : {}),
      ...(typeof m.lag === 'number' ? { lagBytes: m.lag } : {}),
    });
  }
  const leader = members.find((m) => m.role === 'leader' || m.role === 'standby_leader')?.name;
  return { members, ...(leader ? { leader } : {}), paused: raw.pause === true };
}

/**
 * The WAL senders of the node at `url` when it runs as a primary (GET
 * /patroni: its `replication`, pg_stat_replication as Patroni read it);
 * undefined when it is not a running primary or Patroni could not query
 * its PostgreSQL (then it answers its state alone, without `xlog`).
 */
export async function walSenders(url: string, tls: ClientTls): Promise<WalSender[] | undefined> {
  const a = await apiGet(url, '/patroni', tls);
  if (a.status !== 200) throw new Error(`Patroni at ${url} answered ${a.status} to GET /patroni`);
  return parseWalSenders(a.body);
}

/** Reads GET /patroni's body: the `replication` list of a running primary, else undefined. */
export function parseWalSenders(body: unknown): WalSender[] | undefined {
  const raw = (body ?? {}) as { role?: unknown; state?: unknown; xlog?: unknown; replication?: unknown }; // prettier-ignore
  const primary = raw.role === 'master' || raw.role === 'primary';
  if (!primary || raw.state !== 'running' || typeof raw.xlog !== 'object' || raw.xlog === null) {
    return undefined;
  }
  const list = Array.isArray(raw.replication) ? (raw.replication as Record<string, unknown>[]) : [];
  return list
    .filter((w) => w !== null && typeof w === 'object' && typeof w.application_name === 'string')
    .map((w) => ({
      name: w.application_name as string,
      state: typeof w.state === 'string' ? w.state : '',
      syncState: typeof w.sync_state === 'string' ? w.sync_state : '',
    }));
}

/**
 * Whether the node at `url` is the primary, by Patroni's own health check
 * (GET /primary: 200 on the leader that runs, 503 elsewhere), as HAProxy
 * will ask it; an unreachable node is not.
 */
export async function isPrimary(url: string, tls: ClientTls): Promise<boolean> {
  try {
    return (await apiGet(url, '/primary', tls)).status === 200;
  } catch {
    return false;
  }
}
