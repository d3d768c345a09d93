// Which services may suspend, and when one should (pure: idle-policy.test.ts).
// docs/decisions.md, Idle services.
//
// A service suspends only where a stopped server and a waker in front of
// its endpoint are all there is to it: one node (no HA standbys, whose
// HAProxy endpoint and failover watch expect a running primary), no
// pooler (PgBouncer would hold its own connections and need waking too),
// no read replica set streaming from it, running as its spec says, in a
// network namespace (the waker listens on its host side, never bindable
// by a tenant), and with rules that admit the namespace's gateway (what
// the server sees of a client the waker splices: a VPC's rules do not).
//
// Idle is measured from PostgreSQL's own view: the client backends and
// WAL senders of pg_stat_activity that are not Basin's own (sampled). The
// clock starts when the service is first seen able to suspend (so a
// restarted Basin, or a service that just became able, waits the whole
// time) and again at every sample with a client, and at every wake.

import { BlockList, isIPv4 } from 'node:net';
import type { Environment } from '../../../domain/types.js';
import type { ServiceSpec } from '../../driver.js';

/** --idle-suspend-after and --idle-environments. */
export interface IdlePolicy {
  afterMs: number;
  environments: readonly Environment[];
}

/** What the driver knows of a service beside its spec. */
export interface IdleFacts {
  /** It has a network namespace of its own (service networks are on). */
  namespaced: boolean;
  /** A read replica set streams from it. */
  withReplicaSet: boolean;
  /** The CIDRs its server admits (admittedCidrs: the public ones, or its VPC's). */
  admitted: readonly string[];
  /** Its namespace's gateway: where spliced clients come from, as the server sees them. */
  gateway: string | undefined;
}

/** Why `spec` may not suspend under `policy`, or undefined when it may. */
export function whyAwake(
  spec: ServiceSpec,
  policy: IdlePolicy | undefined,
  facts: IdleFacts,
): string | undefined {
  if (!policy) return 'idle suspension is off';
  if (!policy.environments.includes(spec.environment)) {
    return `its environment ${spec.environment} does not suspend`;
  }
  if (!spec.running) return 'it is stopped';
  if (spec.nodes.length > 1 || spec.ha.replicaCount > 0) return 'it has HA replicas';
  if (spec.pooler.enabled) return 'it has a connection pooler';
  if (facts.withReplicaSet) return 'a read replica set streams from it';
  if (!facts.namespaced || facts.gateway === undefined) {
    return 'it has no network namespace (--service-network)';
  }
  if (!admits(facts.admitted, facts.gateway)) {
    return "its access rules do not admit its namespace's gateway (a VPC)";
  }
  return undefined;
}

/** How often services are sampled: a quarter of the idle time, between 1 s and 10 s. */
export function sampleEveryMs(afterMs: number): number {
  return Math.min(10_000, Math.max(1_000, Math.floor(afterMs / 4)));
}

/** A service's idle clock: when a client was last seen (epoch ms). */
export interface IdleClock {
  lastActiveAt: number;
}

/**
 * One sample: `clients` connections that are not Basin's. Returns the
 * clock after it, and whether the service should suspend now.
 */
export function decide(
  clock: IdleClock | undefined,
  clients: number,
  now: number,
  afterMs: number,
): { clock: IdleClock; suspend: boolean } {
  if (!clock || clients > 0) return { clock: { lastActiveAt: now }, suspend: false };
  return { clock, suspend: now - clock.lastActiveAt >= afterMs };
}

/** Whether `address` (IPv4, or IPv4-mapped IPv6 as Node reports it) is in one of `cidrs`. */
export function admits(cidrs: readonly string[], address: string): boolean {
  const list = new BlockList();
  for (const c of cidrs) {
    const [net, bits] = c.split('/');
    if (net === undefined) continue;
    const type = isIPv4(net) ? 'ipv4' : 'ipv6';
    list.addSubnet(net, Number(bits ?? (type === 'ipv4' ? 32 : 128)), type);
  }
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const plain = mapped ?? address;
  return list.check(plain, isIPv4(plain) ? 'ipv4' : 'ipv6');
}

/**
 * What counts as a client, for pg_stat_activity: client backends and WAL
 * senders (a replica streaming, pg_basebackup), but not Basin's own
 * administrative sessions (application_name `basin`, over the socket,
 * as `postgres`: admin.ts) nor the session asking.
 */
export const CLIENTS_SQL =
  'SELECT count(*)::int AS n FROM pg_stat_activity ' +
  "WHERE backend_type IN ('client backend', 'walsender') AND pid <> pg_backend_pid() " +
  "AND NOT (usename = 'postgres' AND application_name = 'basin' AND client_addr IS NULL)";
