// Whether the service network collides with the host's own (checked at
// every start): an address of the block on another interface, or a route
// into it that is not one of this installation's veths, means that
// traffic meant for a namespace would go elsewhere, or the host's for
// elsewhere into a namespace. The default route is no collision (it is
// what every more specific route overrides). `conflicts` is pure
// (host-routes.test.ts); `hostConflicts` reads the host with `ip -j`.

import { run } from '../host/exec.js';
import { type Block, overlaps, parseCidr } from './addresses.js';

/** An address or route of the host, as `ip -j` shows it. */
export interface HostEntry {
  kind: 'address' | 'route';
  /** The address (with its prefix) or the route's destination. */
  cidr: string;
  /** Its interface, if it has one (a blackhole route has none). */
  dev?: string;
}

/** What of `entries` collides with `block`, leaving out what lies on `ours` (this installation's veths). */
export function conflicts(
  block: Block,
  entries: readonly HostEntry[],
  ours: ReadonlySet<string>,
): HostEntry[] {
  return entries.filter((e) => {
    if (e.dev !== undefined && ours.has(e.dev)) return false;
    if (e.cidr === 'default') return false;
    let b: Block;
    try {
      b = parseCidr(e.cidr);
    } catch {
      return false; // not IPv4
    }
    return b.prefix > 0 && overlaps(block, b);
  });
}

/** The host's IPv4 addresses and routes (every table). */
export async function hostEntries(): Promise<HostEntry[]> {
  const addrs = JSON.parse(await run('ip', ['-j', '-4', 'addr', 'show'])) as {
    ifname: string;
    addr_info?: { local?: string; prefixlen?: number }[];
  }[];
  const routes = JSON.parse(await run('ip', ['-j', '-4', 'route', 'show', 'table', 'all'])) as {
    dst?: string;
    dev?: string;
  }[];
  return [
    ...addrs.flatMap((l) =>
      (l.addr_info ?? [])
        .filter((a) => a.local !== undefined)
        .map((a) => ({
          kind: 'address' as const,
          cidr: `${a.local}/${a.prefixlen ?? 32}`,
          dev: l.ifname,
        })),
    ),
    ...routes
      .filter((r) => r.dst !== undefined)
      .map((r) => ({
        kind: 'route' as const,
        cidr: r.dst as string,
        ...(r.dev === undefined ? {} : { dev: r.dev }),
      })),
  ];
}

/** The collisions of `block` on this host; [] when there is none. */
export async function hostConflicts(block: Block, ours: ReadonlySet<string>): Promise<HostEntry[]> {
  return conflicts(block, await hostEntries(), ours);
}

/** One collision, as a start error names it. */
export const describeEntry = (e: HostEntry) =>
  `${e.kind} ${e.cidr}${e.dev === undefined ? '' : ` on ${e.dev}`}`;
