// A service whose repository is on the repository host (docs/decisions.md,
// "Several hosts": backups on the repository host): its database host keeps
// nothing of the repository, only the service's side of it.
//
//   backup/<id>/remote.json     root's record that the repository is remote
//                               (where: the repository host's address, the
//                               service's port there, the configuration its
//                               server loads): decided by the control plane,
//                               kept so that the service never falls back
//                               to a repository of this host's;
//   backup/<id>/pgbackrest.conf the archiver's archive-push and
//                               stanza-create, to the repository host
//                               (repo1-host, TLS, the port of its own);
//   backup/<id>/pgserver.conf   the server a backup on the repository host
//                               reads the data directory through, in the
//                               service's namespace, on the service's port +
//                               SOURCE_PORT_OFFSET (forwarded from the host's
//                               address), for the repository host's client
//                               (CN basin-repository-<id>) alone;
//   client.crt/.key, server.crt/.key, ca.crt: the service's client
//                               certificate (CN basin-service-<id>) and this
//                               server's (CN the host's address), both from
//                               the installation's repositories CA, keys made
//                               here, signed by the control plane for the
//                               host the service is placed on only.
// The repository's cipher pass never comes here: pgBackRest's clients get
// it from the server they connect to (docs/decisions.md).

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RemoteRepository, ServiceSpec } from '../../../driver.js';
import { DriverError } from '../../../driver.js';
import { makeKeyAndRequest } from '../../../../lib/x509.js';
import { ensureOwnedDir, exists, mkdirIn, writeRootFile } from '../../node/node-files.js';
import type { OsUser } from '../../host/os-user.js';
import { primaryNode } from '../../primary-node.js';
import type { SidesContext } from './sides.js';
import {
  renderServiceConf,
  renderServiceServerConf,
  repositoryClientName,
  SOURCE_PORT_OFFSET,
} from './repo-conf.js';

/**
 * Signs a key made here: the service's client certificate, its backup
 * source's server certificate, or (`fork`, for a fork being made here) a
 * short-lived client certificate for its parent's stanza (fork-remote.ts).
 */
export type RemoteIdentity = (
  serviceId: string,
  kind: 'client' | 'source' | 'fork',
  csr: string,
) => Promise<{ certificate: string; ca: string }>;

export interface RemoteContext extends SidesContext {
  /** Given on a host of several (agent/host-agent.ts); absent on one machine. */
  remoteIdentity?: RemoteIdentity | undefined;
}

const marker = (ctx: SidesContext, id: string) => join(ctx.layout.backupDir(id), 'remote.json');
const stanzaMark = (ctx: SidesContext, id: string) => join(ctx.layout.backupDir(id), 'stanza-made');

/** Whether the service's repository is on the repository host (root's record). */
export function isRemote(ctx: SidesContext, id: string): Promise<boolean> {
  return exists(marker(ctx, id));
}

/** The port a service's backup source listens on (in its namespace, and forwarded from the host's address). */
export const sourcePort = (spec: Pick<ServiceSpec, 'port'>) => spec.port + SOURCE_PORT_OFFSET;

/** The service's side of a remote repository, made or brought up to date. */
export async function ensureRemoteSide(
  ctx: RemoteContext,
  spec: ServiceSpec & { repository: RemoteRepository },
  user: OsUser,
): Promise<void> {
  const { layout } = ctx;
  const id = spec.serviceId;
  if (!ctx.remoteIdentity) {
    throw new DriverError('This Basin has no repository host to sign backup credentials.', false);
  }
  const net = await ctx.networks.ensure(id);
  await mkdirIn(layout.backupDir(id), 0o711);
  const { spool, lock, log } = layout.backupDirs(id);
  for (const dir of [spool, lock, log]) await ensureOwnedDir(dir, user);
  const root = { name: 'root', uid: 0, gid: 0 };
  await writeRootFile(marker(ctx, id), JSON.stringify(spec.repository), root);
  const mine = layout.backupIdentity(id);
  for (const [kind, cert, key] of [
    ['client', mine.clientCert, mine.clientKey],
    ['source', mine.serverCert, mine.serverKey],
  ] as const) {
    if ((await exists(cert)) && (await exists(key)) && (await exists(mine.ca))) continue;
    const made = await makeKeyAndRequest(kind === 'client' ? 'client' : 'source');
    const signed = await ctx.remoteIdentity(id, kind, made.csr);
    await writeRootFile(mine.ca, signed.ca, user);
    await writeRootFile(key, made.key, user);
    await writeRootFile(cert, signed.certificate, user);
  }
  const primary = primaryNode(spec);
  await writeRootFile(
    layout.backupConf(id),
    renderServiceConf({
      stanza: id,
      dirs: { spool, lock, log },
      repo: {
        host: spec.repository.host,
        port: spec.repository.port,
        cert: mine.clientCert,
        key: mine.clientKey,
        ca: mine.ca,
        config: spec.repository.config,
      },
      pgdata: layout.pgdata({ id, node: primary.index }),
      socketDir: layout.socketDir({ id, node: primary.index }),
      port: primary.port,
    }),
    user,
  );
  await writeRootFile(
    mine.serverConf,
    renderServiceServerConf({
      stanza: id,
      listen: net.address,
      port: sourcePort(spec),
      identity: { cert: mine.serverCert, key: mine.serverKey, ca: mine.ca },
      client: repositoryClientName(id),
      dirs: { lock, log },
    }),
    user,
  );
}

/** Whether the remote stanza was made (stanza-create succeeded once); marked by markStanza. */
export function stanzaMade(ctx: SidesContext, id: string): Promise<boolean> {
  return exists(stanzaMark(ctx, id));
}

export async function markStanza(ctx: SidesContext, id: string): Promise<void> {
  await writeRootFile(stanzaMark(ctx, id), '', { name: 'root', uid: 0, gid: 0 });
}

/** The remote repository recorded for the service, if any. */
export async function recordedRemote(
  ctx: SidesContext,
  id: string,
): Promise<RemoteRepository | undefined> {
  try {
    return JSON.parse(await readFile(marker(ctx, id), 'utf8')) as RemoteRepository;
  } catch {
    return undefined;
  }
}
