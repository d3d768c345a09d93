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
// A Bearer key's SHA-256 is remembered (`bearerHashes`), because hashing it
// was the largest piece of a polled GET's own work (~0.45 µs of CPU, against
// ~0.1 µs for a lookup by the key). What is remembered is the hash alone, a
// pure function of the key: the credential is still looked up by that hash
// through the read view on every request, so a revoked, deleted or changed
// credential is refused at the next request as before (even when another
// process revoked it). Only keys that matched a current credential are
// remembered, so unknown keys cannot churn it, and it is bounded (LRU).
// It holds keys in clear in this process's memory, which sees every key it
// is sent anyway (docs/security.md).

import { AppError } from '../domain/errors.js';
import type { Principal } from '../commands/context.js';
import { Lru } from '../lib/lru.js';
import { sameHash, sha256Hex } from '../lib/secrets.js';
import type { Credential, ReadView } from '../store/store.js';

const unauthorized = (message: string) => new AppError('UNAUTHORIZED', message);

/** Keys remembered at most: as many as the read view caches credentials (read-cache.ts). */
const BEARER_HASHES = 1000;
/** The SHA-256 of Bearer keys that authenticated recently, by key: a memo of sha256Hex. */
const bearerHashes = new Lru<string, string>(BEARER_HASHES);

/** The caller of a request, from its Authorization header; throws UNAUTHORIZED. */
export function authenticate(reads: ReadView, header: string | undefined): Principal {
  if (!header) {
    throw unauthorized(
      'Missing credentials: send Authorization: Bearer <api key> or Basic <access key>:<secret key>.',
    );
  }
  const space = header.indexOf(' ');
  const scheme = space < 0 ? header : header.slice(0, space);
  const value = space < 0 ? '' : header.slice(space + 1).trim();
  let cred: Credential | undefined;
  switch (scheme.toLowerCase()) {
    case 'bearer': {
      if (!value) throw unauthorized('The Bearer scheme needs an API key after it.');
      const known = bearerHashes.get(value);
      const hash = known ?? sha256Hex(value);
      cred = reads.credentials.findByBearerHash(hash);
      if (known === undefined && cred && cred.revokedAt === null) bearerHashes.set(value, hash);
      break;
    }
    case 'basic':
      cred = basic(reads, value);
      break;
    default:
      throw unauthorized(
        `Unsupported authorization scheme ${JSON.stringify(scheme)}; use Bearer or Basic.`,
      );
  }
  if (!cred || cred.revokedAt !== null)
    throw unauthorized(
      'The credentials are not valid (unknown or revoked); send Authorization: Bearer <api key> or Basic <access key>:<secret key> of a current credential.',
    );
  const projectIds =
    cred.kind === 'project'
      ? [cred.projectId as string]
      : reads.users.projectIds(cred.userId as string);
  return { credentialId: cred.id, projectIds: new Set(projectIds) };
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
