// The repository host's repositories (docs/decisions.md, "Several hosts":
// backups on the repository host): one per service, as on one machine
// (drivers/local/backups/repository/repositories.ts says why), each
//   - owned by an OS user of its own, `basin-r-<id>`, that no tenant is;
//   - served by a pgBackRest TLS server running as that user, on a port of
//     its own on this host's address (the service's port + SOURCE_PORT_OFFSET:
//     the control plane allocates service ports installation-wide, so each
//     is unique here), authorizing the service's client certificate
//     (CN basin-service-<id>, repositories CA) for its stanza alone;
//   - encrypted (aes-256-cbc) with a pass of its own, made here and kept in
//     its configuration (root's, readable by its user's group): pgBackRest
//     hands a remote repository's pass to the clients it serves, so a pass
//     shared by two stanzas would be both tenants';
//   - backed up from here (pgBackRest runs `backup` only where the
//     repository is), as its user, reading the service's data through the
//     service's own pgBackRest server on its database host (pg1-host, TLS,
//     this host's client certificate CN basin-repository-<id>).
// Files: <data-dir>/repository/repos/<id>/ (root's, 0711): repo/, lock/,
// log/ (the user's), server.conf, backup.conf, tls/ (root's, the user's
// group may read), state.json (the server's pid: a restarted agent adopts
// it). Nothing of it is on a database host.

import { randomBytes } from 'node:crypto';
import {
  chmod,
  chown,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BackupProgress } from '../../drivers/driver.js';
import { CONTROL_PLANE_CN, repositoryBackupClientCn } from '../../domain/hosts.js';
import { httpsJson } from '../../lib/https-json.js';
import type { Logger } from '../../lib/logger.js';
import { makeKeyAndRequest } from '../../lib/x509.js';
import { asUser, failureOf, lastLines, run } from '../../drivers/local/host/exec.js';
import { isLive, procCmdline, signalAll } from '../../drivers/local/host/processes.js';
import { readPasswd, type OsUser } from '../../drivers/local/host/os-user.js';
import { spawnTenantDaemon } from '../../drivers/local/node/postmaster.js';
import { KeyedLock } from '../../drivers/local/keyed-lock.js';
import { clearUnmadeStanza } from '../../drivers/local/backups/unmade-stanza.js';
import {
  renderBackupConf,
  renderServerConf,
  serviceClientName,
  SOURCE_PORT_OFFSET,
} from '../../drivers/local/backups/repository/repo-conf.js';
import { accepts } from '../../lib/port-probe.js';
import type { AgentIdentity } from '../agent-files.js';
import { repositoryTlsDir } from '../repository-identity.js';
import { parseInfoJson } from './info-json.js';

/** What a backup on this host reads the service's data through (its database host's side). */
export interface BackupSource {
  /** The database host's address (the CN of the source's certificate) and the source server's port. */
  host: string;
  port: number;
  /** Paths on the database host: the configuration the source server loads, the data directory, the socket. */
  config: string;
  pgPath: string;
  socketDir: string;
  pgPort: number;
}

/** How a database host's clients reach a service's repository. */
export interface RepositoryEndpoint {
  host: string;
  port: number;
  /** The configuration the server loads for a client's command (repo1-host-config). */
  config: string;
}

export interface RepositoryHostOptions {
  dataDir: string;
  address: string;
  identity: AgentIdentity;
  allocateUid: () => Promise<number>;
  log: Logger;
  pgbackrest?: string;
}

const ID = /^[a-z0-9]{1,32}$/;
const BACKUP_TIMEOUT_MS = 12 * 3_600_000;
const SHORT_MS = 120_000;

interface Running {
  since: number;
  finished: boolean;
  error?: Error;
}

export class RepositoryHost {
  private readonly locks = new KeyedLock();
  private readonly running = new Map<string, Running>();
  private readonly program: string;

  constructor(private readonly o: RepositoryHostOptions) {
    this.program = o.pgbackrest ?? 'pgbackrest';
  }

  private dir(id: string) {
    const d = join(this.o.dataDir, 'repository', 'repos', check(id));
    return {
      dir: d,
      repo: join(d, 'repo'),
      lock: join(d, 'lock'),
      log: join(d, 'log'),
      tls: join(d, 'tls'),
      serverConf: join(d, 'server.conf'),
      backupConf: join(d, 'backup.conf'),
      pass: join(d, 'cipher-pass'),
      state: join(d, 'state.json'),
      output: join(d, 'server.out'),
    };
  }

  /**
   * The service's repository: its user, its directories, its pass, its
   * identities and configurations, and its server running (a changed
   * configuration is reloaded with a SIGHUP).
   */
  ensure(id: string, servicePort: number, source?: BackupSource): Promise<RepositoryEndpoint> {
    return this.locks.run(id, () => this.ensureNow(id, servicePort, source));
  }

  private async ensureNow(
    id: string,
    servicePort: number,
    source?: BackupSource,
  ): Promise<RepositoryEndpoint> {
    const d = this.dir(id);
    const port = servicePort + SOURCE_PORT_OFFSET;
    const user = await this.user(id);
    await this.traversable();
    // Modes set after: mkdir's are masked by the umask.
    await mkdir(d.dir, { recursive: true });
    await chmod(d.dir, 0o711);
    await mkdir(d.tls, { recursive: true });
    await chown(d.tls, 0, user.gid);
    await chmod(d.tls, 0o750);
    for (const p of [d.repo, d.lock, d.log]) {
      await mkdir(p, { recursive: true });
      await chown(p, user.uid, user.gid);
      await chmod(p, 0o700);
    }
    // What a stanza-create interrupted on its way (its database host lost,
    // or this host) left would make every later one fail (unmade-stanza.ts):
    // cleared here, where the repository is, before the service's apply
    // makes it again.
    await clearUnmadeStanza(d.repo, id, user, undefined, this.o.log);
    const pass = await this.cipherPass(d.pass);
    // The host's server identity (repository-identity.ts), readable by the user's group.
    const hostTls = repositoryTlsDir(this.o.dataDir);
    for (const f of ['server.crt', 'server.key', 'ca.crt']) {
      await writeFor(join(d.tls, f), await readFile(join(hostTls, f), 'utf8'), user);
    }
    const identity = {
      cert: join(d.tls, 'server.crt'),
      key: join(d.tls, 'server.key'),
      ca: join(d.tls, 'ca.crt'),
    };
    const conf = renderServerConf({
      repo: d.repo,
      dirs: { lock: d.lock, log: d.log },
      listen: this.o.address,
      port,
      identity,
      cipherPass: pass,
      authorized: [{ client: serviceClientName(id), stanza: id }],
    });
    await writeFor(d.serverConf, conf, user);
    if (source) await this.ensureBackupConf(id, user, source, 1);
    await this.run(id, user, port, conf);
    return { host: this.o.address, port, config: d.serverConf };
  }

  /**
   * Every repository's server running as last configured: at the agent's
   * start (its servers died with the host, or were killed) and at each
   * heartbeat (one that died). Without them the services' WAL waits in
   * their pg_wal and no backup runs, with nothing on the control plane's
   * side to call for them (it makes a repository only at a service's apply).
   */
  async keepServing(): Promise<void> {
    const repos = join(this.o.dataDir, 'repository', 'repos');
    const ids = await readdir(repos).catch(() => [] as string[]);
    for (const id of ids.filter((n) => ID.test(n))) {
      await this.locks
        .run(id, async () => {
          const d = this.dir(id);
          if ((await this.pid(id)) !== undefined) return;
          const conf = await readFile(d.serverConf, 'utf8').catch(() => undefined);
          const port = Number(/^tls-server-port=(\d+)$/m.exec(conf ?? '')?.[1]);
          const user = this.lookup(id);
          if (conf === undefined || !(port > 0) || !user) return;
          await this.run(id, user, port, conf);
        })
        .catch((err: unknown) =>
          this.o.log.warn(
            { serviceId: id, err: (err as Error).message },
            "the service's repository server could not be started again",
          ),
        );
    }
  }

  /**
   * The way from the data directory to the repositories, traversable (not
   * listable) by their users: the data directory and repository/ are
   * root's 0700 otherwise (the host's keys are 0600 files of their own).
   */
  private async traversable(): Promise<void> {
    const repository = join(this.o.dataDir, 'repository');
    const repos = join(repository, 'repos');
    await mkdir(repos, { recursive: true, mode: 0o711 });
    for (const dir of [this.o.dataDir, repository, repos]) {
      const mode = (await stat(dir)).mode & 0o777;
      if ((mode & 0o011) !== 0o011) await chmod(dir, mode | 0o011);
    }
  }

  /**
   * One step of a full backup started at or after `since`: done once the
   * stanza lists it; otherwise started in the background, or running. Its
   * checkpoint is immediate when `fast` or when it is the stanza's first
   * (config/pgbackrest.ts backupCheckpoint says why), spread otherwise.
   */
  backup(
    id: string,
    servicePort: number,
    since: number,
    source: BackupSource,
    processMax: number,
    fast = false,
  ): Promise<BackupProgress> {
    return this.locks.run(id, async () => {
      const run = this.running.get(id);
      if (run && !run.finished) return backingUp();
      this.running.delete(id);
      await this.ensureNow(id, servicePort);
      const user = await this.user(id);
      await this.ensureBackupConf(id, user, source, processMax);
      const existing = await this.listNow(id, user);
      const found = existing.find(
        (b) => Date.parse(b.startedAt) >= Math.floor(since / 1000) * 1000,
      );
      if (found) {
        const { walStart: _s, walStop: _e, ...backup } = found;
        return { done: true, backup };
      }
      if (run?.error && run.since === since) throw run.error;
      const started: Running = { since, finished: false };
      this.running.set(id, started);
      const checkpoint = fast || existing.length === 0 ? '--start-fast' : '--no-start-fast';
      void this.pgbackrest(
        user,
        id,
        this.dir(id).backupConf,
        [checkpoint, '--type=full', 'backup'],
        {
          timeoutMs: BACKUP_TIMEOUT_MS,
        },
      )
        .catch((err: Error) => {
          started.error = new Error(`The backup failed: ${err.message}`);
        })
        .finally(() => (started.finished = true));
      this.o.log.info({ serviceId: id }, 'backing up on the repository host');
      return backingUp();
    });
  }

  /** Expires the backups older than `oldestKept`, and the WAL only they needed. */
  expire(id: string, oldestKept: string): Promise<void> {
    return this.locks.run(id, async () => {
      const user = this.lookup(id);
      if (!user) return;
      const backups = await this.listNow(id, user);
      const i = backups.findIndex((b) => b.label === oldestKept);
      if (i <= 0) return;
      const keep = String(backups.length - i);
      await this.pgbackrest(
        user,
        id,
        this.dir(id).serverConf,
        [`--repo1-retention-full=${keep}`, `--repo1-retention-archive=${keep}`, 'expire'],
        { timeoutMs: SHORT_MS },
      );
    });
  }

  /** The server stops, every process of the user goes, then the repository and the user. */
  remove(id: string): Promise<boolean> {
    return this.locks.run(id, async () => {
      const user = this.lookup(id);
      const pid = await this.pid(id);
      if (pid !== undefined) signalAll([pid], 'SIGKILL');
      if (user) {
        try {
          await run('pkill', ['-KILL', '-U', String(user.uid)]);
          return false; // something was killed: look again
        } catch {
          // none left
        }
      }
      await rm(this.dir(id).dir, { recursive: true, force: true });
      if (user) await run('userdel', [user.name]);
      this.running.delete(id);
      return true;
    });
  }

  private async listNow(id: string, user: OsUser) {
    // Its info files are encrypted: pgBackRest reads them, as the repository's user.
    let out: string;
    try {
      out = await this.pgbackrest(user, id, this.dir(id).serverConf, ['--output=json', 'info'], {
        timeoutMs: SHORT_MS,
      });
    } catch (err) {
      throw new Error(`Could not read the list of backups: ${(err as Error).message}`);
    }
    return parseInfoJson(out, id);
  }

  private async ensureBackupConf(
    id: string,
    user: OsUser,
    source: BackupSource,
    processMax: number,
  ): Promise<void> {
    const d = this.dir(id);
    const cert = join(d.tls, 'backup.crt');
    const key = join(d.tls, 'backup.key');
    if (
      !(await readFile(cert).then(
        () => true,
        () => false,
      ))
    ) {
      const made = await this.signBackupClient(id);
      await writeFor(key, made.key, user);
      await writeFor(cert, made.cert, user);
    }
    await writeFor(
      d.backupConf,
      renderBackupConf({
        stanza: id,
        repo: d.repo,
        dirs: { lock: d.lock, log: d.log },
        processMax,
        cipherPass: await this.cipherPass(d.pass),
        pg: {
          host: source.host,
          port: source.port,
          cert,
          key,
          ca: join(d.tls, 'ca.crt'),
          config: source.config,
          path: source.pgPath,
          socketDir: source.socketDir,
          pgPort: source.pgPort,
        },
      }),
      user,
    );
  }

  /** This host's client certificate at the service's own server (CN basin-repository-<id>), signed by the control plane. */
  private async signBackupClient(id: string): Promise<{ cert: string; key: string }> {
    const { key, csr } = await makeKeyAndRequest(repositoryBackupClientCn(id));
    const me = this.o.identity;
    const res = await httpsJson(`${me.controlPlane}/v1/hosts/repository-backup-client`, {
      ca: me.ca,
      cert: me.cert,
      key: me.key,
      peerCn: CONTROL_PLANE_CN,
      body: { service_id: id, csr },
    });
    if (res.status !== 200) {
      throw new Error(
        `The control plane did not sign the backup client (HTTP ${res.status}): ${res.text}`,
      );
    }
    return { cert: (res.body as { certificate: string }).certificate, key };
  }

  private async cipherPass(file: string): Promise<string> {
    try {
      const pass = (await readFile(file, 'utf8')).trim();
      if (pass.length >= 32) return pass;
    } catch {
      // made below
    }
    const pass = randomBytes(48).toString('base64url');
    await writeAtomically(file, `${pass}\n`, 0o600);
    return pass;
  }

  private lookup(id: string): OsUser | undefined {
    const name = userName(id);
    const e = readPasswd().find((p) => p.name === name);
    return e && { name: e.name, uid: e.uid, gid: e.gid };
  }

  private async user(id: string): Promise<OsUser> {
    const found = this.lookup(id);
    if (found) return found;
    const uid = await this.o.allocateUid();
    const only = (key: string) => ['-K', `${key}_MIN=${uid}`, '-K', `${key}_MAX=${uid}`];
    await run('useradd', [
      '--system', '--no-create-home', '--home-dir', '/nonexistent',
      '--shell', '/usr/sbin/nologin', '--user-group', '--no-log-init',
      '--uid', String(uid), ...only('SYS_UID'), ...only('SYS_GID'),
      '--comment', `basin repository host, service ${id}`, userName(id),
    ]); // prettier-ignore
    this.o.log.info({ serviceId: id, uid }, "created the repository's OS user");
    const made = this.lookup(id);
    if (!made) throw new Error(`useradd made no user ${userName(id)}`);
    return made;
  }

  private async pid(id: string): Promise<number | undefined> {
    try {
      const { pid } = JSON.parse(await readFile(this.dir(id).state, 'utf8')) as { pid?: number };
      if (!Number.isInteger(pid) || !(await isLive(pid as number))) return undefined;
      const argv = await procCmdline(pid as number);
      return argv.includes(`--config=${this.dir(id).serverConf}`) && argv.at(-1) === 'server'
        ? pid
        : undefined;
    } catch {
      return undefined;
    }
  }

  private async run(id: string, user: OsUser, port: number, conf: string): Promise<void> {
    const d = this.dir(id);
    const pid = await this.pid(id);
    const loaded = await readFile(d.state, 'utf8')
      .then((t) => (JSON.parse(t) as { loaded?: string }).loaded)
      .catch(() => undefined);
    if (pid !== undefined) {
      if (loaded !== conf) {
        signalAll([pid], 'SIGHUP');
        await writeAtomically(d.state, JSON.stringify({ pid, loaded: conf }), 0o600);
      }
      return;
    }
    const cmd = asUser(user, this.program, [`--config=${d.serverConf}`, 'server']);
    const spawned = spawnTenantDaemon(cmd, d.dir, d.output);
    await writeAtomically(d.state, JSON.stringify({ pid: spawned.pid, loaded: conf }), 0o600);
    this.o.log.info(
      { serviceId: id, pid: spawned.pid, port },
      "starting the service's repository server",
    );
    const until = Date.now() + 15_000;
    while (!(await accepts({ host: this.o.address, port }))) {
      if (spawned.exit || Date.now() > until) {
        if (!spawned.exit) signalAll([spawned.pid], 'SIGKILL');
        const out = await readFile(d.output, 'utf8').catch(() => '');
        throw new Error(`The repository server did not start: ${lastLines(out, 3) || 'no output'}`);
      }
      await sleep(50);
    }
  }

  private async pgbackrest(
    user: OsUser,
    id: string,
    config: string,
    args: string[],
    o: { timeoutMs: number },
  ): Promise<string> {
    const cmd = asUser(user, this.program, [`--config=${config}`, `--stanza=${id}`, ...args], {
      diesWithBasin: true,
    });
    try {
      return await run(cmd.file, cmd.args, { timeoutMs: o.timeoutMs, cwd: '/' });
    } catch (err) {
      throw new Error(`pgbackrest ${args.at(-1)} failed: ${failureOf(err)}`);
    }
  }
}

const backingUp = (): BackupProgress => ({ done: false, retryAfterMs: 1000, reason: 'backing up' });

export const userName = (id: string) => `basin-r-${check(id)}`;

function check(id: string): string {
  if (!ID.test(id)) throw new Error(`not a service id: ${JSON.stringify(id)}`);
  return id;
}

/** Root's file, readable by `user`'s group alone (0640), written aside and renamed. */
async function writeFor(file: string, text: string, user: OsUser): Promise<void> {
  const tmp = `${file}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, text, { mode: 0o600 });
  await chown(tmp, 0, user.gid);
  await chmod(tmp, 0o640);
  await rename(tmp, file);
}

async function writeAtomically(file: string, text: string, mode: number): Promise<void> {
  const tmp = `${file}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, text, { mode });
  await rename(tmp, file);
}
