// The secret Basin's sampler logs in to a pooler's console with, as its
// stats user (config/pooler-conf.ts, STATS_USER), and the SCRAM verifier
// PgBouncer checks it against. Both are kept in the pooler's directory in a
// file of root's alone (0600): PgBouncer, which runs as the service's OS
// user, and so the tenant, read only the verifier (in its auth_file), which
// cannot log in. The verifier is kept beside the secret rather than made
// again at each converge (its salt is random), so the auth_file's text, and
// the hash that decides a reload, stay the same. A secret per pooler: one
// leaked by a tenant's fake PgBouncer (a SCRAM exchange with a server that
// holds the verifier gives it the client key) opens that tenant's own
// pooler's statistics, which tsdbadmin reads anyway.

import { chmod, rename, readFile, writeFile } from 'node:fs/promises';
import { randomToken, scramVerifier } from '../../../lib/secrets.js';

export interface StatsSecret {
  secret: string;
  verifier: string;
}

/** The pooler's stats secret, if its file holds one. */
export async function readStatsSecret(file: string): Promise<StatsSecret | undefined> {
  try {
    const raw = JSON.parse(await readFile(file, 'utf8')) as Partial<StatsSecret>;
    if (
      typeof raw.secret === 'string' &&
      /^[A-Za-z0-9]{32,}$/.test(raw.secret) &&
      typeof raw.verifier === 'string' &&
      raw.verifier.startsWith('SCRAM-SHA-256$')
    )
      return { secret: raw.secret, verifier: raw.verifier };
  } catch {
    // None yet, or unreadable: made again.
  }
  return undefined;
}

/** The pooler's stats secret, made at first need (its directory must exist). */
export async function statsSecret(file: string): Promise<StatsSecret> {
  const found = await readStatsSecret(file);
  if (found) return found;
  const secret = randomToken(32);
  const made = { secret, verifier: scramVerifier(secret) };
  const tmp = `${file}.tmp`;
  await writeFile(tmp, JSON.stringify(made), { mode: 0o600 });
  await chmod(tmp, 0o600); // a leftover .tmp keeps its mode through writeFile
  await rename(tmp, file);
  return made;
}
