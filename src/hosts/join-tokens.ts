// One-time tokens that let a machine join as a host (`basin host token`).
// The secret is shown once and stored as its SHA-256; a token joins one host
// and expires unused after its time to live.

import { randomBytes } from 'node:crypto';
import { AppError } from '../domain/errors.js';
import { formatToken, parseToken } from '../domain/hosts.js';
import type { Clock } from '../lib/clock.js';
import { sameHash, sha256Hex } from '../lib/secrets.js';
import type { Store, Tx } from '../store/store.js';
import { installationCa } from './installation-ca.js';

export const DEFAULT_TOKEN_TTL_MS = 60 * 60 * 1000;

export interface IssuedToken {
  token: string;
  /** The CA a joining host pins (`--ca-sha256`). */
  caSha256: string;
  expiresAt: string;
}

export async function issueJoinToken(
  store: Store,
  clock: Clock,
  ttlMs = DEFAULT_TOKEN_TTL_MS,
): Promise<IssuedToken> {
  const ca = await installationCa(store);
  const id = randomBytes(6).toString('hex');
  const secret = randomBytes(16).toString('hex');
  const now = clock();
  await store.transaction((tx) =>
    tx.hostTokens.insert({
      id,
      secretHash: sha256Hex(secret),
      createdAt: new Date(now).toISOString(),
      expiresAt: now + ttlMs,
      usedBy: null,
    }),
  );
  return {
    token: formatToken(id, secret),
    caSha256: ca.sha256,
    expiresAt: new Date(now + ttlMs).toISOString(),
  };
}

/**
 * The token's id when it may join now; otherwise an UNAUTHORIZED error that
 * says why (unknown and wrong secret read the same: nothing to probe).
 */
export async function checkJoinToken(tx: Tx, token: string, now: number): Promise<string> {
  const parsed = parseToken(token);
  const found = parsed && (await tx.hostTokens.get(parsed.id));
  if (!parsed || !found || !sameHash(found.secretHash, sha256Hex(parsed.secret))) {
    throw new AppError(
      'UNAUTHORIZED',
      'The join token is not valid: make one with `basin host token`.',
    );
  }
  if (found.usedBy !== null) {
    throw new AppError(
      'UNAUTHORIZED',
      'The join token was used already: each joins one host; make another with `basin host token`.',
    );
  }
  if (now > found.expiresAt) {
    throw new AppError(
      'UNAUTHORIZED',
      'The join token has expired: make another with `basin host token`.',
    );
  }
  return found.id;
}
