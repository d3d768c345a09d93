// Where etcd's leader should be (docs/decisions.md, "HA across hosts",
// Patroni's timing): on the member whose host runs the fewest Patroni
// leaders (primaries). When the host of etcd's leader is lost, etcd first
// elects another leader (its election timeout), and the new leader renews
// every lease it finds (etcd's lessor: now + election timeout + the lease's
// whole TTL): a primary lost with it keeps its leader key that much longer,
// ~7 s more before a standby may take over. etcd's leader anywhere else,
// a primary's host lost costs the leader key's TTL alone. Pure: no I/O.

/** One etcd member as the control plane reads it. */
export interface EtcdLeaderMember {
  /** etcd's member id (hex, as etcdctl takes it). */
  id: string;
  /** Its host's address (where its client URL points). */
  address: string;
  /** It answered its status just now. */
  healthy: boolean;
  /** It is etcd's leader. */
  leader: boolean;
}

/** A Patroni leader key and members: who leads a service's cluster, and where. */
export interface PatroniKey {
  key: string;
  value: string;
}

/**
 * How many Patroni leaders each host address runs, from the keys under
 * Patroni's namespace (`<ns><scope>/leader` holds the leader's name,
 * `<ns><scope>/members/<name>` its member data, whose `api_url` is at its
 * host's address). A leader whose member key is missing or unreadable is
 * not counted.
 */
export function primariesByAddress(
  namespace: string,
  keys: readonly PatroniKey[],
): Map<string, number> {
  const leaders = new Map<string, string>();
  const members = new Map<string, string>();
  for (const { key, value } of keys) {
    if (!key.startsWith(namespace)) continue;
    const parts = key.slice(namespace.length).split('/');
    if (parts.length === 2 && parts[1] === 'leader') leaders.set(parts[0] as string, value);
    if (parts.length === 3 && parts[1] === 'members') members.set(`${parts[0]}/${parts[2]}`, value);
  }
  const out = new Map<string, number>();
  for (const [scope, name] of leaders) {
    const address = memberAddress(members.get(`${scope}/${name}`));
    if (address !== undefined) out.set(address, (out.get(address) ?? 0) + 1);
  }
  return out;
}

function memberAddress(data: string | undefined): string | undefined {
  if (data === undefined) return undefined;
  try {
    const url = (JSON.parse(data) as { api_url?: unknown }).api_url;
    if (typeof url !== 'string') return undefined;
    return new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return undefined;
  }
}

/**
 * The member etcd's leadership should move to, or undefined to leave it:
 * a healthy member whose host runs fewer Patroni leaders than the current
 * leader's host, the fewest of all (ties by id, so every control-plane
 * process picks the same). Never a move between equals: each move is an
 * etcd election of its own (a pause of every client's writes, and every
 * lease renewed), so it must buy something.
 */
export function etcdLeaderTarget(
  members: readonly EtcdLeaderMember[],
  primaries: ReadonlyMap<string, number>,
): string | undefined {
  const leader = members.find((m) => m.leader);
  if (!leader) return undefined;
  const load = (m: EtcdLeaderMember) => primaries.get(m.address) ?? 0;
  const best = members
    .filter((m) => m.healthy && !m.leader)
    .sort((a, b) => load(a) - load(b) || a.id.localeCompare(b.id))[0];
  return best !== undefined && load(best) < load(leader) ? best.id : undefined;
}
