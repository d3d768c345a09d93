// WAL archiving of one node of an HA service across hosts into the
// service's stanza on the repository host (docs/decisions.md, "HA across
// hosts": archiving). The nodes of a service share its stanza (named by the
// service's id): each holds the service's client certificate (CN
// basin-service-<id>, the repositories CA), made here with a key of its own
// and signed by the control plane only for a host that carries one of the
// service's nodes (hosts/host-registry.ts issueRepositoryClient), so the
// stanza's server admits each of its nodes and no other service's.
//
// Files, under the node's own resource (`<id>n<i>`) on this host:
//   backup/<id>n<i>/pgbackrest.conf  archive-push and stanza-create to the
//                                    repository host (repo1-host, TLS);
//   backup/<id>n<i>/client.crt/.key, ca.crt: the service's client identity;
//   backup/<id>n<i>/stanza-made      the stanza was made (by a leader, once).
//   backup/<id>n<i>/pgserver.conf/.crt/.key: the server a backup on the
//                                    repository host reads the node through
//                                    (openNodeSource), for the repository's
//                                    client (CN basin-repository-<id>) alone.
// Patroni's archive_mode is `on`: only the leader archives (see decisions).

import { join } from 'node:path';
import { DriverError, type RemoteRepository, type ServiceSpec } from '../../driver.js';
import { makeKeyAndRequest } from '../../../lib/x509.js';
import { helperCommand } from '../host/confine.js';
import { failureOf, run } from '../host/exec.js';
import type { OsUser } from '../host/os-user.js';
import { ensureOwnedDir, exists, mkdirIn, writeRootFile } from '../node/node-files.js';
import type { DriverContext } from '../context.js';
import {
  renderServiceConf,
  renderServiceServerConf,
  repositoryClientName,
} from '../backups/repository/repo-conf.js';
import { sourcePort } from '../backups/repository/remote.js';
import type { SourceInfo } from '../backups/backups.js';
import { backupProcesses } from '../config/pgbackrest.js';

type Ctx = Pick<DriverContext, 'layout' | 'pg' | 'privateTmp' | 'remoteIdentity'>;
type SourceCtx = Ctx & Pick<DriverContext, 'networks' | 'backups'>;

/** What the node's archive_command runs: pgBackRest with the node's configuration. */
export interface NodeArchive {
  pgbackrest: string;
  backupConf: string;
}

const ROOT = { name: 'root', uid: 0, gid: 0 };

/**
 * The ports forwarded into the node's namespace from its host's address (a
 * forward names every port it keeps): PostgreSQL's, the REST API's,
 * with a repository host the backup source's, and the pooler's.
 */
export const nodePorts = (spec: ServiceSpec, node: { port: number; apiPort: number }): number[] => [
  node.port,
  node.apiPort,
  ...(spec.repository ? [sourcePort(spec)] : []),
  // The service's pooler on this host runs in the node's namespace
  // (endpoints/patroni-pooler.ts); its port leads there whether enabled or
  // not, so no other tenant's process can take it meanwhile.
  ...(spec.pooler.port === null ? [] : [spec.pooler.port]),
];

/**
 * The node's side of the service's repository, made or brought up to date;
 * undefined when the service has no repository on a repository host (its
 * nodes then archive nothing).
 */
export async function ensureNodeArchive(
  ctx: Ctx,
  spec: ServiceSpec,
  local: string,
  node: { pgdata: string; socketDir: string; port: number },
  user: OsUser,
): Promise<NodeArchive | undefined> {
  const repository: RemoteRepository | undefined = spec.repository;
  if (!repository || !ctx.remoteIdentity) return undefined;
  const { layout } = ctx;
  await mkdirIn(layout.backupDir(local), 0o711);
  const { spool, lock, log } = layout.backupDirs(local);
  for (const dir of [spool, lock, log]) await ensureOwnedDir(dir, user);
  const mine = layout.backupIdentity(local);
  if (!((await exists(mine.clientCert)) && (await exists(mine.clientKey)))) {
    const made = await makeKeyAndRequest('client');
    // Signed for the service (its stanza's client name), not for the node.
    const signed = await ctx.remoteIdentity(spec.serviceId, 'client', made.csr);
    await writeRootFile(mine.ca, signed.ca, user);
    // The key first: a certificate is never there without its key.
    await writeRootFile(mine.clientKey, made.key, user);
    await writeRootFile(mine.clientCert, signed.certificate, user);
  }
  const backupConf = layout.backupConf(local);
  await writeRootFile(
    backupConf,
    renderServiceConf({
      stanza: spec.serviceId,
      dirs: { spool, lock, log },
      repo: {
        host: repository.host,
        port: repository.port,
        cert: mine.clientCert,
        key: mine.clientKey,
        ca: mine.ca,
        config: repository.config,
      },
      pgdata: node.pgdata,
      socketDir: node.socketDir,
      port: node.port,
    }),
    user,
  );
  return { pgbackrest: ctx.pg.pgbackrest, backupConf };
}

/**
 * Makes the service's stanza from the leader, once (marked on this node):
 * stanza-create is idempotent on pgBackRest's side, so a second leader's
 * (after a failover before the mark) finds it made.
 */
export async function ensureNodeStanza(
  ctx: Ctx,
  spec: ServiceSpec,
  local: string,
  archive: NodeArchive,
  user: OsUser,
): Promise<void> {
  const mark = join(ctx.layout.backupDir(local), 'stanza-made');
  if (await exists(mark)) return;
  const cmd = helperCommand(
    user,
    archive.pgbackrest,
    [`--config=${archive.backupConf}`, `--stanza=${spec.serviceId}`, 'stanza-create'],
    ctx.privateTmp,
  );
  try {
    await run(cmd.file, cmd.args, { timeoutMs: 120_000 });
  } catch (err) {
    throw new DriverError(`pgbackrest stanza-create failed: ${failureOf(err)}`, true);
  }
  await writeRootFile(mark, '', ROOT);
}

/**
 * The node's pgBackRest server for a backup on the repository host (as a
 * service's own: backups.ts openSource), in the node's namespace on the
 * service's source port, forwarded from this host's address. The hosts
 * driver opens it on the leader's node only.
 */
export async function openNodeSource(
  ctx: SourceCtx,
  spec: ServiceSpec,
  local: string,
  node: { pgdata: string; socketDir: string; port: number; apiPort: number },
  user: OsUser,
): Promise<SourceInfo> {
  const archive = await ensureNodeArchive(ctx, spec, local, node, user);
  if (!archive || !ctx.remoteIdentity) {
    throw new DriverError(
      `Service ${spec.serviceId} has no repository on a repository host.`,
      false,
    );
  }
  const port = sourcePort(spec);
  const net = await ctx.networks.ensure(local);
  await ctx.networks.forward(local, { ports: nodePorts(spec, node) });
  const mine = ctx.layout.backupIdentity(local);
  if (!((await exists(mine.serverCert)) && (await exists(mine.serverKey)))) {
    const made = await makeKeyAndRequest('source');
    const signed = await ctx.remoteIdentity(spec.serviceId, 'source', made.csr);
    await writeRootFile(mine.serverKey, made.key, user);
    await writeRootFile(mine.serverCert, signed.certificate, user);
  }
  const { lock, log } = ctx.layout.backupDirs(local);
  await writeRootFile(
    mine.serverConf,
    renderServiceServerConf({
      stanza: spec.serviceId,
      listen: net.address,
      port,
      identity: { cert: mine.serverCert, key: mine.serverKey, ca: mine.ca },
      client: repositoryClientName(spec.serviceId),
      dirs: { lock, log },
    }),
    user,
  );
  return ctx.backups.serveSource(
    local,
    {
      port,
      config: archive.backupConf,
      pgPath: node.pgdata,
      socketDir: node.socketDir,
      pgPort: node.port,
      processMax: backupProcesses(spec.size),
    },
    user,
  );
}
