// Where a new service goes (docs/decisions.md, "Several hosts"): to the
// online database host (a repository host runs no nodes) with the most
// memory left after what its services hold, among those with room for it
// in both CPU and memory. Spread, not bin-pack: a host lost takes as few
// services with it as it can, and a fresh host fills first. Pure, for the
// unit test.

import type { Host, Placement } from '../../domain/hosts.js';
import type { Size } from '../../domain/types.js';

/** What a `shared` service holds of a host: a share, not a size (it has no bound of its own). */
export const SHARED_RESERVATION = { cpuMillis: 0, memoryMb: 256 };

/** What a service of `size` holds of its host. */
export function reservation(size: Size): { cpuMillis: number; memoryMb: number } {
  if (size.shared) return SHARED_RESERVATION;
  return { cpuMillis: size.cpuMillis, memoryMb: Math.round(size.memoryGbs * 1024) };
}

/** What of `host` is not held by its placements (but `except`'s: the one being resized). */
export function roomLeft(
  host: Host,
  placements: readonly Placement[],
  except?: string,
): { cpuMillis: number; memoryMb: number } {
  const mine = placements.filter((p) => p.hostId === host.id && p.resourceId !== except);
  return {
    cpuMillis: host.capacity.cpus * 1000 - mine.reduce((n, p) => n + p.cpuMillis, 0),
    memoryMb:
      Math.floor(host.capacity.memoryBytes / 2 ** 20) - mine.reduce((n, p) => n + p.memoryMb, 0),
  };
}

export function chooseHost(
  online: readonly Host[],
  placements: readonly Placement[],
  need: { cpuMillis: number; memoryMb: number },
): Host | undefined {
  let best: { host: Host; memoryLeft: number } | undefined;
  for (const host of online) {
    if (host.role !== 'database') continue;
    const left = roomLeft(host, placements);
    if (left.cpuMillis < need.cpuMillis || left.memoryMb < need.memoryMb) continue;
    // Ties go to the name that sorts first: the same inputs, the same host.
    if (
      !best ||
      left.memoryMb > best.memoryLeft ||
      (left.memoryMb === best.memoryLeft && host.name < best.host.name)
    ) {
      best = { host, memoryLeft: left.memoryMb };
    }
  }
  return best?.host;
}

/**
 * Hosts for `count` more nodes of one HA service, each on a host of its
 * own (a host lost takes at most one node with it, and Patroni's
 * synchronous standby is never beside its primary), beside the hosts
 * `taken` by its nodes already placed. Other zones first: each pick is
 * among the database hosts with room, from the zone that holds the fewest
 * of the service's nodes so far, then the most memory left (spread, as
 * chooseHost), then the name (every control-plane process picks the
 * same). Undefined when fewer than `count` hosts qualify: never two nodes
 * on one host.
 */
export function chooseHosts(
  online: readonly Host[],
  placements: readonly Placement[],
  need: { cpuMillis: number; memoryMb: number },
  count: number,
  taken: readonly Pick<Host, 'id' | 'zone'>[] = [],
): Host[] | undefined {
  const inZone = new Map<string, number>();
  for (const h of taken) inZone.set(h.zone, (inZone.get(h.zone) ?? 0) + 1);
  const used = new Set(taken.map((h) => h.id));
  const left = online
    .filter((h) => h.role === 'database' && !used.has(h.id))
    .map((host) => ({ host, room: roomLeft(host, placements) }))
    .filter(({ room }) => room.cpuMillis >= need.cpuMillis && room.memoryMb >= need.memoryMb);
  const picked: Host[] = [];
  while (picked.length < count) {
    let best: (typeof left)[number] | undefined;
    for (const c of left) {
      if (!best) {
        best = c;
        continue;
      }
      const zc = inZone.get(c.host.zone) ?? 0;
      const zb = inZone.get(best.host.zone) ?? 0;
      if (
        zc < zb ||
        (zc === zb && c.room.memoryMb > best.room.memoryMb) ||
        (zc === zb && c.room.memoryMb === best.room.memoryMb && c.host.name < best.host.name)
      ) {
        best = c;
      }
    }
    if (!best) return undefined;
    left.splice(left.indexOf(best), 1);
    inZone.set(best.host.zone, (inZone.get(best.host.zone) ?? 0) + 1);
    picked.push(best.host);
  }
  return picked;
}

/**
 * Why an HA service of `nodes` nodes cannot be placed now, for a 503 a
 * person can act on, or undefined: Patroni needs etcd's quorum to elect a
 * leader (and a primary without it demotes itself), and each node needs a
 * database host of its own with room for its size.
 */
export function haPlacementRefusal(o: {
  online: readonly Host[];
  placements: readonly Placement[];
  need: { cpuMillis: number; memoryMb: number };
  nodes: number;
  /** Hosts already holding a node of the service (setHA on a placed service). */
  taken?: readonly Pick<Host, 'id' | 'zone'>[];
  /** Whether a majority of etcd's members answers. */
  etcdQuorum: boolean;
}): string | undefined {
  const more = o.nodes - (o.taken?.length ?? 0);
  if (more <= 0) return undefined;
  if (!o.etcdQuorum) {
    return 'etcd on the hosts has no quorum (see `basin host etcd`): an HA service across hosts needs it to elect its primary. Bring its members back, or join hosts until three run one.';
  }
  if (chooseHosts(o.online, o.placements, o.need, more, o.taken)) return undefined;
  const databaseHosts = o.online.filter((h) => h.role === 'database').length;
  return (
    `an HA service of ${o.nodes} nodes needs ${o.nodes} database hosts online, one per node, each with ` +
    `${o.need.cpuMillis} millis and ${o.need.memoryMb} MB free; ${databaseHosts} are online` +
    (databaseHosts >= o.nodes ? ', and not enough of them have room' : '') +
    ': ask for fewer replicas, choose a smaller size, or add hosts.'
  );
}

/**
 * Hosts for `count` nodes of a read replica set (docs/decisions.md, "Read
 * replica sets across hosts"), never on a host of its service's nodes
 * (`avoid`): a host lost takes the primary or some of its readers, not
 * both. Each pick is among the database hosts with room left (after the
 * picks before it), from the zone that holds the fewest of the service's
 * and the set's nodes so far, then the host that holds the fewest of the
 * set's, then the most memory left, then the name. So the nodes spread
 * over as many hosts as there are, other zones first, and share a host
 * only when there are fewer hosts with room than nodes. Undefined when a
 * node has no host at all.
 */
export function chooseReplicaHosts(
  online: readonly Host[],
  placements: readonly Placement[],
  need: { cpuMillis: number; memoryMb: number },
  count: number,
  avoid: readonly Pick<Host, 'id' | 'zone'>[],
  taken: readonly Pick<Host, 'id' | 'zone'>[] = [],
): Host[] | undefined {
  const inZone = new Map<string, number>();
  for (const h of [...avoid, ...taken]) inZone.set(h.zone, (inZone.get(h.zone) ?? 0) + 1);
  const onHost = new Map<string, number>();
  for (const h of taken) onHost.set(h.id, (onHost.get(h.id) ?? 0) + 1);
  const avoided = new Set(avoid.map((h) => h.id));
  const left = online
    .filter((h) => h.role === 'database' && !avoided.has(h.id))
    .map((host) => ({ host, room: roomLeft(host, placements) }));
  const picked: Host[] = [];
  while (picked.length < count) {
    let best: (typeof left)[number] | undefined;
    const key = (c: (typeof left)[number]) =>
      [inZone.get(c.host.zone) ?? 0, onHost.get(c.host.id) ?? 0, -c.room.memoryMb] as const;
    for (const c of left) {
      if (c.room.cpuMillis < need.cpuMillis || c.room.memoryMb < need.memoryMb) continue;
      if (!best) {
        best = c;
        continue;
      }
      const [a, b] = [key(c), key(best)];
      const cmp = a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
      if (cmp < 0 || (cmp === 0 && c.host.name < best.host.name)) best = c;
    }
    if (!best) return undefined;
    best.room = {
      cpuMillis: best.room.cpuMillis - need.cpuMillis,
      memoryMb: best.room.memoryMb - need.memoryMb,
    };
    inZone.set(best.host.zone, (inZone.get(best.host.zone) ?? 0) + 1);
    onHost.set(best.host.id, (onHost.get(best.host.id) ?? 0) + 1);
    picked.push(best.host);
  }
  return picked;
}
