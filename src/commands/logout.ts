// POST /v1/auth/logout: the caller ends its session. A user token is a
// session (a person's, `basin credential create --user`), so it is revoked: the
// next request with it is a 401. A project credential is not a session but
// the project's key, shared by whatever uses it (CI, services), so logging
// out of a client must not cut them off: it is left as it is. Both answer
// 204, as upstream does (docs/decisions.md, Credentials).
//
// Basin issues no refresh tokens (a user token does not expire), so a
// `refresh_token` in the body has nothing to name: it is accepted, so that
// the vendor's clients can send what they hold, and changes nothing.

import { iso } from '../lib/clock.js';
import type { Ctx, Principal } from './context.js';

/** What logging out did: the caller's token revoked, or nothing (a project credential). */
export type LogoutOutcome = 'revoked' | 'kept';

export async function logout(ctx: Ctx, p: Principal): Promise<LogoutOutcome> {
  return ctx.store.transaction(async (tx) => {
    const cred = await tx.credentials.get(p.credentialId);
    // A project credential is the project's, not a session; one revoked since
    // the request was authenticated is logged out already.
    if (!cred || cred.kind !== 'user' || cred.revokedAt !== null) return 'kept';
    await tx.credentials.revoke(cred.id, iso(ctx.clock()));
    return 'revoked';
  });
}
