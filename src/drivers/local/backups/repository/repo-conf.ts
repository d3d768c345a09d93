// The pgBackRest configurations of a repository with a server of its own
// (repositories.ts says why there is one per service): pure builders, one
// per file, unit-tested (repo-conf.test.ts).
//
//   repos/<id>/server.conf   the repository's server: where it listens, its
//                            identity, whom it serves (tls-server-auth), and
//                            for what a client's command runs there, where
//                            the repository is (clients name this file as
//                            repo1-host-config: a server loads whatever
//                            configuration its client names, or
//                            /etc/pgbackrest/pgbackrest.conf);
//   repos/<id>/backup.conf   backups, run there as the repository's user,
//                            reaching the service's data directory through
//                            the service's own server (pg1-host, TLS);
//   backup/<id>/pgbackrest.conf   the service's side: the archiver's
//                            archive-push, stanza-create, and what a backup's
//                            remote loads (pg1-host-config);
//   backup/<id>/pgserver.conf     the server a backup reaches the service
//                            through, in its network namespace, serving the
//                            repository's client only;
//   backup/<fork>/source.conf     a fork's restore, through its parent's server.

import { serviceRepositoryClientCn } from '../../../../domain/hosts.js';
import { checkConfLine } from '../../config/pgbackrest.js';

/** Where every pgBackRest server of Basin's listens: on its own address (the service's gateway, or its namespace's address). */
export const REPO_PORT = 8432;

/**
 * On a host of several, a service's repository server on the repository
 * host, and its own backup source on its database host, listen on its port
 * + this: the control plane hands out service ports installation-wide, so
 * each is unique on either host (the port range must be narrower).
 */
export const SOURCE_PORT_OFFSET = 10_000;

/** The CN of a service's client certificate: what its repository's server authorizes (and its parent's, while it is forked). */
export const serviceClientName = serviceRepositoryClientCn;
/** The CN of a repository's client certificate: what the service's own server authorizes, for its backups. */
export const repositoryClientName = (id: string) => `basin-repository-${id}`;

/** A TLS end to connect to: the address and port, the client's identity and CA, and the configuration the server loads for the command. */
export interface TlsPeer {
  host: string;
  cert: string;
  key: string;
  ca: string;
  /** The path of the configuration the server's side of the command loads. */
  config: string;
  /** Its port: REPO_PORT unless said (a repository host serves each service on a port of its own). */
  port?: number;
}

/** The directories pgBackRest writes on one side: its locks and logs (and the queue of asynchronous archiving). */
export interface Dirs {
  lock: string;
  log: string;
  spool?: string;
}

/** Who a server serves: each client CN for one stanza. */
export interface Authorized {
  client: string;
  stanza: string;
}

const LOGS = ['log-level-console=warn', 'log-level-stderr=off', 'log-level-file=warn'];

function dirs(d: Dirs): string[] {
  return [
    ...(d.spool === undefined ? [] : [`spool-path=${d.spool}`]),
    `lock-path=${d.lock}`,
    `log-path=${d.log}`,
  ];
}

function server(
  listen: string,
  id: Omit<TlsPeer, 'host' | 'config'>,
  auth: Authorized[],
  port = REPO_PORT,
) {
  return [
    `tls-server-address=${listen}`,
    `tls-server-port=${port}`,
    `tls-server-cert-file=${id.cert}`,
    `tls-server-key-file=${id.key}`,
    `tls-server-ca-file=${id.ca}`,
    ...auth.map((a) => `tls-server-auth=${checkName(a.client)}=${checkName(a.stanza)}`),
  ];
}

function peer(prefix: 'repo1-host' | 'pg1-host', p: TlsPeer): string[] {
  return [
    `${prefix}=${p.host}`,
    `${prefix}-type=tls`,
    `${prefix}-port=${p.port ?? REPO_PORT}`,
    `${prefix}-cert-file=${p.cert}`,
    `${prefix}-key-file=${p.key}`,
    `${prefix}-ca-file=${p.ca}`,
    `${prefix}-config=${p.config}`,
  ];
}

/**
 * A repository encrypted with `pass` (aes-256-cbc: the repository host's,
 * docs/decisions.md "Several hosts"); nothing without one.
 */
function cipher(pass: string | undefined): string[] {
  if (pass === undefined) return [];
  if (!/^[A-Za-z0-9+/=_-]{32,128}$/.test(pass)) throw new Error('unusable cipher pass');
  return ['repo1-cipher-type=aes-256-cbc', `repo1-cipher-pass=${pass}`];
}

/** A CN or a stanza: letters, digits and dashes only (`=` would split tls-server-auth). */
function checkName(name: string): string {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new Error(`unusable name ${JSON.stringify(name)}`);
  return name;
}

function render(lines: string[]): string {
  for (const line of lines) checkConfLine(line);
  return ['# Written by Basin; edits are overwritten.', ...lines, ''].join('\n');
}

/**
 * The repository's server: on `listen` (the service's gateway), serving
 * `authorized` (the service's client for its stanza; a fork's for it while
 * the fork is made). What its clients' commands load: the repository.
 */
export function renderServerConf(c: {
  repo: string;
  dirs: Dirs;
  listen: string;
  identity: Omit<TlsPeer, 'host' | 'config'>;
  authorized: Authorized[];
  /** A port of its own (the repository host's servers); REPO_PORT otherwise. */
  port?: number;
  cipherPass?: string;
}): string {
  return render([
    '[global]',
    `repo1-path=${c.repo}`,
    ...cipher(c.cipherPass),
    ...dirs(c.dirs),
    ...LOGS,
    'compress-type=lz4',
    ...server(c.listen, c.identity, c.authorized, c.port),
  ]);
}

/**
 * Backups, run as the repository's user next to its repository: bundled,
 * lz4, the server's logs left out, never expired by pgBackRest on its own
 * (backups.ts expires), reading the service's data directory through the
 * service's own server (`pg`).
 */
export function renderBackupConf(c: {
  stanza: string;
  repo: string;
  dirs: Dirs;
  processMax: number;
  pg: TlsPeer & { path: string; socketDir: string; pgPort: number };
  cipherPass?: string;
}): string {
  return render([
    '[global]',
    `repo1-path=${c.repo}`,
    ...cipher(c.cipherPass),
    'repo1-retention-full-type=count',
    'repo1-retention-full=9999999',
    ...dirs(c.dirs),
    ...LOGS,
    'compress-type=lz4',
    'repo1-bundle=y',
    'start-fast=y',
    'exclude=log/',
    `process-max=${c.processMax}`,
    '',
    `[${checkName(c.stanza)}]`,
    ...peer('pg1-host', c.pg),
    `pg1-path=${c.pg.path}`,
    `pg1-socket-path=${c.pg.socketDir}`,
    `pg1-port=${c.pg.pgPort}`,
    // The superuser, by peer authentication over the socket (pg_ident maps the service's user).
    'pg1-user=postgres',
  ]);
}

/**
 * The service's side: its archiver's archive-push (asynchronous: queued in
 * the spool, pushed by a background pgBackRest) and stanza-create, to its
 * repository's server (`repo`) with its client identity; a backup's remote
 * on this side loads it too.
 */
export function renderServiceConf(c: {
  stanza: string;
  dirs: Required<Dirs>;
  repo: TlsPeer;
  pgdata: string;
  socketDir: string;
  port: number;
}): string {
  return render([
    '[global]',
    ...peer('repo1-host', c.repo),
    ...dirs(c.dirs),
    ...LOGS,
    'compress-type=lz4',
    'archive-async=y',
    '',
    '[global:archive-push]',
    'process-max=1',
    '',
    `[${checkName(c.stanza)}]`,
    `pg1-path=${c.pgdata}`,
    `pg1-socket-path=${c.socketDir}`,
    `pg1-port=${c.port}`,
    'pg1-user=postgres',
  ]);
}

/** The server a backup reaches the service's data through: in its namespace, for the repository's client only. */
export function renderServiceServerConf(c: {
  stanza: string;
  listen: string;
  identity: Omit<TlsPeer, 'host' | 'config'>;
  client: string;
  dirs: Dirs;
  /** A port of its own (a service on a database host, backed up from the repository host). */
  port?: number;
}): string {
  return render([
    '[global]',
    ...dirs(c.dirs),
    ...LOGS,
    ...server(c.listen, c.identity, [{ client: c.client, stanza: c.stanza }], c.port),
  ]);
}

/** A fork's restore and WAL fetches, through its parent's server (`repo`), as the fork's user. */
export function renderForkSourceConf(c: {
  dirs: Required<Dirs>;
  repo: TlsPeer;
  processMax: number;
  /** The parent's stanza… */
  stanza: string;
  /**
   * …and where archive-get reads the identifier it looks the parent's WAL
   * up by: the parent's control file (fork-check.ts). The restore names
   * the fork's data directory itself.
   */
  pgPath: string;
}): string {
  return render([
    '[global]',
    ...peer('repo1-host', c.repo),
    ...dirs(c.dirs),
    ...LOGS,
    `process-max=${c.processMax}`,
    '',
    `[${checkName(c.stanza)}]`,
    `pg1-path=${c.pgPath}`,
  ]);
}
