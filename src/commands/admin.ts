// Administration: projects, users and credentials. Reached through the
// `basin` command line, not the REST API. Secrets are returned once, to be
// shown to the person who asked; only their hashes are stored.

import { checkEmail } from '../domain/email.js';
import { conflict, invalid, notFound } from '../domain/errors.js';
import { checkName } from '../domain/service-rules.js';
import type { Project } from '../domain/types.js';
import { iso, type Clock } from '../lib/clock.js';
import { resourceId } from '../lib/ids.js';
import { randomToken, sha256Hex } from '../lib/secrets.js';
import type { Credential, User } from '../domain/types.js';
import type { Store } from '../store/store.js';

/** A credential as shown once: both schemes' secrets in clear. */
export interface IssuedCredential {
  id: string;
  bearerKey: string;
  accessKey: string;
  secretKey: string;
}

export async function createProject(store: Store, clock: Clock, name: string): Promise<Project> {
  const project: Project = {
    id: resourceId(),
    name: checkName('name', name),
    createdAt: iso(clock()),
  };
  await store.transaction((tx) => tx.projects.insert(project));
  return project;
}

export async function createUser(
  store: Store,
  clock: Clock,
  name: string,
  email?: string,
): Promise<User> {
  const user: User = {
    id: resourceId(),
    name: checkName('name', name),
    email: email === undefined ? null : checkEmail(email),
    createdAt: iso(clock()),
  };
  await store.transaction(async (tx) => {
    if (await tx.users.findByName(user.name))
      throw conflict(`A user named ${user.name} exists already.`);
    await tx.users.insert(user);
  });
  return user;
}

export async function setUserEmail(store: Store, userId: string, email: string): Promise<void> {
  const address = checkEmail(email);
  const done = await store.transaction((tx) => tx.users.setEmail(userId, address));
  if (!done) throw notFound(`User ${userId} not found.`);
}

export async function addUserToProject(
  store: Store,
  userId: string,
  projectId: string,
): Promise<void> {
  await store.transaction(async (tx) => {
    if (!(await tx.users.get(userId))) throw notFound(`User ${userId} not found.`);
    if (!(await tx.projects.get(projectId))) throw notFound(`Project ${projectId} not found.`);
    await tx.users.addToProject(userId, projectId);
  });
}

/**
 * Issues a credential for a project (sees that project) or a user (sees the
 * user's projects). `bearerKey` may be fixed by the caller (bootstrap from
 * BASIN_BOOTSTRAP_API_KEY); otherwise it is random.
 */
export async function issueCredential(
  store: Store,
  clock: Clock,
  owner: { projectId: string } | { userId: string },
  name: string,
  bearerKey = `bsn_${randomToken(40)}`,
): Promise<IssuedCredential> {
  const { issued, cred } = newCredential(clock, owner, name, bearerKey);
  await store.transaction(async (tx) => {
    if ('projectId' in owner && !(await tx.projects.get(owner.projectId)))
      throw notFound(`Project ${owner.projectId} not found.`);
    if ('userId' in owner && !(await tx.users.get(owner.userId)))
      throw notFound(`User ${owner.userId} not found.`);
    if (await tx.credentials.findByBearerHash(cred.bearerHash))
      throw invalid('That bearer key is in use already.');
    await tx.credentials.insert(cred);
  });
  return issued;
}

/** A credential's secrets (shown once) and what is stored of it (their hashes). */
function newCredential(
  clock: Clock,
  owner: { projectId: string } | { userId: string },
  name: string,
  bearerKey: string,
): { issued: IssuedCredential; cred: Credential } {
  const issued: IssuedCredential = {
    id: resourceId(),
    bearerKey,
    accessKey: `AK${randomToken(18).toUpperCase()}`,
    secretKey: randomToken(40),
  };
  const cred: Credential = {
    id: issued.id,
    kind: 'projectId' in owner ? 'project' : 'user',
    projectId: 'projectId' in owner ? owner.projectId : null,
    userId: 'userId' in owner ? owner.userId : null,
    name: checkName('name', name),
    bearerHash: sha256Hex(issued.bearerKey),
    accessKey: issued.accessKey,
    secretHash: sha256Hex(issued.secretKey),
    createdAt: iso(clock()),
    revokedAt: null,
  };
  return { issued, cred };
}

export async function revokeCredential(store: Store, clock: Clock, id: string): Promise<void> {
  const done = await store.transaction((tx) => tx.credentials.revoke(id, iso(clock())));
  if (!done) throw notFound(`No active credential ${id}.`);
}

/**
 * An empty store gets a default project and one credential, so a fresh server
 * can be used at once. Returns the credential to print, or undefined when the
 * store was not empty.
 */
export async function bootstrap(
  store: Store,
  clock: Clock,
  bearerKey: string | null,
): Promise<{ project: Project; credential: IssuedCredential } | undefined> {
  if ((await store.projects.count()) > 0) return undefined;
  const project: Project = { id: resourceId(), name: 'default', createdAt: iso(clock()) };
  const { issued, cred } = newCredential(
    clock,
    { projectId: project.id },
    'bootstrap',
    bearerKey ?? `bsn_${randomToken(40)}`,
  );
  // Checked again in the transaction: Basins sharing a store may start
  // together, and only one bootstraps it.
  const made = await store.transaction(async (tx) => {
    if ((await tx.projects.count()) > 0) return false;
    await tx.projects.insert(project);
    await tx.credentials.insert(cred);
    return true;
  });
  return made ? { project, credential: issued } : undefined;
}
