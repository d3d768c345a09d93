// Where a new service goes (docs/decisions.md, "Several hosts"): to the
// online host with the most memory left after what its services hold, among
// those with room for it in both CPU and memory. Spread, not bin-pack: a host
// lost takes as few services with it as it can, and a fresh host fills
// first. Pure, for the unit test.

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
