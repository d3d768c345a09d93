// Secrets: generated from the CSPRNG, compared in constant time, and stored
// only as hashes. API keys are long random strings, so a fast hash (SHA-256)
// is enough: there is no dictionary to guess from, unlike a human password.

import * as crypto from 'node:crypto';
import { createHash, pbkdf2Sync, randomBytes, createHmac, timingSafeEqual } from 'node:crypto';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A random string of `length` base62 characters (about 5.95 bits each). */
export function randomToken(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      // 248 = 4 * 62: reject the rest so every character is equally likely.
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

/**
 * One-shot `crypto.hash` (Node >= 20.12) where there is one: it hashes every
 * request's API key, and is several times cheaper than a Hash object.
 */
const oneShot = (crypto as { hash?: typeof crypto.hash }).hash;

export const sha256Hex: (s: string) => string = oneShot
  ? (s) => oneShot('sha256', s, 'hex')
  : (s) => createHash('sha256').update(s).digest('hex');

export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A database password for a person to copy: 24 base62 characters (~143 bits). */
export function generatePassword(): string {
  return randomToken(24);
}

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for a password (RFC 5802/7677,
 * as in PostgreSQL's scram_build_secret): `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`.
 * ALTER ROLE … PASSWORD '<verifier>' sets it without the password ever
 * reaching the database server or Basin's store. Assumes the password needs
 * no SASLprep normalisation (ASCII), which holds for generated passwords; a
 * user-chosen non-ASCII password is hashed as given, as libpq also falls back to.
 */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
