// More bearer keys for a running Basin, made the way `basin credential create`
// makes them: another process writing Basin's store (Basin sees the commit at
// its next request). The service-get load takes turns between them so that
// no credential goes over the default per-credential read limit.

import { join } from 'node:path';
import { issueCredential } from '../src/commands/admin.js';
import { OPTIONS } from '../src/config.js';
import { systemClock } from '../src/lib/clock.js';
import { openPostgresStore } from '../src/store/postgres/pg-store.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';

/** Basin's default reads per credential and minute (src/config.ts), 0 for none. */
export const DEFAULT_READS_PER_MINUTE = Number(OPTIONS.rateLimitReads.default);

/**
 * How many credentials keep a load of `peakRps` requests per second, for a
 * whole minute, under the default read limit; at least `min`.
 */
export function credentialsFor(peakRps: number, min: number): number {
  if (DEFAULT_READS_PER_MINUTE === 0) return min;
  return Math.max(min, Math.ceil((peakRps * 60) / DEFAULT_READS_PER_MINUTE));
}

/**
 * Issues `n` bearer keys for `projectId` in the store of `dataDir`, or in
 * the PostgreSQL store at `storeUrl` (`basin --store-url … credential create`).
 */
export async function issueBearerKeys(
  dataDir: string,
  projectId: string,
  n: number,
  storeUrl?: string,
): Promise<string[]> {
  const pgStore = storeUrl === undefined ? undefined : await openPostgresStore(storeUrl);
  const store = pgStore ?? openSqliteStore(join(dataDir, 'basin.db'));
  try {
    const keys: string[] = [];
    for (let i = 0; i < n; i++) {
      const issued = await issueCredential(store, systemClock, { projectId }, `bench-${i}`);
      keys.push(issued.bearerKey);
    }
    return keys;
  } finally {
    if (pgStore) await pgStore.end();
    else store.close();
  }
}
