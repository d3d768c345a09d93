// Reads a Basin log file after the run: how many access lines (one per
// response, lib/logger.ts and api/access-log.ts), by status, and whether any
// line holds a credential, which must never happen.

import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';

export interface AccessLogStats {
  lines: number;
  bytes: number;
  /** Access lines ("msg":"request"). */
  requestLines: number;
  statuses: Map<string, number>;
  /** Lines holding one of the keys, or an Authorization header. */
  leaks: number;
}

export async function readAccessLog(
  path: string,
  keys: readonly string[],
): Promise<AccessLogStats> {
  const stats: AccessLogStats = {
    lines: 0,
    bytes: 0,
    requestLines: 0,
    statuses: new Map(),
    leaks: 0,
  };
  // The issued keys share a prefix; the bootstrap key is the other one.
  const needles = [
    ...new Set(keys.map((k) => (k.startsWith('bsn_') ? 'bsn_' : k))),
    '"authorization"',
  ];
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    stats.lines++;
    stats.bytes += line.length + 1;
    if (needles.some((n) => line.includes(n))) stats.leaks++;
    if (!line.includes('"msg":"request"')) continue;
    stats.requestLines++;
    const status = /"status":(\d+)/.exec(line)?.[1] ?? '?';
    stats.statuses.set(status, (stats.statuses.get(status) ?? 0) + 1);
  }
  return stats;
}
