// The size catalogue: which CPU/memory pairs a service or replica set may have.
// The catalogue is configuration (config.ts); these rules decide how a request's
// `cpu_millis` / `memory_gbs` pick an entry from it.

import { invalid } from './errors.js';
import type { Size } from './types.js';

export const SHARED = 'shared';

export const DEFAULT_SIZES: readonly Size[] = [
  { shared: true, cpuMillis: 0, memoryGbs: 0 },
  { shared: false, cpuMillis: 500, memoryGbs: 2 },
  { shared: false, cpuMillis: 1000, memoryGbs: 4 },
  { shared: false, cpuMillis: 2000, memoryGbs: 8 },
  { shared: false, cpuMillis: 4000, memoryGbs: 16 },
  { shared: false, cpuMillis: 8000, memoryGbs: 32 },
  { shared: false, cpuMillis: 16000, memoryGbs: 64 },
  { shared: false, cpuMillis: 32000, memoryGbs: 128 },
];

export interface SizeRequest {
  cpu?: string | number | undefined;
  memory?: string | number | undefined;
}

/**
 * Picks the catalogue entry a request names. Either value may be given alone
 * (the matching pair is chosen); `shared` is accepted only when `allowShared`.
 * Returns undefined when neither is given, so the caller can apply a default.
 */
export function pickSize(
  catalogue: readonly Size[],
  req: SizeRequest,
  allowShared: boolean,
): Size | undefined {
  const { cpu, memory } = req;
  if (cpu === undefined && memory === undefined) return undefined;
  const wantsShared = cpu === SHARED || memory === SHARED;
  if (wantsShared) {
    if (!allowShared) {
      throw invalid(
        `The shared size is only for creating or forking a service; choose one of ${describe(catalogue)}.`,
      );
    }
    if ((cpu !== undefined && cpu !== SHARED) || (memory !== undefined && memory !== SHARED)) {
      throw invalid('cpu_millis and memory_gbs must both be "shared" when either is.');
    }
    const shared = catalogue.find((s) => s.shared);
    if (!shared) throw invalid('This installation offers no shared size.');
    return shared;
  }
  const cpuMillis = cpu === undefined ? undefined : parseNumber('cpu_millis', cpu);
  const memoryGbs = memory === undefined ? undefined : parseNumber('memory_gbs', memory);
  const match = catalogue.find(
    (s) =>
      !s.shared &&
      (cpuMillis === undefined || s.cpuMillis === cpuMillis) &&
      (memoryGbs === undefined || s.memoryGbs === memoryGbs),
  );
  if (!match) {
    const asked = [
      cpuMillis === undefined ? undefined : `${cpuMillis}m CPU`,
      memoryGbs === undefined ? undefined : `${memoryGbs} GB memory`,
    ]
      .filter(Boolean)
      .join(' with ');
    throw invalid(`No size offers ${asked}; choose one of ${describe(catalogue)}.`);
  }
  return match;
}

export function describe(catalogue: readonly Size[]): string {
  return catalogue
    .filter((s) => !s.shared)
    .map((s) => `${s.cpuMillis}m/${s.memoryGbs}GB`)
    .join(', ');
}

function parseNumber(field: string, value: string | number): number {
  const n =
    typeof value === 'number' ? value : /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    throw invalid(
      `${field} must be a positive number${field === 'cpu_millis' ? ' of milli-cores' : ' of gigabytes'}, or "shared"; got ${JSON.stringify(value)}.`,
    );
  }
  return n;
}
