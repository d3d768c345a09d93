// etcd on the hosts of an installation (docs/decisions.md, "etcd on the
// hosts"): which hosts run a member, and the names, ports and key prefixes
// the control plane, the agents and Patroni agree on. Pure: no I/O.

import type { Host } from './hosts.js';

/** etcd's own ports (IANA's), on each member host's address: open them between hosts. */
export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;

/** The one subject every member's certificate carries; peers accept no other (--peer-cert-allowed-cn). */
export const ETCD_MEMBER_CN = 'basin-etcd-member';
/** The etcd user only the control plane holds a certificate for (client-cert auth: the CN is the user). */
export const ETCD_ROOT_USER = 'root';

/** How many members for `hosts` hosts: none under three (no quorum worth having), five from five. */
export function desiredMembers(hosts: number): number {
  if (hosts < 3) return 0;
  return hosts >= 5 ? 5 : 3;
}

/**
 * Picks `count` of `candidates` to join `members`, other zones first: each
 * pick is a host of the zone that holds the fewest members so far (ties by
 * name, so every control-plane process picks the same).
 */
export function pickMemberHosts<H extends Pick<Host, 'id' | 'name' | 'zone'>>(
  candidates: readonly H[],
  members: readonly Pick<Host, 'zone'>[],
  count: number,
): H[] {
  const inZone = new Map<string, number>();
  for (const m of members) inZone.set(m.zone, (inZone.get(m.zone) ?? 0) + 1);
  const left = [...candidates].sort((a, b) => a.name.localeCompare(b.name));
  const picked: H[] = [];
  while (picked.length < count && left.length > 0) {
    let best = 0;
    for (let i = 1; i < left.length; i++) {
      const z = (h: H) => inZone.get(h.zone) ?? 0;
      if (z(left[i] as H) < z(left[best] as H)) best = i;
    }
    const [h] = left.splice(best, 1) as [H];
    inZone.set(h.zone, (inZone.get(h.zone) ?? 0) + 1);
    picked.push(h);
  }
  return picked;
}

function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}
export function etcdPeerUrl(address: string): string {
  return `https://${urlHost(address)}:${ETCD_PEER_PORT}`;
}
export function etcdClientUrl(address: string): string {
  return `https://${urlHost(address)}:${ETCD_CLIENT_PORT}`;
}

/** Where every service's Patroni keeps its keys (Patroni's `namespace`): `<namespace><serviceId>/…`. */
export const PATRONI_ETCD_NAMESPACE = '/basin/';

/**
 * The contract with Patroni (`namespace: /basin/`, `scope: <serviceId>`):
 * a service's etcd user (who logs in with its password: Patroni's etcd
 * client cannot use a certificate's CN) may read and write this prefix and
 * nothing else.
 */
export function serviceEtcdPrefix(serviceId: string): string {
  return `${PATRONI_ETCD_NAMESPACE}${serviceId}/`;
}
export function serviceEtcdUser(serviceId: string): string {
  return `basin-service-${serviceId}`;
}
/** A service id as an etcd user and key may carry it (ids are lowercase letters and digits). */
export const ETCD_SERVICE_ID = /^[a-z0-9]{1,40}$/;

/** What the control plane tells a host about its member: how to start it the first time. */
export interface EtcdMemberPlan {
  /** The member's name: the host's id. */
  name: string;
  /** `name=peerUrl,…`: etcd's --initial-cluster. */
  initialCluster: string;
  /** `new` for the members that bootstrap the cluster, `existing` for one added later. */
  state: 'new' | 'existing';
  token: string;
}
