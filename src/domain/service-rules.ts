// Rules for the fields of service requests that are not just types.

import { invalid } from './errors.js';
import type { Addon, HaConfig, ServiceType } from './types.js';

export const NAME_MAX = 128;
export const MAX_HA_REPLICAS = 5;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

/**
 * docs/architecture.md §8: no addons means a TIMESERIESDB service, `[]` a POSTGRES one,
 * `["ai"]` a VECTOR one, and time-series with ai a TIMESERIESDB service that
 * also has the vector extensions.
 */
export function typeFromAddons(addons: readonly Addon[] | undefined): {
  type: ServiceType;
  vector: boolean;
} {
  if (addons === undefined) return { type: 'TIMESERIESDB', vector: false };
  const ts = addons.includes('time-series');
  const ai = addons.includes('ai');
  if (ts) return { type: 'TIMESERIESDB', vector: ai };
  if (ai) return { type: 'VECTOR', vector: true };
  return { type: 'POSTGRES', vector: false };
}

/** Names are 1 to 128 characters, not only white space, without control characters. */
export function checkName(field: string, name: string): string {
  if (name.trim().length === 0) throw invalid(`${field} must not be empty.`);
  if ([...name].length > NAME_MAX)
    throw invalid(`${field} must be at most ${NAME_MAX} characters.`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name))
    throw invalid(`${field} must not contain control characters.`);
  return name;
}

export function checkHa(ha: Partial<HaConfig>, current: HaConfig): HaConfig {
  const replicaCount = ha.replicaCount ?? current.replicaCount;
  const syncReplicaCount = ha.syncReplicaCount ?? Math.min(current.syncReplicaCount, replicaCount);
  for (const [field, v] of [
    ['replica_count', replicaCount],
    ['sync_replica_count', syncReplicaCount],
  ] as const) {
    if (!Number.isInteger(v) || v < 0 || v > MAX_HA_REPLICAS) {
      throw invalid(`${field} must be a whole number from 0 to ${MAX_HA_REPLICAS}; got ${v}.`);
    }
  }
  if (syncReplicaCount > replicaCount) {
    throw invalid(
      `sync_replica_count (${syncReplicaCount}) cannot exceed replica_count (${replicaCount}).`,
    );
  }
  return { replicaCount, syncReplicaCount };
}

export function checkPassword(password: string): void {
  if (password.length < PASSWORD_MIN || password.length > PASSWORD_MAX) {
    throw invalid(`password must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters long.`);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(password)) {
    throw invalid('password must not contain control characters.');
  }
}

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** RFC 3339 date-time with a real calendar date (Date.parse rolls 02-30 over to 03-01). */
export function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  if (!m || Number.isNaN(Date.parse(s))) return false;
  const n = (i: number) => Number(m[i] ?? 0);
  const daysInMonth = new Date(Date.UTC(n(1), n(2), 0)).getUTCDate();
  return (
    n(2) >= 1 &&
    n(2) <= 12 &&
    n(3) >= 1 &&
    n(3) <= daysInMonth &&
    n(4) <= 23 &&
    n(5) <= 59 &&
    n(6) <= 59 &&
    n(8) <= 23 &&
    n(9) <= 59
  );
}
