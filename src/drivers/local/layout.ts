// Where the local driver keeps things. Every path is derived here and only
// here, so that creating, adopting, reading logs, sampling metrics and
// deleting always agree.
//
//   <dataDir>/local/              root 0711 (searchable, not listable), as every
//                                directory Basin owns here; see docs/security.md
//     installation               this installation's tag (service-users.ts)
//     template/pgdata            the cluster every new node is copied from
//     template/template.json     what built it (a version marker)
//     .staging-<random>/         a template, CA or certificate being made (renamed
//                                into place; what a dead Basin staged, here and
//                                in the other staging places, goes at the next
//                                start: leftovers.ts)
//     ca/                        the installation's certificate authority (ca.crt, ca.key)
//     instances/<id>/storage.json   what the storage watch knows of it (root 0600; storage/)
//     instances/<id>/system-id   the service's system identifier (system-id.ts; root 0600)
//     instances/<id>/<node>/     one PostgreSQL cluster (a "node")
//       pgdata/                  its data directory; pgdata/log/*.json are its logs
//       state.json               what the driver last applied to it (root 0600)
//       startup.log              the postmaster's output until its log collector runs (root 0600)
//     backup/<id>/               a service's pgBackRest stanza, its side (root 0711):
//       pgbackrest.conf          its configuration (root, 0640 to the service's group: read, not changed)
//       repo/                    its repository, where it has no server of its own (local
//                                repositories: repository/repositories.ts)
//       spool/ lock/ log/        pgBackRest's asynchronous queue, locks and logs
//       client.crt client.key    its identity at its repository's server, and the CA (ca.crt)
//       pgserver.conf            the pgBackRest server a backup reaches it through, with
//       pgserver.crt .key        its identity (root, 0640 to the service's group)
//       source.conf              while a fork is made: how it reaches its parent's repository
//       source/, source-pg/      the part of its parent's repository it restores, and the
//                                parent's pg_control, when it copies (fork-repo.ts, fork-check.ts)
//     repos/<id>/                a service's repository with its server (root 0711; repository/):
//       repo/ lock/ log/         the repository, pgBackRest's locks and logs: its repository
//                                user's (basin-r-<id>, 0700), no tenant's
//       server.conf backup.conf  the server's configuration, and its backups' (root, 0640 to that
//                                user's group)
//       server.crt .key          its TLS identity, client.crt .key its identity as a client of
//                                the service's side, ca.crt (root, 0640 to that group)
//       server.json server.log   the pid Basin started, and its output (root 0600)
//       guests.json              the forks its server serves too while they are made (root 0600)
//     archive/<id>/              WAL archive of a service made by an older Basin (removed at delete)
//     instances/<id>/oom-kills.json   the OOM kills of its cgroups last reported (oom-watch.ts, root 0600)
//     instances/<id>/pooler/     the service's (or set's) PgBouncer (pooler.ts), root 0711:
//       pgbouncer.ini users.txt hba.conf   its configuration (root, 0640 to the service's group)
//       ca.crt                   a set's: the CA its nodes' certificates are checked against (same)
//       pooler.json pooler.log   what Basin started, and its output (root 0600)
//     haproxy/services/<id>.cfg  the host's HAProxy's frontend of a service or set (endpoints/haproxy.ts)
//     s/<id>-<node>/             its Unix socket directory (kept short: socket
//                                paths are limited to 107 bytes)
//
// pgdata, the socket directories and what lies in backup/<id>/ but the
// configuration and identity files belong to the service's OS user (0700);
// what lies in repos/<id>/ but its files, to the repository's user;
// everything else to root (Basin) or, for the template, to the template user.
//
// `<id>` is a service id or a read replica set id (both are unique random
// ids); node 0 is a service's primary, nodes 1… its HA replicas. A replica
// set's nodes are numbered from 0 too.

import { join } from 'node:path';

export interface NodeRef {
  /** Service or read replica set id. */
  id: string;
  node: number;
}

export class Layout {
  readonly root: string;

  /** `dataDir` is Basin's data directory, a real path (see LocalDriver.start). */
  constructor(readonly dataDir: string) {
    this.root = join(dataDir, 'local');
  }

  get installationFile(): string {
    return join(this.root, 'installation');
  }
  get templateDir(): string {
    return join(this.root, 'template');
  }
  get templatePgdata(): string {
    return join(this.templateDir, 'pgdata');
  }
  get templateMarker(): string {
    return join(this.templateDir, 'template.json');
  }
  /** A fresh directory name beside the final ones, so that a rename publishes it atomically. */
  staging(suffix: string): string {
    return join(this.root, `.staging-${suffix}`);
  }
  get caDir(): string {
    return join(this.root, 'ca');
  }
  get caCert(): string {
    return join(this.caDir, 'ca.crt');
  }
  get caKey(): string {
    return join(this.caDir, 'ca.key');
  }
  /** The host's HAProxy: its files, and `services/<id>.cfg`, each service's (or set's) frontend. */
  get haproxyDir(): string {
    return join(this.root, 'haproxy');
  }
  get haproxyServicesDir(): string {
    return join(this.haproxyDir, 'services');
  }
  get instancesDir(): string {
    return join(this.root, 'instances');
  }
  instanceDir(id: string): string {
    return join(this.instancesDir, id);
  }
  /** The storage watch's record of a service or replica set (storage/storage-record.ts). */
  storageFile(id: string): string {
    return join(this.instanceDir(id), 'storage.json');
  }
  /** The OOM kills of the service's (or set's) cgroups last reported in its logs (oom-watch.ts). */
  oomKillsFile(id: string): string {
    return join(this.instanceDir(id), 'oom-kills.json');
  }
  nodeDir(ref: NodeRef): string {
    return join(this.instanceDir(ref.id), String(ref.node));
  }
  pgdata(ref: NodeRef): string {
    return join(this.nodeDir(ref), 'pgdata');
  }
  logDir(ref: NodeRef): string {
    return join(this.pgdata(ref), 'log');
  }
  stateFile(ref: NodeRef): string {
    return join(this.nodeDir(ref), 'state.json');
  }
  /** The service's system identifier, as Basin gave it (system-id.ts; root 0600). */
  systemIdFile(id: string): string {
    return join(this.instanceDir(id), 'system-id');
  }
  startupLog(ref: NodeRef): string {
    return join(this.nodeDir(ref), 'startup.log');
  }
  get socketsDir(): string {
    return join(this.root, 's');
  }
  socketDir(ref: NodeRef): string {
    return join(this.socketsDir, `${ref.id}-${ref.node}`);
  }
  get archivesDir(): string {
    return join(this.root, 'archive');
  }
  archiveDir(id: string): string {
    return join(this.archivesDir, id);
  }
  get backupsDir(): string {
    return join(this.root, 'backup');
  }
  backupDir(id: string): string {
    return join(this.backupsDir, id);
  }
  /** The service's pgBackRest configuration (its stanza is its id). */
  backupConf(id: string): string {
    return join(this.backupDir(id), 'pgbackrest.conf');
  }
  /** The directories of the service's user that pgBackRest writes: repository, spool, locks, logs. */
  backupDirs(id: string): { repo: string; spool: string; lock: string; log: string } {
    const dir = this.backupDir(id);
    return {
      repo: join(dir, 'repo'),
      spool: join(dir, 'spool'),
      lock: join(dir, 'lock'),
      log: join(dir, 'log'),
    };
  }
  /** backup.info of the service's own stanza in a local repository (backupDirs' repo). */
  backupInfo(id: string): string {
    return join(this.backupDirs(id).repo, 'backup', id, 'backup.info');
  }
  /**
   * The service's side of a repository with a server (repository/): its
   * identity as that server's client, the CA, and the pgBackRest server a
   * backup reaches its data directory through, with that server's identity.
   */
  backupIdentity(id: string): {
    clientCert: string;
    clientKey: string;
    ca: string;
    serverConf: string;
    serverCert: string;
    serverKey: string;
  } {
    const dir = this.backupDir(id);
    return {
      clientCert: join(dir, 'client.crt'),
      clientKey: join(dir, 'client.key'),
      ca: join(dir, 'ca.crt'),
      serverConf: join(dir, 'pgserver.conf'),
      serverCert: join(dir, 'pgserver.crt'),
      serverKey: join(dir, 'pgserver.key'),
    };
  }
  get repositoriesDir(): string {
    return join(this.root, 'repos');
  }
  /** A service's repository with its server, its repository user's (repository/). */
  repository(id: string): {
    dir: string;
    repo: string;
    lock: string;
    log: string;
    serverConf: string;
    backupConf: string;
    serverCert: string;
    serverKey: string;
    clientCert: string;
    clientKey: string;
    ca: string;
    state: string;
    output: string;
    guests: string;
  } {
    const dir = join(this.repositoriesDir, id);
    return {
      dir,
      repo: join(dir, 'repo'),
      lock: join(dir, 'lock'),
      log: join(dir, 'log'),
      serverConf: join(dir, 'server.conf'),
      backupConf: join(dir, 'backup.conf'),
      serverCert: join(dir, 'server.crt'),
      serverKey: join(dir, 'server.key'),
      clientCert: join(dir, 'client.crt'),
      clientKey: join(dir, 'client.key'),
      ca: join(dir, 'ca.crt'),
      state: join(dir, 'server.json'),
      output: join(dir, 'server.log'),
      guests: join(dir, 'guests.json'),
    };
  }
  /** A service's or read replica set's PgBouncer: its configuration, Basin's record of it and its output (pooler.ts). */
  pooler(id: string): {
    dir: string;
    ini: string;
    authFile: string;
    hbaFile: string;
    caFile: string;
    state: string;
    log: string;
    /** Client addresses refused for their failed logins, and until when (pooler-guard.ts). */
    blocked: string;
    /** The secret Basin reads the pools' numbers with, and its verifier (root 0600, pooler-stats.ts). */
    stats: string;
  } {
    const dir = join(this.instanceDir(id), 'pooler');
    return {
      dir,
      ini: join(dir, 'pgbouncer.ini'),
      authFile: join(dir, 'users.txt'),
      hbaFile: join(dir, 'hba.conf'),
      caFile: join(dir, 'ca.crt'),
      state: join(dir, 'pooler.json'),
      log: join(dir, 'pooler.log'),
      blocked: join(dir, 'blocked.json'),
      stats: join(dir, 'stats.json'),
    };
  }
  /**
   * While a fork is made: how it reaches its parent's repository (its
   * configuration), and when it copies from it (local repositories, or a
   * parent's not moved yet), the part of it that it restores, and the
   * parent's control file (a `pg1-path` whose identifier archive-get finds
   * in that repository: fork-check.ts).
   */
  forkSource(id: string): { repo: string; conf: string; pg: string } {
    return {
      repo: join(this.backupDir(id), 'source'),
      conf: join(this.backupDir(id), 'source.conf'),
      pg: join(this.backupDir(id), 'source-pg'),
    };
  }
}

/** PostgreSQL's Unix socket file name for a port. */
export const socketName = (port: number) => `.s.PGSQL.${port}`;
