// Where the local driver keeps things. Every path is derived here and only
// here, so that creating, adopting, reading logs, sampling metrics and
// deleting always agree.
//
//   <dataDir>/local/              root 0711 (searchable, not listable), as every
//                                directory Basin owns here; see docs/security.md
//     installation               this installation's tag (service-users.ts)
//     template/pgdata            the cluster every new node is copied from
//     template/template.json     what built it (a version marker)
//     .staging-<random>/         a template or CA being built (renamed into place)
//     ca/                        the installation's certificate authority (ca.crt, ca.key)
//     instances/<id>/<node>/     one PostgreSQL cluster (a "node")
//       pgdata/                  its data directory; pgdata/log/*.json are its logs
//       state.json               what the driver last applied to it (root 0600)
//       startup.log              the postmaster's output until its log collector runs (root 0600)
//     archive/<id>/              WAL archive of a service (PITR, forks)
//     s/<id>-<node>/             its Unix socket directory (kept short: socket
//                                paths are limited to 107 bytes)
//
// pgdata, the archive and the socket directories belong to the service's OS
// user (0700); everything else to root (Basin) or, for the template, to the
// template user.
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
  get instancesDir(): string {
    return join(this.root, 'instances');
  }
  instanceDir(id: string): string {
    return join(this.instancesDir, id);
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
}

/** PostgreSQL's Unix socket file name for a port. */
export const socketName = (port: number) => `.s.PGSQL.${port}`;
