// What the control plane does when a host joins or reports: the token is
// checked and spent, the host's key signed with a name the control plane
// chooses, the host recorded; later reports are accepted only with that
// certificate, and only while the host is registered.

import { AppError } from '../domain/errors.js';
import {
  type Host,
  type HostCapacity,
  hostCertCn,
  type HostRole,
  type HostUsage,
  nodePlacements,
} from '../domain/hosts.js';
import type { Clock } from '../lib/clock.js';
import { resourceId } from '../lib/ids.js';
import { certSha256, signRequest } from '../lib/x509.js';
import type { Store } from '../store/store.js';
import {
  hostServicesCa,
  installationCa,
  LEAF_DAYS,
  repositoriesCa,
  repositoryServerCert,
  repositoryPeerCert,
  serviceRepositoryClientCert,
  servicesCa,
} from './installation-ca.js';
import { checkJoinToken } from './join-tokens.js';

export interface JoinRequest {
  token: string;
  /** A PEM certificate signing request for the host's own key. */
  csr: string;
  name: string;
  address: string;
  agentPort: number;
  zone: string;
  role: HostRole;
  capacity: HostCapacity;
}

export interface Joined {
  host: Host;
  certificate: string;
  caCertificate: string;
}

export async function joinHost(store: Store, clock: Clock, req: JoinRequest): Promise<Joined> {
  // Refused early, before any signing, when the token cannot join.
  await store.transaction((tx) => checkJoinToken(tx, req.token, clock()));
  if (await store.hosts.findByName(req.name)) throw nameTaken(req.name);
  const ca = await installationCa(store);
  const id = resourceId();
  let certificate: string;
  try {
    certificate = await signRequest(ca, req.csr, {
      cn: hostCertCn(id),
      names: [req.address],
      days: LEAF_DAYS,
    });
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  const now = clock();
  const host: Host = {
    id,
    role: req.role,
    name: req.name,
    address: req.address,
    agentPort: req.agentPort,
    zone: req.zone,
    capacity: req.capacity,
    usage: null,
    certSha256: certSha256(certificate),
    joinedAt: new Date(now).toISOString(),
    heartbeatAt: now,
  };
  // Spent and recorded together: a token raced by two joins joins one.
  await store.transaction(async (tx) => {
    const tokenId = await checkJoinToken(tx, req.token, now);
    if (!(await tx.hostTokens.use(tokenId, id))) {
      throw new AppError('UNAUTHORIZED', 'The join token was used already.');
    }
    await tx.hosts.insert(host);
  });
  return { host, certificate, caCertificate: ca.cert };
}

/**
 * Records a heartbeat from the host whose certificate (by SHA-256) was
 * presented; a removed host, or a certificate not the one issued, is refused.
 */
export async function recordHeartbeat(
  store: Store,
  clock: Clock,
  hostId: string,
  presentedSha256: string,
  report: { capacity: HostCapacity; usage: HostUsage },
): Promise<Host> {
  const host = await registeredHost(store, hostId, presentedSha256);
  const at = clock();
  const ok = await store.transaction((tx) =>
    tx.hosts.heartbeat(hostId, at, report.capacity, report.usage),
  );
  if (!ok) throw notRegistered();
  return { ...host, ...report, heartbeatAt: at };
}

/**
 * Signs the CA of a registered host's services (installation-ca.ts) for the
 * key of `csr`; returns it with the root clients trust.
 */
export async function issueServicesCa(
  store: Store,
  hostId: string,
  presentedSha256: string,
  csr: string,
): Promise<{ certificate: string; root: string }> {
  const host = await registeredHost(store, hostId, presentedSha256);
  let certificate: string;
  try {
    certificate = await hostServicesCa(store, host.name, csr);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  return { certificate, root: (await servicesCa(store)).cert };
}

/**
 * Signs a registered repository host's request for its pgBackRest servers'
 * certificate (its address), under the repositories CA; returns it with
 * that CA. A database host is refused: only the repository host may serve
 * repositories to the database hosts' clients.
 */
export async function issueRepositoryServer(
  store: Store,
  hostId: string,
  presentedSha256: string,
  csr: string,
): Promise<{ certificate: string; ca: string }> {
  const host = await registeredHost(store, hostId, presentedSha256);
  if (host.role !== 'repository') {
    throw new AppError(
      'FORBIDDEN',
      `Host ${host.name} is a database host: only a repository host (basin host run --role repository) serves repositories.`,
    );
  }
  let certificate: string;
  try {
    certificate = await repositoryServerCert(store, host.address, csr);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  return { certificate, ca: (await repositoriesCa(store)).cert };
}

/**
 * Signs a database host's request for the pgBackRest client certificate of
 * `serviceId`, under the repositories CA: only for a service placed on that
 * host (the store's placements; for an HA service, one of its nodes), so that a host, or a tenant root on it,
 * holds the stanza credentials of its own services and of no other.
 */
export async function issueRepositoryClient(
  store: Store,
  hostId: string,
  presentedSha256: string,
  serviceId: string,
  csr: string,
  kind: 'client' | 'source' | 'fork' = 'client',
): Promise<{ certificate: string; ca: string }> {
  const host = await registeredHost(store, hostId, presentedSha256);
  // The service's own placement, or (an HA service across hosts) one of its
  // nodes': its nodes share its stanza, each with the service's client name.
  const placed = nodePlacements(await store.placements.list(), serviceId);
  if (host.role !== 'database' || !placed.some((p) => p.hostId === host.id)) {
    throw new AppError(
      'FORBIDDEN',
      `Service ${serviceId} is not placed on host ${host.name}: a host is given the backup credentials of its own services only.`,
    );
  }
  const parent = kind === 'fork' ? await forkBeingMade(store, serviceId) : undefined;
  let certificate: string;
  try {
    certificate =
      kind === 'client'
        ? await serviceRepositoryClientCert(store, serviceId, csr)
        : parent !== undefined
          ? await serviceRepositoryClientCert(store, parent, csr, FORK_DAYS)
          : await repositoryPeerCert(store, 'source', host.address, csr);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  return { certificate, ca: (await repositoriesCa(store)).cert };
}

/** How long a fork's certificate for its parent's stanza lasts: a day, the shortest openssl gives. */
const FORK_DAYS = 1;
/** A fork in these states is still being made (its data restored, or recovering). */
const BEING_MADE = new Set(['QUEUED', 'CONFIGURING']);

/**
 * The parent of `forkId` while that fork is being made (docs/security.md,
 * Backups on the repository host: a fork's host reads its parent's stanza
 * with the parent's client name, for that fork only and only then);
 * refused otherwise.
 */
async function forkBeingMade(store: Store, forkId: string): Promise<string> {
  const fork = await store.services.get(forkId);
  if (!fork?.forkedFrom || !BEING_MADE.has(fork.status)) {
    throw new AppError(
      'FORBIDDEN',
      `Service ${forkId} is not a fork being made: its host is given no parent's backup credentials.`,
    );
  }
  return fork.forkedFrom.serviceId;
}

/**
 * Signs the repository host's request for its client certificate at a
 * service's pgBackRest server on the database host (CN
 * basin-repository-<id>: what that server authorizes, for backups), under
 * the repositories CA. Only a repository host gets one: a database host
 * (or a tenant root on one) must never read another service's data
 * directory through its server.
 */
export async function issueRepositoryBackupClient(
  store: Store,
  hostId: string,
  presentedSha256: string,
  serviceId: string,
  csr: string,
): Promise<{ certificate: string; ca: string }> {
  const host = await registeredHost(store, hostId, presentedSha256);
  if (host.role !== 'repository') {
    throw new AppError(
      'FORBIDDEN',
      `Host ${host.name} is a database host: only the repository host takes backups.`,
    );
  }
  let certificate: string;
  try {
    certificate = await repositoryPeerCert(store, 'backup', serviceId, csr);
  } catch {
    throw new AppError('INVALID_REQUEST', 'csr is not a valid PEM certificate signing request.');
  }
  return { certificate, ca: (await repositoriesCa(store)).cert };
}

/** The host that showed the certificate of SHA-256 `presented`, if it is the one issued to it and it is still registered. */
export async function registeredHost(
  store: Store,
  hostId: string,
  presented: string,
): Promise<Host> {
  const host = await store.hosts.get(hostId);
  if (!host || host.certSha256 !== presented) throw notRegistered();
  return host;
}

function nameTaken(name: string): AppError {
  return new AppError(
    'CONFLICT',
    `A host named ${name} is already registered: give this one another --name, or remove the old one with \`basin host remove\`.`,
  );
}

function notRegistered(): AppError {
  return new AppError(
    'FORBIDDEN',
    'This host is not registered with the installation (it was removed, or its certificate is not the one it was issued): join it again with a new token.',
  );
}
