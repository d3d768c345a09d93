// Authentication: `Authorization: Bearer <key>` or HTTP Basic with an access
// key and a secret key. Both resolve to a stored credential by hash; the
// credential decides which projects the caller sees.
//
// Every request authenticates, so the lookups go through the request's read
// view (Store.readView): served from memory while nothing was committed, and
// fresh after any commit, so a revoked credential is refused at once, even
// when another process (the CLI) revoked it. Only stored credentials are
// cached, never the outcome: the revocation, the secret and the projects are
// checked on every request. It is synchronous, like the view, so the auth
// hook completes without a promise.
//
// A Bearer header's key hash is remembered (`bearerHashes`), because hashing
// the key was the largest piece of a polled GET's own work (~0.45 µs of CPU,
// against ~0.1 µs for a lookup by the header). What is remembered is the
// hash alone, a pure function of the header: the credential is still looked
// up by that hash through the read view on every request, so a revoked,
// deleted or changed credential is refused at the next request as before
// (even when another process revoked it). Only headers that matched a
// current credential are remembered, so unknown keys cannot churn it, and it
// is bounded (LRU). It holds keys in clear in this process's memory, which
// sees every key it is sent anyway (docs/security.md).
//
// Where the view is a mirror another process's commits reach by notification
// (the PostgreSQL store), a credential made a moment ago by another process
// (`basin credential create`) may not be in it yet: a key the view does not
// know is looked for in the store itself once (app.ts, credentialKey) before
// it is refused. Revocations need no such look: the view still holding a
// revoked credential for its last milliseconds is the bound the issue sets.

import { AppError } from '../domain/errors.js';
import type { Principal } from '../commands/context.js';
import { Lru } from '../lib/lru.js';
import { sameHash, sha256Hex } from '../lib/secrets.js';
import type { Credential } from '../domain/types.js';
import type { CredentialKey, ReadView } from '../store/store.js';

const unauthorized = (message: string) => new AppError('UNAUTHORIZED', message);

/** Keys remembered at most: as many as the read view caches credentials (read-cache.ts). */
const BEARER_HASHES = 1000;
/**
 * The SHA-256 of the key of Bearer headers that authenticated recently, by
 * the whole header: a memo of parsing and hashing it.
 */
const bearerHashes = new Lru<string, string>(BEARER_HASHES);
/** Principals by the cached credential they were made for (see principalOf). */
const principals = new WeakMap<
  Credential,
  { userProjects: readonly string[] | undefined; principal: Principal }
>();

/** The caller of a request, from its Authorization header; throws UNAUTHORIZED. */
export function authenticate(reads: ReadView, header: string | undefined): Principal {
  if (!header) {
    throw unauthorized(
      'Missing credentials: send Authorization: Bearer <api key> or Basic <access key>:<secret key>.',
    );
  }
  // A Bearer header seen before: its key's hash, without taking it apart again.
  const known = bearerHashes.get(header);
  const cred =
    known !== undefined ? reads.credentials.findByBearerHash(known) : credentialOf(reads, header);
  if (!cred || cred.revokedAt !== null)
    throw unauthorized(
      'The credentials are not valid (unknown or revoked); send Authorization: Bearer <api key> or Basic <access key>:<secret key> of a current credential.',
    );
  return principalOf(reads, cred);
}

/** The stored credential a header names (revoked or not), or undefined; throws UNAUTHORIZED when malformed. */
function credentialOf(reads: ReadView, header: string): Credential | undefined {
  const space = header.indexOf(' ');
  const scheme = space < 0 ? header : header.slice(0, space);
  const value = space < 0 ? '' : header.slice(space + 1).trim();
  switch (scheme.toLowerCase()) {
    case 'bearer': {
      if (!value) throw unauthorized('The Bearer scheme needs an API key after it.');
      const hash = sha256Hex(value);
      const cred = reads.credentials.findByBearerHash(hash);
      if (cred && cred.revokedAt === null) bearerHashes.set(header, hash);
      return cred;
    }
    case 'basic':
      return basic(reads, value);
    default:
      throw unauthorized(
        `Unsupported authorization scheme ${JSON.stringify(scheme)}; use Bearer or Basic.`,
      );
  }
}

/**
 * The credential a well-formed header names, without looking it up: for a
 * store to check whether it was committed after the read view was filled
 * (Store.catchUpCredential). Undefined for a malformed header.
 */
export function credentialKey(header: string | undefined): CredentialKey | undefined {
  const space = header?.indexOf(' ') ?? -1;
  if (header === undefined || space < 0) return undefined;
  const scheme = header.slice(0, space).toLowerCase();
  const value = header.slice(space + 1).trim();
  if (scheme === 'bearer' && value) return { bearerHash: sha256Hex(value) };
  if (scheme !== 'basic' || !/^[A-Za-z0-9+/]+=*$/.test(value)) return undefined;
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon > 0 ? { accessKey: decoded.slice(0, colon) } : undefined;
}

/**
 * The principal of a current credential. Credentials and project lists from
 * the read view's cache are frozen and replaced by new objects after any
 * commit, so the principal made for one is kept with it (no Set per
 * request) and can never outlive a change.
 */
function principalOf(reads: ReadView, cred: Credential): Principal {
  const userProjects =
    cred.kind === 'project' ? undefined : reads.users.projectIds(cred.userId as string);
  const kept = principals.get(cred);
  if (kept !== undefined && kept.userProjects === userProjects) return kept.principal;
  const principal: Principal = Object.freeze({
    credentialId: cred.id,
    projectIds: new Set(userProjects ?? [cred.projectId as string]),
  });
  if (Object.isFrozen(cred) && (userProjects === undefined || Object.isFrozen(userProjects))) {
    principals.set(cred, { userProjects, principal });
  }
  return principal;
}

function basic(reads: ReadView, value: string): Credential | undefined {
  const decoded = /^[A-Za-z0-9+/]+=*$/.test(value)
    ? Buffer.from(value, 'base64').toString('utf8')
    : '';
  const colon = decoded.indexOf(':');
  if (colon <= 0)
    throw unauthorized('Basic credentials must be base64 of <access key>:<secret key>.');
  const cred = reads.credentials.findByAccessKey(decoded.slice(0, colon));
  // Hash even when the access key is unknown, so timing does not tell whether it exists.
  const secretHash = sha256Hex(decoded.slice(colon + 1));
  return cred && sameHash(cred.secretHash, secretHash) ? cred : undefined;
}
