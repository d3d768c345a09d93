// A pgBackRest repository per service that no tenant can write
// (docs/security.md, "Backups and their repositories"; docs/decisions.md,
// Backups and forks).
//
// Why one server per service, as an OS user of its own: pgBackRest 2.45's
// TLS server authorizes a client certificate for a stanza *name*
// (tls-server-auth), then loads the options the client sends (its
// --repo1-path, --config…) and serves its storage protocol with the
// client's raw paths: a client authorized for one stanza reads, lists,
// writes and removes whatever the server's OS user can, in any stanza or
// outside the repository. So the boundary is the server's uid: each
// service's repository belongs to `basin-r-<id>` (service-users.ts, kind
// 'repository'), which no tenant is, and its server runs as that user and
// serves that one repository. What a hostile client can make it do is
// what that user can: its own service's repository (a tenant can delete
// its own backups: the residual), and the host's world-readable files.
//
// The server:
//   - runs as `basin-r-<id>` with no_new_privs, in a mount namespace of its
//     own with private /tmp & co. (confine.ts), in the `repo` cgroups of the
//     service (REPOSITORY_BOUNDS), protected from the OOM killer as Basin's
//     own helpers are, detached so that it outlives Basin (a restarted
//     Basin adopts it by its pid in server.json, as PgBouncer's);
//   - listens on the host side of the service's network namespace
//     (hostAddress:8432, network/service-networks.ts), a port that only that
//     namespace (and the host) reaches: other tenants' connections are reset
//     by the kernel before any TLS;
//   - shows a certificate of the installation's CA whose CN is that address
//     (pgBackRest compares the CN with repo1-host), and serves the service's
//     client certificate (CN basin-service-<id>) for its stanza, and a
//     fork's while the fork is restored (authorize: a SIGHUP reloads it).
//
// It runs from the service's first start until its delete (a paused
// service keeps it: ~14 MB, and a fork of a paused service needs it).
// Its files: layout.ts (repos/<id>/). Leftovers (a repository whose
// service's instance directory is gone) go at start (sweep).

import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { accepts } from '../../../../lib/port-probe.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../../../lib/logger.js';
import { DriverError } from '../../../driver.js';
import { tenantCommand, type PrivateTmp } from '../../host/confine.js';
import { lastLines, withPrelude } from '../../host/exec.js';
import { KeyedLock } from '../../keyed-lock.js';
import type { Layout } from '../../layout.js';
import { REPOSITORY_BOUNDS } from '../../host/cgroups/node-bounds.js';
import type { NodeCgroups } from '../../host/cgroups/node-cgroups.js';
import {
  ensureOwnedDir,
  exists,
  mkdirIn,
  removeTrees,
  writeRootFile,
} from '../../node/node-files.js';
import { hash } from '../../node/node-state.js';
import type { OomScores } from '../../host/cgroups/oom-scores.js';
import { protectedPrelude } from '../../host/cgroups/oom-scores.js';
import type { OsUser } from '../../host/os-user.js';
import { spawnTenantDaemon } from '../../node/postmaster.js';
import { isLive, procCmdline, signalAll } from '../../host/processes.js';
import type { ServiceUsers } from '../../host/service-users.js';
import type { ServiceNetworks } from '../../network/service-networks.js';
import { identityIsCurrent, issueIdentity } from '../../node/tls.js';
import { type Authorized, REPO_PORT, renderServerConf, serviceClientName } from './repo-conf.js';

export interface RepositoriesOptions {
  /** Whether new services get a repository with a server (--repository-servers). */
  on: boolean;
  layout: Layout;
  /** Whether services have OS users of their own (Basin runs as root). */
  perService: boolean;
  /** The repositories' OS users (kind 'repository'). */
  users: ServiceUsers;
  networks: ServiceNetworks;
  cgroups: NodeCgroups;
  oom: OomScores;
  privateTmp: PrivateTmp | undefined;
  pgbackrest: string;
  log: Logger;
}

/**
 * The installation's repositories with servers: undefined where they
 * cannot be (Basin not root, or services without networks of their own:
 * a server listens on its service's gateway), with one WARNING when they
 * were asked for. Otherwise what a deleted service left is swept, and
 * new services get one if `on` (services that have one keep it either way).
 */
export async function startRepositories(o: RepositoriesOptions): Promise<Repositories | undefined> {
  if (!o.perService || !o.networks.enabled) {
    if (o.on) {
      o.log.warn(
        {},
        'WARNING: repository servers (--repository-servers, on by default) need Basin to run as root with service networks; ' +
          "every service's backups stay in its own directories (docs/security.md, Backups and their repositories).",
      );
    }
    return undefined;
  }
  const repositories = new Repositories(o);
  await repositories.sweep();
  return repositories;
}

/** How the service's side reaches its repository. */
export interface RepositoryEndpoint {
  /** The server's address (the service's gateway) and the CN of its certificate. */
  host: string;
  /** The configuration the server's side of a client's command loads (repo1-host-config). */
  config: string;
  /** The repository's OS user: what owns its files. */
  user: OsUser;
}

interface ServerState {
  pid?: number;
  /** The configuration the server runs with (a change of it is a SIGHUP). */
  loaded?: string;
}

/** How long a server takes to listen before its start counts as failed. */
const LISTEN_MS = 15_000;

export class Repositories {
  /** One change of a repository at a time (a fork authorizes itself at its parent's meanwhile). */
  private readonly locks = new KeyedLock();

  constructor(private readonly o: RepositoriesOptions) {}

  /** Whether new services get a repository with a server. */
  get enabled(): boolean {
    return this.o.on;
  }

  /** The repository's OS user of `id`, if it was made. */
  lookup(id: string): OsUser | undefined {
    return this.o.users.lookup(id);
  }

  /**
   * The service's repository and its server, made, mended and running:
   * its user, its directories, its identities, its configuration (a
   * change is loaded with a SIGHUP), its port reserved to the service's
   * namespace, and its server started (or adopted) and listening.
   */
  ensure(id: string): Promise<RepositoryEndpoint> {
    return this.locks.run(id, () => this.ensureNow(id));
  }

  private async ensureNow(id: string): Promise<RepositoryEndpoint> {
    const { layout, networks } = this.o;
    const net = await networks.ensure(id);
    const user = await this.o.users.ensure(id);
    const r = layout.repository(id);
    await mkdirIn(r.dir, 0o711);
    for (const dir of [r.repo, r.lock, r.log]) await ensureOwnedDir(dir, user);
    await writeRootFile(r.ca, await readFile(layout.caCert, 'utf8'), user);
    const server = {
      cn: net.hostAddress,
      use: 'server' as const,
      cert: r.serverCert,
      key: r.serverKey,
    };
    if (!(await identityIsCurrent(layout, server))) await issueIdentity(layout, server, user);
    const conf = renderServerConf({
      repo: r.repo,
      dirs: { lock: r.lock, log: r.log },
      listen: net.hostAddress,
      identity: { cert: r.serverCert, key: r.serverKey, ca: r.ca },
      authorized: await this.authorized(id),
    });
    await writeRootFile(r.serverConf, conf, user);
    await networks.reserveHostPorts(id, [REPO_PORT]);
    await this.run(id, user, net.hostAddress, hash(conf));
    return { host: net.hostAddress, config: r.serverConf, user };
  }

  /**
   * The repository's user and directory (root's, 0711), made, its server
   * not started: what a local repository moves into (move.ts).
   */
  prepare(id: string): Promise<OsUser> {
    return this.locks.run(id, async () => {
      const user = await this.o.users.ensure(id);
      await mkdirIn(this.o.layout.repository(id).dir, 0o711);
      return user;
    });
  }

  /**
   * Lets the fork `forkId` (its client certificate's CN) read `parent`'s
   * stanza at the parent's server while it is made, or no longer
   * (`allowed` false). Recorded (guests.json: a Basin restarted while the
   * fork recovers serves it still) and loaded at once (SIGHUP).
   */
  authorize(parent: string, forkId: string, allowed: boolean): Promise<void> {
    return this.locks.run(parent, async () => {
      const file = this.o.layout.repository(parent).guests;
      const rest = (await this.guestsOf(parent)).filter((g) => g !== forkId);
      const guests = allowed ? [...rest, forkId].sort() : rest;
      if (await exists(this.o.layout.repository(parent).dir)) {
        await writeJson(file, guests);
      }
      await this.ensureNow(parent);
    });
  }

  /** The running server's pid of `id`, if it runs. */
  async pid(id: string): Promise<number | undefined> {
    const { pid } = await readState(this.o.layout.repository(id).state);
    return pid !== undefined && (await this.isOurs(id, pid)) ? pid : undefined;
  }

  /**
   * The server stops, every process of the repository's user goes, then
   * its files and the user: the service's backups with them. False while
   * something is still exiting (call again).
   */
  remove(id: string): Promise<boolean> {
    return this.locks.run(id, () => this.removeNow(id));
  }

  private async removeNow(id: string): Promise<boolean> {
    const user = this.o.users.lookup(id);
    const pid = await this.pid(id);
    if (pid !== undefined) signalAll([pid], 'SIGKILL');
    if (user && (await this.o.users.killAll(user)) > 0) return false;
    if (!(await this.o.cgroups.remove({ id, part: 'repo' }))) return false;
    await removeTrees([this.o.layout.repository(id).dir]);
    if (user) {
      await this.o.users.removeLeftovers(user);
      await this.o.users.remove(id);
    }
    return true;
  }

  /**
   * At start: the repositories (and their servers and users) of services
   * whose instance directory is gone, left by a Basin killed in a delete.
   */
  async sweep(): Promise<void> {
    const { layout, log } = this.o;
    const ids = await readdir(layout.repositoriesDir).catch(() => [] as string[]);
    for (const id of ids) {
      if (!/^[a-z0-9]{1,32}$/.test(id) || (await exists(layout.instanceDir(id)))) continue;
      for (let i = 0; !(await this.remove(id)); i++) {
        if (i > 100) throw new Error(`the repository of ${id} keeps processes running`);
        await sleep(50);
      }
      log.info({ serviceId: id }, "removed a deleted service's repository");
    }
  }

  /** Whom the server serves: the service, and the forks being made of it that still exist. */
  private async authorized(id: string): Promise<Authorized[]> {
    const forks: string[] = [];
    for (const g of await this.guestsOf(id)) {
      if (await exists(this.o.layout.instanceDir(g))) forks.push(g);
    }
    return [id, ...forks].map((s) => ({ client: serviceClientName(s), stanza: id }));
  }

  private async guestsOf(id: string): Promise<string[]> {
    try {
      const raw = JSON.parse(
        await readFile(this.o.layout.repository(id).guests, 'utf8'),
      ) as unknown;
      return Array.isArray(raw)
        ? raw.filter((g): g is string => /^[a-z0-9]{1,32}$/.test(String(g)))
        : [];
    } catch {
      return [];
    }
  }

  /** Starts the server, or reloads a running one whose configuration changed; waits until it listens. */
  private async run(id: string, user: OsUser, host: string, loaded: string): Promise<void> {
    const r = this.o.layout.repository(id);
    const pid = await this.pid(id);
    if (pid !== undefined) {
      const state = await readState(r.state);
      if (state.loaded !== loaded) {
        signalAll([pid], 'SIGHUP');
        await writeState(r.state, { pid, loaded });
        // The reload is the server's own: a short while before it serves the new list.
        await sleep(200);
      }
      return;
    }
    const cgroups = await this.o.cgroups.ensure({ id, part: 'repo' }, REPOSITORY_BOUNDS);
    const cmd = withPrelude(
      protectedPrelude(this.o.oom, cgroups),
      tenantCommand(user, this.o.pgbackrest, [`--config=${r.serverConf}`, 'server'], {
        privateTmp: this.o.privateTmp,
      }),
    );
    const spawned = spawnTenantDaemon(cmd, r.dir, r.output);
    await writeState(r.state, { pid: spawned.pid, loaded });
    this.o.log.info(
      { serviceId: id, pid: spawned.pid, osUser: user.name },
      "starting the service's repository server",
    );
    const until = Date.now() + LISTEN_MS;
    while (!(await accepts({ host, port: REPO_PORT }))) {
      if (spawned.exit || Date.now() > until) {
        if (!spawned.exit) signalAll([spawned.pid], 'SIGKILL');
        const out = await readFile(r.output, 'utf8').catch(() => '');
        throw new DriverError(
          `The service's repository server did not start: ${lastLines(out, 3) || 'no output'}`,
          true,
        );
      }
      await sleep(50);
    }
  }

  /** Whether `pid` is a live pgBackRest server of this repository. */
  private async isOurs(id: string, pid: number): Promise<boolean> {
    if (!(await isLive(pid))) return false;
    const argv = await procCmdline(pid);
    return (
      /(^|\/)pgbackrest$/.test(argv[0] ?? '') &&
      argv.includes(`--config=${this.o.layout.repository(id).serverConf}`) &&
      argv.at(-1) === 'server'
    );
  }
}

async function readState(file: string): Promise<ServerState> {
  try {
    const raw = JSON.parse(await readFile(file, 'utf8')) as ServerState;
    return {
      ...(Number.isInteger(raw.pid) ? { pid: raw.pid } : {}),
      ...(typeof raw.loaded === 'string' ? { loaded: raw.loaded } : {}),
    };
  } catch {
    return {};
  }
}

function writeState(file: string, state: ServerState): Promise<void> {
  return writeJson(file, state);
}

/** Root's record (0600), written aside and renamed. */
async function writeJson(file: string, value: unknown): Promise<void> {
  const tmp = `${file}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, JSON.stringify(value), { mode: 0o600 });
  await rename(tmp, file);
}
