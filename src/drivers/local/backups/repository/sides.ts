// The two sides of a service whose repository has a server of its own
// (repositories.ts): what each side's pgBackRest reads, and the server a
// backup reaches the service's data directory through.
//
//   the service's side (its OS user, in its network namespace):
//     backup/<id>/pgbackrest.conf  archive-push (the archiver's: the same
//                                  archive_command as a local repository's),
//                                  archive-get, stanza-create: to its
//                                  repository's server, with its client
//                                  certificate (CN basin-service-<id>, the
//                                  key readable by its user: it authorizes
//                                  nothing but its own repository);
//     backup/<id>/pgserver.conf    the server a backup reaches its data
//                                  through: on its namespace's address, for
//                                  its repository's client only, started for
//                                  the backup and stopped after it;
//   the repository's side (its OS user, on the host):
//     repos/<id>/backup.conf       backups and expiry, next to the
//                                  repository: `pg1-host` is the service's
//                                  server (backup cannot run where the
//                                  repository is remote: pgBackRest makes
//                                  repo-host "internal" for it).
//
// A tenant holds its side's keys; with them it reaches only its own
// repository's server (the port is its namespace's alone, and the server's
// user owns nothing else). The repository's client key is that user's
// group's alone: the tenant's server sees it used, never holds it.

import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceSpec } from '../../../driver.js';
import { DriverError } from '../../../driver.js';
import { helperCommand } from '../../host/confine.js';
import { childEnv, lastLines, withPrelude, type Prelude } from '../../host/exec.js';
import { ensureOwnedDir, mkdirIn, writeRootFile } from '../../node/node-files.js';
import type { OsUser } from '../../host/os-user.js';
import { backupProcesses } from '../../config/pgbackrest.js';
import { identityIsCurrent, issueIdentity, type Identity } from '../../node/tls.js';
import { accepts } from '../../../../lib/port-probe.js';
import type { Repositories, RepositoryEndpoint } from './repositories.js';
import {
  REPO_PORT,
  renderBackupConf,
  renderServiceConf,
  renderServiceServerConf,
  repositoryClientName,
  serviceClientName,
} from './repo-conf.js';
import type { Layout } from '../../layout.js';
import type { PgInstall } from '../../host-check.js';
import type { PrivateTmp } from '../../host/confine.js';
import type { NodeCgroups } from '../../host/cgroups/node-cgroups.js';
import type { OomScores } from '../../host/cgroups/oom-scores.js';
import type { ServiceNetworks } from '../../network/service-networks.js';
import { primaryNode } from '../../primary-node.js';

/**
 * What the sides need of the driver (DriverContext's fields, named here
 * because the context holds LocalBackups, which uses them).
 */
export interface SidesContext {
  layout: Layout;
  pg: PgInstall;
  privateTmp: PrivateTmp | undefined;
  networks: ServiceNetworks;
  cgroups: NodeCgroups;
  oom: OomScores;
}

/**
 * Both sides' configurations and identities, made or brought up to date,
 * with the repository's server running; returns how to reach it.
 */
export async function ensureSides(
  ctx: SidesContext,
  repositories: Repositories,
  spec: ServiceSpec,
  user: OsUser,
): Promise<RepositoryEndpoint> {
  const { layout } = ctx;
  const id = spec.serviceId;
  const net = await ctx.networks.ensure(id);
  const { spool, lock, log } = layout.backupDirs(id);
  const mine = layout.backupIdentity(id);
  const r = layout.repository(id);
  // The repository's side (its user, certificate and server, started and
  // listening: the slow part) is made while the service's own side is.
  const [repository, own] = await Promise.allSettled([
    repositories.ensure(id),
    (async () => {
      await mkdirIn(layout.backupDir(id), 0o711);
      for (const dir of [spool, lock, log]) await ensureOwnedDir(dir, user);
      await writeRootFile(mine.ca, await readFile(layout.caCert, 'utf8'), user);
      await ensureIdentity(
        ctx,
        { cn: serviceClientName(id), use: 'client', cert: mine.clientCert, key: mine.clientKey },
        user,
      );
      await ensureIdentity(
        ctx,
        { cn: net.address, use: 'server', cert: mine.serverCert, key: mine.serverKey },
        user,
      );
    })(),
  ]);
  if (repository.status === 'rejected') throw repository.reason;
  if (own.status === 'rejected') throw own.reason;
  const endpoint = repository.value;
  const repoUser = endpoint.user;
  await ensureIdentity(
    ctx,
    { cn: repositoryClientName(id), use: 'client', cert: r.clientCert, key: r.clientKey },
    repoUser,
  );
  const primary = primaryNode(spec);
  const pg = {
    pgdata: layout.pgdata({ id, node: primary.index }),
    socketDir: layout.socketDir({ id, node: primary.index }),
    port: primary.port,
  };
  await writeRootFile(
    layout.backupConf(id),
    renderServiceConf({
      stanza: id,
      dirs: { spool, lock, log },
      repo: {
        host: endpoint.host,
        cert: mine.clientCert,
        key: mine.clientKey,
        ca: mine.ca,
        config: endpoint.config,
      },
      ...pg,
    }),
    user,
  );
  await writeRootFile(
    mine.serverConf,
    renderServiceServerConf({
      stanza: id,
      listen: net.address,
      identity: { cert: mine.serverCert, key: mine.serverKey, ca: mine.ca },
      client: repositoryClientName(id),
      dirs: { lock, log },
    }),
    user,
  );
  await writeRootFile(
    r.backupConf,
    renderBackupConf({
      stanza: id,
      repo: r.repo,
      dirs: { lock: r.lock, log: r.log },
      processMax: backupProcesses(spec.size),
      pg: {
        host: net.address,
        cert: r.clientCert,
        key: r.clientKey,
        ca: r.ca,
        config: layout.backupConf(id),
        path: pg.pgdata,
        socketDir: pg.socketDir,
        pgPort: pg.port,
      },
    }),
    repoUser,
  );
  return endpoint;
}

/**
 * The service's client identity at repository servers, and the CA, alone:
 * what a fork needs to restore through its parent's server, whether or
 * not it has a server of its own.
 */
export async function ensureClientIdentity(
  ctx: SidesContext,
  id: string,
  user: OsUser,
): Promise<void> {
  const mine = ctx.layout.backupIdentity(id);
  await mkdirIn(ctx.layout.backupDir(id), 0o711);
  await writeRootFile(mine.ca, await readFile(ctx.layout.caCert, 'utf8'), user);
  await ensureIdentity(
    ctx,
    { cn: serviceClientName(id), use: 'client', cert: mine.clientCert, key: mine.clientKey },
    user,
  );
}

async function ensureIdentity(ctx: SidesContext, id: Identity, reader: OsUser): Promise<void> {
  if (!(await identityIsCurrent(ctx.layout, id))) await issueIdentity(ctx.layout, id, reader);
}

/**
 * Runs `work` while the service's own pgBackRest server runs (as its user,
 * in its namespace: `command` wraps it, e.g. in the backup's priority),
 * with `prelude` (its cgroups); the server is killed after it, whatever
 * happened. A server that does not listen fails the work, retryably.
 */
export async function withServiceServer<T>(
  ctx: SidesContext,
  id: string,
  user: OsUser,
  prelude: Prelude,
  wrap: (file: string, args: string[]) => [string, string[]],
  work: () => Promise<T>,
): Promise<T> {
  const net = ctx.networks.get(id);
  if (!net) throw new DriverError(`Service ${id} has no network of its own.`, true);
  const [file, args] = wrap(ctx.pg.pgbackrest, [
    `--config=${ctx.layout.backupIdentity(id).serverConf}`,
    'server',
  ]);
  const cmd = withPrelude(prelude, helperCommand(user, file, args, ctx.privateTmp));
  const child = spawn(cmd.file, cmd.args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: childEnv(),
  });
  let output = '';
  child.stderr?.on('data', (d: Buffer) => {
    output = (output + d.toString()).slice(-4096);
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  child.once('error', () => (exited = true));
  const stop = () => {
    // Its connections' processes are its children, in its session (setsid).
    if (child.pid !== undefined) {
      for (const pid of [-child.pid, child.pid]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    }
  };
  try {
    const until = Date.now() + 15_000;
    while (!(await accepts({ host: net.address, port: REPO_PORT }))) {
      if (exited || Date.now() > until) {
        throw new DriverError(
          `The service's pgBackRest server did not start: ${lastLines(output, 3) || 'no output'}`,
          true,
        );
      }
      await sleep(50);
    }
    return await work();
  } finally {
    stop();
  }
}
