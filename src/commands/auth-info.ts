// GET /v1/auth/info: who the calling credential is. A project credential
// answers with itself, its project and the user who issued it; a user token
// with its user. Every credential today is made by the administrator (the
// `basin` command, or the bootstrap), so the issuer of a project credential
// is the administrator, whose address is configuration (--admin-email).

import { AppError } from '../domain/errors.js';
import type { Project } from '../domain/types.js';
import type { User } from '../domain/types.js';
import type { Ctx, Principal } from './context.js';

/** A person as clients show them. */
export interface Person {
  id: string;
  name: string;
  email: string;
}

export type AuthInfo =
  | {
      type: 'apiKey';
      credential: { accessKey: string; name: string; createdAt: string };
      project: Project;
      issuer: Person;
    }
  | { type: 'oauth'; user: Person };

/** The administrator, as the issuer of the credentials it made. */
export const administrator = (email: string): Person => ({
  id: 'admin',
  name: 'Administrator',
  email,
});

/**
 * The address shown for a user made without one: syntactically valid (clients
 * parse it), unique, and plainly not a mailbox (`.localhost` never resolves
 * elsewhere). `basin user set-email` gives a real one.
 */
export const placeholderEmail = (userId: string) => `${userId}@users.basin.localhost`;

export async function authInfo(ctx: Ctx, p: Principal): Promise<AuthInfo> {
  const cred = await ctx.store.credentials.get(p.credentialId);
  // Revoked (or its project or user removed) since the request was authenticated.
  const gone = () =>
    new AppError('UNAUTHORIZED', 'The credentials were revoked; use a current credential.');
  if (!cred || cred.revokedAt !== null) throw gone();
  if (cred.kind === 'user') {
    const user = cred.userId === null ? undefined : await ctx.store.users.get(cred.userId);
    if (!user) throw gone();
    return { type: 'oauth', user: person(user) };
  }
  const project =
    cred.projectId === null ? undefined : await ctx.store.projects.get(cred.projectId);
  if (!project) throw gone();
  return {
    type: 'apiKey',
    credential: { accessKey: cred.accessKey, name: cred.name, createdAt: cred.createdAt },
    project,
    issuer: administrator(ctx.settings.adminEmail),
  };
}

const person = (u: User): Person => ({
  id: u.id,
  name: u.name,
  email: u.email ?? placeholderEmail(u.id),
});
