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

import { AppError } from '../domain/errors.js';
import type { Principal } from '../commands/context.js';
import { sameHash, sha256Hex } from '../lib/secrets.js';
import type { Credential, ReadView } from '../store/store.js';

const unauthorized = (message: string) => new AppError('UNAUTHORIZED', message);

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
    case 'bearer':
      if (!value) throw unauthorized('The Bearer scheme needs an API key after it.');
      cred = reads.credentials.findByBearerHash(sha256Hex(value));
      break;
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
