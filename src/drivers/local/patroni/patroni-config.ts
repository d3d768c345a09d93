// Patroni's configuration for one node of a service, built by Basin from the
// service's spec and the node's place (docs/decisions.md, "Patroni"). Pure:
// no I/O, so every rule is unit-tested (patroni-config.test.ts) and what Basin wants
// is compared with what it wrote by comparing text.
//
// Patroni 3.0's YAML configuration
// (https://patroni.readthedocs.io/en/latest/yaml_configuration.html):
// - `etcd3`: the installation's etcd members over TLS, as the service's own
//   etcd user (readwrite on /basin/<serviceId>/ only, with its password:
//   see `etcd.auth`); `namespace: /basin/`, `scope: <id>`;
// - `restapi`: on the node's address, TLS with a client certificate
//   required (the installation's CA), and a password for its unsafe
//   endpoints, which only Basin's addresses and the members may call;
// - `bootstrap.dcs`: synchronous_mode from sync_replica_count, strict when
//   the user asked for synchronous replicas, slots, pg_rewind; the
//   cluster's first node starts from Basin's template (no initdb per
//   service: template.ts), moved into place by a custom bootstrap method;
// - `postgresql`: the parameters of Basin's own builders (conf.ts), the
//   replication role and its TLS, pg_hba and pg_ident from conf.ts.

import { stringify } from 'yaml';
import { PATRONI_ETCD_NAMESPACE } from '../../../domain/etcd.js';
import { nodeName } from '../../../domain/service-nodes.js';
import type { PatroniTiming, ServiceSpec } from '../../driver.js';
import {
  type ConfOptions,
  type NodePaths,
  pgHba,
  pgIdent,
  postgresqlSettings,
  REPLICATION_ROLE,
  type Settings,
} from '../config/conf.js';

/** The DCS prefix of every service's cluster: /basin/<serviceId>/… */
export const PATRONI_NAMESPACE = PATRONI_ETCD_NAMESPACE;

/**
 * Patroni's DCS failsafe mode, on (docs/decisions.md, "HA across hosts",
 * etcd losing its majority): a leader that cannot renew its key in etcd
 * keeps its primary running while it reaches every member's REST API
 * (POST /failsafe, each member named in the /failsafe key it last wrote),
 * and demotes otherwise. So etcd down alone (every database node up)
 * stops no writes; a leader cut from any member still demotes within
 * retry_timeout, as without it, and a member that hears from the leader
 * does not run for leader: no second primary. Dynamic configuration: in
 * `bootstrap.dcs` for a new cluster, PATCHed into an older one's.
 */
export const FAILSAFE_MODE = true;

/** The REST API's user for its unsafe endpoints (restart, switchover…): Basin's. */
export const RESTAPI_USER = 'basin';

/** One node of the service, as Patroni's members know each other. */
export interface PatroniMember {
  index: number;
  /** The address its PostgreSQL and REST API listen on (a host's, or a namespace's). */
  address: string;
  /** Its PostgreSQL port. */
  port: number;
  /** Its REST API port. */
  apiPort: number;
}

/** TLS files: a certificate, its key, and the CA that verifies the peer. */
export interface TlsFiles {
  cert: string;
  key: string;
  ca: string;
}

/** Where the node's files are, on its host. */
export interface PatroniPaths extends NodePaths {
  /** The data directory Patroni manages (empty until bootstrap or a replica's copy). */
  pgdata: string;
  /** PostgreSQL's programs (pg_ctl, pg_basebackup, pg_rewind…). */
  pgBin: string;
  /**
   * A clone of Basin's template made for this node (seed.ts): the first
   * node of the cluster moves it into place instead of running initdb.
   */
  seed: string;
  /** Where Patroni keeps the passwords libpq reads (its own file, the service's user's). */
  pgpass: string;
  /** PostgreSQL's certificate for this node's address (outside pgdata: a base backup copies pgdata). */
  serverTls: TlsFiles;
}

export interface PatroniInputs {
  spec: ServiceSpec;
  /** This node. */
  self: PatroniMember;
  /**
   * Where its PostgreSQL and REST API listen, when not at `self.address`: a
   * node across hosts listens in its service's network namespace and is
   * reached at its host's address (`self.address`, where the host forwards
   * both ports into the namespace: network/service-networks.ts).
   */
  listen?: string;
  /** Every node of the service, this one included. */
  members: readonly PatroniMember[];
  paths: PatroniPaths;
  /** conf.ts's options (listen addresses are the node's own here). */
  conf: Omit<ConfOptions, 'listenAddresses'>;
  /** OS users that may log in as `postgres` over the socket (Basin's door, and Patroni's). */
  adminOsUsers: readonly string[];
  etcd: {
    endpoints: readonly string[];
    tls: TlsFiles;
    /**
     * The service's etcd user (readwrite on /basin/<serviceId>/ only).
     * Patroni speaks to etcd through its JSON gateway, which does not take
     * a certificate's CN for the user (etcd's "gRPC gateway" notes): the
     * user is named with its password, the certificate only opens TLS.
     */
    auth?: { username: string; password: string };
  };
  restApi: {
    tls: TlsFiles;
    password: string;
    /** Who may call its unsafe endpoints besides the members: Basin's addresses. */
    allowlist: readonly string[];
  };
  /**
   * Where the service's HAProxy connects from to reach this node (its
   * host's addresses); none until HAProxy routes by Patroni's checks.
   */
  proxies?: readonly string[];
  /**
   * Whether WAL is archived (Basin's pgBackRest command); false: archive_mode
   * off, for nodes whose archiving is not wired yet (across hosts).
   */
  archiving?: boolean;
  /** The replication role's password (replication.ts, replicationSecret). */
  replicationSecret: string;
  /**
   * The host addresses of the service's read replica sets' nodes: they
   * stream as the replication role through HAProxy on their own hosts,
   * which connects from there (docs/decisions.md, "Read replica sets
   * across hosts").
   */
  readers?: readonly string[];
  /** The leader key's TTL and Patroni's loop, in seconds (defaults 30 and 10, Patroni's). */
  timing?: PatroniTiming;
}

/**
 * Parameters Patroni sets itself and that must not come from Basin:
 * listen_addresses and port (from `postgresql.listen`), cluster_name, the synchronous
 * standbys (synchronous_mode), a standby's conninfo and slot, and what a
 * recovering fork needs (Patroni promotes, not recovery_target_action).
 */
const PATRONI_OWNS = new Set([
  'listen_addresses',
  'port',
  // Patroni runs every member with cluster_name = its scope (the service's
  // id), whatever it is given: a node's own name would never run, and
  // would look like a setting waiting for a restart (node-ops.ts).
  'cluster_name',
  'synchronous_standby_names',
  'primary_conninfo',
  'primary_slot_name',
  'recovery_target_timeline',
  'restore_command',
  'recovery_target',
  'recovery_target_action',
  'recovery_target_time',
]);

/**
 * Parameters that must be equal on every member (a hot standby refuses to
 * run with less than its primary): kept in the DCS, whence Patroni gives
 * them to every member.
 */
export const CLUSTER_WIDE = [
  'max_connections',
  'max_worker_processes',
  'max_wal_senders',
  'max_replication_slots',
  'max_prepared_transactions',
  'max_locks_per_transaction',
  'wal_level',
];

/**
 * The etcd members a node's Patroni talks to: every member but the one on
 * the node's own host (`hostAddress`), unless that is the only one.
 * Patroni 3.0.2 reads etcd without a quorum (`serializable`), caches what
 * it read, and renews its leader key with an unconditional put (fixed in
 * 3.0.3, patroni/patroni#2689). A primary cut off from the other hosts
 * still reaches its own host's member, cut off with it: that member answers
 * reads with the cluster as it was (this node the leader), so once the
 * partition heals Patroni puts its leader key over the new leader's and
 * promotes the old primary on its old timeline (two histories; commits
 * acknowledged by the new primary lost). Without its own host's member, a
 * cut-off node reaches no member at all, reads nothing stale, demotes, and
 * reads the cluster afresh from the majority's members when it heals
 * (docs/decisions.md, "HA across hosts": a partition).
 */
export function etcdHostsFor(hostAddress: string, endpoints: readonly string[]): string[] {
  const others = endpoints.filter((e) => e.replace(/:\d+$/, '') !== hostAddress);
  return others.length > 0 ? others : [...endpoints];
}

/** The custom bootstrap method's name: the template's clone moved into place. */
export const BOOTSTRAP_METHOD = 'basin_template';

/** Patroni's configuration for `i.self`, as an object (renderPatroniConfig writes it). */
export function patroniConfig(i: PatroniInputs): Record<string, unknown> {
  const { spec, self, paths } = i;
  const sync = Math.max(0, Math.min(i.spec.ha.syncReplicaCount, i.members.length - 1));
  const timing = i.timing ?? { ttl: 30, loopWait: 10, retryTimeout: 10 };
  const parameters = patroniParameters(i);
  const replicationTls = {
    sslmode: 'verify-full',
    sslrootcert: paths.serverTls.ca,
  };
  return {
    scope: spec.serviceId,
    namespace: PATRONI_NAMESPACE,
    name: nodeName(self.index),
    log: { level: 'INFO', format: '%(asctime)s %(levelname)s: %(message)s' },
    restapi: {
      listen: hostPort(i.listen ?? self.address, self.apiPort),
      connect_address: hostPort(self.address, self.apiPort),
      certfile: i.restApi.tls.cert,
      keyfile: i.restApi.tls.key,
      cafile: i.restApi.tls.ca,
      // Every request, a GET too, needs a certificate of the installation's CA.
      verify_client: 'required',
      authentication: { username: RESTAPI_USER, password: i.restApi.password },
      // Unsafe endpoints (switchover, restart, reinitialize…): Basin and the members only.
      allowlist: [...i.restApi.allowlist],
      allowlist_include_members: true,
    },
    // Patroni's own calls to the other members' REST APIs (a failover's
    // check of who is most advanced) present the same certificate.
    ctl: { certfile: i.restApi.tls.cert, keyfile: i.restApi.tls.key, cacert: i.restApi.tls.ca },
    etcd3: {
      hosts: etcdHostsFor(self.address, i.etcd.endpoints),
      // These hosts and no others: no discovery of the members from etcd's
      // member list, which would hand back the member on this node's host.
      use_proxies: true,
      protocol: 'https',
      cacert: i.etcd.tls.ca,
      cert: i.etcd.tls.cert,
      key: i.etcd.tls.key,
      ...(i.etcd.auth ? { username: i.etcd.auth.username, password: i.etcd.auth.password } : {}),
    },
    bootstrap: {
      dcs: {
        ttl: timing.ttl,
        loop_wait: timing.loopWait,
        retry_timeout: timing.retryTimeout,
        ...(timing.primaryStopTimeout ? { primary_stop_timeout: timing.primaryStopTimeout } : {}),
        // A standby more than 1 MB behind is never promoted (without
        // synchronous replicas: with them, only a synchronous one is).
        maximum_lag_on_failover: 1024 * 1024,
        synchronous_mode: sync > 0,
        // The user asked for synchronous replicas: with none left, writes
        // wait rather than go unreplicated, so no acknowledged commit is
        // lost in a failover (docs/decisions.md, Patroni).
        synchronous_mode_strict: sync > 0,
        synchronous_node_count: Math.max(1, sync),
        failsafe_mode: FAILSAFE_MODE,
        postgresql: {
          use_pg_rewind: true,
          use_slots: true,
          parameters: Object.fromEntries(
            CLUSTER_WIDE.filter((k) => k in parameters).map((k) => [k, parameters[k]]),
          ),
        },
      },
      method: BOOTSTRAP_METHOD,
      [BOOTSTRAP_METHOD]: {
        // The template's clone for this node, renamed onto the (empty) data
        // directory: both are the service's user's, on one file system.
        command: `mv -T -- ${shq(paths.seed)} ${shq(paths.pgdata)}`,
        no_params: true,
      },
    },
    postgresql: {
      listen: hostPort(i.listen ?? self.address, self.port),
      connect_address: hostPort(self.address, self.port),
      data_dir: paths.pgdata,
      bin_dir: paths.pgBin,
      pgpass: paths.pgpass,
      // Patroni's own connection: `postgres` over the node's socket, by
      // peer authentication through pg_ident, as Basin's.
      use_unix_socket: true,
      authentication: {
        superuser: { username: 'postgres' },
        replication: {
          username: REPLICATION_ROLE,
          password: i.replicationSecret,
          ...replicationTls,
        },
        // pg_rewind reads the new primary's files as the replication role,
        // over TLS: the superuser never logs in over TCP (conf.ts, pgHba).
        rewind: { username: REPLICATION_ROLE, password: i.replicationSecret, ...replicationTls },
      },
      parameters,
      pg_hba: pgHba(spec, i.conf.publicCidrs, false, true, {
        proxy: (i.proxies ?? []).map((a) => `${a}/32`),
        // The other nodes stream and rewind from here; the node itself
        // asks its own server for its timeline over a replication
        // connection before it decides on pg_rewind (Patroni's rewind.py),
        // from the address it listens on.
        replication: [
          ...new Set([
            ...i.members.map((m) => m.address),
            ...(i.listen ? [i.listen] : []),
            ...(i.readers ?? []),
          ]),
        ].map((a) => `${a}/32`),
      })
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('#')),
      pg_ident: pgIdent(i.adminOsUsers)
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('#')),
      // A standby is copied from a member now; from the repository host's
      // pgBackRest later (issue 21): its method goes first in this list.
      create_replica_methods: ['basebackup'],
      basebackup: [{ checkpoint: 'fast' }],
      // An old primary that pg_rewind cannot bring back is copied afresh.
      remove_data_directory_on_rewind_failure: true,
      remove_data_directory_on_diverged_timelines: true,
    },
    tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
    watchdog: { mode: 'off' },
  };
}

/**
 * The node's PostgreSQL parameters: Basin's (conf.ts: sizes, TLS, archiving,
 * logs) for this node, less what Patroni owns, with the node's certificate
 * (outside the data directory, which a replica copies whole) and the WAL
 * senders and slots the other members need.
 */
export function patroniParameters(i: PatroniInputs): Settings {
  const base = postgresqlSettings(
    i.spec,
    i.paths,
    { ...i.conf, listenAddresses: i.listen ?? i.self.address },
    undefined,
    { index: i.self.index, port: i.self.port },
  );
  const out: Settings = {};
  for (const [k, v] of Object.entries(base)) if (!PATRONI_OWNS.has(k)) out[k] = v;
  out.ssl_cert_file = i.paths.serverTls.cert;
  out.ssl_key_file = i.paths.serverTls.key;
  // Every node is a primary in turn: enough senders and slots for the
  // others, a base backup and pg_rewind, and some slack (PostgreSQL's
  // defaults are 10 each).
  const room = String(Math.max(10, 2 * i.members.length + 2));
  out.max_wal_senders = room;
  out.max_replication_slots = room;
  out.hot_standby = 'on';
  out.hot_standby_feedback = 'on';
  // After a failover, a standby that followed the old primary streams
  // from the new one only once it tries again: PostgreSQL waits
  // wal_retrieve_retry_interval (5 s by default) between attempts, and
  // the first ones fail while the new leader makes its slot. Under
  // synchronous_mode_strict, commits wait for that standby: 5 s per
  // attempt was ~4.7 s of every failover measured across hosts
  // (bench/README.md, ha-hosts). Each attempt also asks the archive
  // (restore_command), once a second only while there is no stream.
  out.wal_retrieve_retry_interval = '1s';
  if (i.archiving === false) {
    out.archive_mode = 'off';
    delete out.archive_command;
    delete out.archive_timeout;
  }
  return out;
}

/** The configuration file's text (YAML). */
export function renderPatroniConfig(i: PatroniInputs): string {
  return `# Written by Basin from the service's spec; edits are overwritten.\n${stringify(patroniConfig(i), { version: '1.1' })}`;
}

const hostPort = (address: string, port: number) =>
  address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;

/** A word for Patroni's shlex.split: single-quoted, a quote closed and escaped. */
function shq(s: string): string {
  return `'${s.replace(/'/g, `'"'"'`)}'`;
}
