// Administration reads: what the `basin` command lists. Reads need no
// transaction; credentials leave here without their hashes, so no caller can
// print or log them by mistake.

import type { Project } from '../domain/types.js';
import type { Credential, User } from '../domain/types.js';
import type { Store } from '../store/store.js';

/** A user with the projects it belongs to. */
export interface UserListing extends User {
  projectIds: string[];
}

/** A credential as it may be shown: no hashes (and Basin keeps no secrets). */
export type CredentialListing = Omit<Credential, 'bearerHash' | 'secretHash'>;

export function listAllProjects(store: Store): Promise<Project[]> {
  return store.projects.list();
}

export async function listUsers(store: Store): Promise<UserListing[]> {
  const users = await store.users.list();
  return Promise.all(
    users.map(async (u) => ({ ...u, projectIds: await store.users.projectIds(u.id) })),
  );
}

/** The projects a user belongs to (empty for an unknown user). */
export function projectIdsOfUser(store: Store, userId: string): Promise<string[]> {
  return store.users.projectIds(userId);
}

export async function listCredentials(store: Store): Promise<CredentialListing[]> {
  return (await store.credentials.list()).map(
    ({ bearerHash: _bearerHash, secretHash: _secretHash, ...shown }) => shown,
  );
}
