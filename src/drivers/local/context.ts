// What the local driver's parts share: made once by LocalDriver.start and
// handed to them. It lives apart from local-driver.ts so that the parts
// (converge/, replication/, endpoints/, backups/…) can name it without
// importing the driver that imports them. Each part takes only the fields
// it uses (`Pick<DriverContext, …>`), so what it depends on is written in its
// signature; a part the context itself holds (LocalBackups, RestartPolicy)
// names its own fields instead, since this file imports it.

import type { Size } from '../../domain/types.js';
import type { Logger } from '../../lib/logger.js';
import type { LocalBackups } from './backups/backups.js';
import type { Repositories } from './backups/repository/repositories.js';
import type { RemoteIdentity } from './backups/repository/remote.js';
import type { Haproxy } from './endpoints/haproxy.js';
import type { PgInstall } from './host-check.js';
import type { NodeCgroups } from './host/cgroups/node-cgroups.js';
import type { OomScores } from './host/cgroups/oom-scores.js';
import type { PrivateTmp } from './host/confine.js';
import type { OsUser } from './host/os-user.js';
import type { ServiceUsers } from './host/service-users.js';
import type { KeyedLock } from './keyed-lock.js';
import type { Layout } from './layout.js';
import type { ServiceNetworks } from './network/service-networks.js';
import type { AdminBounds } from './node/admin.js';
import type { SpawnedServers, Stopper } from './node/postmaster.js';
import type { RestartPolicy } from './node/restarts.js';
import type { Template } from './node/template.js';
import type { StorageWatch } from './storage/storage-watch.js';
import type { Tasks } from './tasks.js';

/** What the driver's parts need from it; shared by all nodes. */
export interface DriverContext {
  layout: Layout;
  pg: PgInstall;
  /** The services' OS users (one each when Basin is root). */
  users: ServiceUsers;
  template: Template;
  /** Each server's private directories, when the host allows them (confine.ts). */
  privateTmp: PrivateTmp | undefined;
  stopper: Stopper;
  /** Postmasters this process started, by data directory, to report how a failed start ended. */
  spawned: SpawnedServers;
  publicHost: string;
  listenAddresses: string;
  publicCidrs: readonly string[];
  /** The OS users that may log in as `postgres` over a cluster's socket (pg_ident), for a cluster run as `user`. */
  adminOsUsers(user: OsUser): string[];
  /** How long an administrative connection may take (admin.ts). */
  adminBounds: AdminBounds;
  /** The services' stanzas and backups (backups.ts). */
  backups: LocalBackups;
  /** Each service's repository with a server of its own, when repositories have them (repository/). */
  repositories: Repositories | undefined;
  /** On a host of several: signs a service's credentials at the repository host (repository/remote.ts). */
  remoteIdentity: RemoteIdentity | undefined;
  /** One service's work at a time (a fork holds its parent's while it copies from it). */
  locks: KeyedLock;
  /** Work in the background, such as a fork's restore (tasks.ts). */
  tasks: Tasks;
  /** The installation's proxy: the endpoints of services with HA replicas (haproxy.ts). */
  haproxy: Haproxy;
  /** Primaries found hung (primary-health.ts): data directory → postmaster pid. */
  unresponsive: Map<string, number>;
  /** The cgroups of each node, pooler and helper, with their bounds (node-cgroups.ts). */
  cgroups: NodeCgroups;
  /** What the kernel's OOM killer is told of each process (oom-scores.ts). */
  oom: OomScores;
  /** How soon a node that died on its own starts again (restarts.ts). */
  restarts: RestartPolicy;
  /** Each service's and read replica set's network namespace, when they have them. */
  networks: ServiceNetworks;
  /** What each service holds on the disk, and its level (storage/storage-watch.ts). */
  storage: StorageWatch;
  /** A size's storage allowance, in bytes. */
  allowance(size: Size): number;
  log: Logger;
}
