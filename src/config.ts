// Configuration: flags override environment variables, which override the
// defaults. Parsed once in main.ts and passed down; nothing reads process.env
// anywhere else.

import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { isEmail } from './domain/email.js';
import {
  DEFAULT_SERVICE_TYPE_NAME,
  SERVICE_TYPE_NAMES,
  type ServiceTypeName,
} from './domain/service-type-names.js';
import { DEFAULT_SIZES } from './domain/sizes.js';
import {
  type AllowancePolicy,
  parseAllowance,
  parseBytes,
  parseReserve,
  type ReservePolicy,
} from './domain/storage.js';
import { ENVIRONMENTS, type Environment, type Size } from './domain/types.js';
import { DEFAULT_SERVICE_NETWORK, parseBlock } from './drivers/local/network/addresses.js';
import { Layout } from './drivers/local/layout.js';

/**
 * The installation's CA certificate under a data directory, where the local
 * driver's layout keeps it: the CLI, which may not import a driver, asks here.
 */
export const localCaCertificate = (dataDir: string): string => new Layout(dataDir).caCert;

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** A PostgreSQL store (postgres://…); null: SQLite in the data directory. */
  storeUrl: string | null;
  driver: 'sim' | 'local' | 'hosts';
  tls: { cert: string; key: string } | 'self-signed' | null;
  regions: string[];
  defaultRegion: string;
  sizes: Size[];
  publicHost: string;
  portRange: { min: number; max: number };
  simDelayMs: number;
  bootstrapApiKey: string | null;
  logLevel: string;
  bodyLimitBytes: number;
  /** The HTTP server's bounds on its clients (app.ts). */
  http: HttpLimits;
  reconcileIntervalMs: number;
  /** How often every running node is sampled for the metric series (engine/series-collector.ts). */
  seriesIntervalMs: number;
  /** How a node that keeps dying is restarted (local driver: restarts.ts). */
  restarts: { baseMs: number; capMs: number; stableMs: number };
  /** The uids of the services' OS users (local driver, as root): given upward, never twice. */
  serviceUidRange: { min: number; max: number };
  /** Private /tmp & co. per service: where the host allows it, required, or never. */
  servicePrivateTmp: 'auto' | 'on' | 'off';
  /** The size of each private tmpfs of a service, in MiB. */
  serviceTmpSizeMb: number;
  /** How much disk each service's data may take (domain/storage.ts). */
  storageAllowance: AllowancePolicy;
  /** The free space the host keeps on the data directory's file system. */
  diskReserve: ReservePolicy;
  /** The memory every `shared` node shares, in MiB; null: a quarter of the host's (local driver). */
  sharedMemoryMb: number | null;
  /** The IPv4 block of the services' network namespaces (local driver, as root), or 'off'. */
  serviceNetwork: string;
  /** Endpoints report `<id>.<public host>` (the installation has wildcard DNS for it). */
  serviceHostnames: boolean;
  /** A pgBackRest repository server per service, as an OS user of its own (local driver, root, service networks). */
  repositoryServers: boolean;
  /**
   * Idle services suspend (local driver: idle/): after this long without a
   * client connection, for services of these environments; null: never.
   */
  idleSuspend: { afterMs: number; environments: Environment[] } | null;
  /** Operations the engine runs at once. */
  engineSlots: number;
  /** Of those, the most one project may hold. */
  engineProjectSlots: number;
  /** How long shutdown waits for running operations. */
  drainTimeoutMs: number;
  /** How long one attempt of an operation may take before it is given up and retried. */
  operationTimeoutMs: number;
  /** Failed attempts after which an operation ends failed (deletes excepted). */
  operationMaxAttempts: number;
  /** How long an operation may go on waiting ("not done yet") before it ends failed. */
  operationMaxWaitMs: number;
  /** Per credential (or client address, unauthenticated) and minute; 0: no limit. */
  rateLimits: { readsPerMinute: number; writesPerMinute: number; loopback: boolean };
  /** A full backup of every running service this often, in ms. */
  backupScheduleMs: number;
  /** How far back point-in-time forks reach (backups and WAL are kept that long), in ms. */
  pitrWindowMs: number;
  /** The administrator's address: the issuer of credentials made by `basin` (GET /v1/auth/info). */
  adminEmail: string;
  /** Whether the web console is served at `/` (api/console.ts). */
  console: boolean;
  /** Where GET /metrics (Prometheus) listens, apart from the API (metrics/listener.ts); null: nowhere. */
  metricsListen: { host: string; port: number } | null;
  /** The listener for this installation's hosts (mutual TLS), or none: one machine. */
  hostListen: { host: string; port: number } | null;
  /** A host silent this long (ms) is lost: its services become UNSTABLE. */
  hostLostAfterMs: number;
  /**
   * A lost host's non-HA services are restored on another host from the
   * repository host by themselves; off: on the user's start of each.
   */
  restoreLostServices: boolean;
  /** How answers name the time-series service type: the spec's TIMESERIESDB or the vendor's TIMESCALEDB. */
  serviceTypeName: ServiceTypeName;
}

/** How long the API waits for a client, and how many it serves at once (app.ts). */
export interface HttpLimits {
  /** A request's headers must have arrived within this (ms) of its first byte, or of the connection. */
  headersTimeoutMs: number;
  /** A whole request (headers and body) must have arrived within this (ms). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (ms). */
  keepAliveTimeoutMs: number;
  /** Connections open at once; more are closed as they come. */
  maxConnections: number;
}

interface Option {
  env: string;
  flag: string;
  help: string;
  default?: string;
  /** A flag that takes no value. */
  boolean?: boolean;
}

export const OPTIONS = {
  host: { env: 'BASIN_HOST', flag: '--host', default: '127.0.0.1', help: 'address to listen on' },
  port: { env: 'BASIN_PORT', flag: '--port', default: '8080', help: 'port to listen on' },
  dataDir: {
    env: 'BASIN_DATA_DIR',
    flag: '--data-dir',
    default: '.basin',
    help: 'where the store, clusters and logs live',
  },
  storeUrl: {
    env: 'BASIN_STORE_URL',
    flag: '--store-url',
    help: 'keep the store in PostgreSQL (postgres://user:password@host:port/database) rather than SQLite in the data directory',
  },
  driver: {
    env: 'BASIN_DRIVER',
    flag: '--driver',
    default: 'local',
    help: 'local (real PostgreSQL on this machine), hosts (real PostgreSQL on the hosts that joined: --host-listen) or sim (no processes)',
  },
  tlsCert: { env: 'BASIN_TLS_CERT', flag: '--tls-cert', help: 'PEM certificate for HTTPS' },
  tlsKey: { env: 'BASIN_TLS_KEY', flag: '--tls-key', help: 'PEM private key for HTTPS' },
  tlsSelfSigned: {
    env: 'BASIN_TLS_SELF_SIGNED',
    flag: '--tls-self-signed',
    boolean: true,
    help: 'serve HTTPS with a generated self-signed certificate (development)',
  },
  regions: {
    env: 'BASIN_REGIONS',
    flag: '--regions',
    default: 'us-east-1,us-west-2,eu-west-1,eu-central-1,ap-southeast-1',
    help: 'comma-separated region codes',
  },
  defaultRegion: {
    env: 'BASIN_DEFAULT_REGION',
    flag: '--default-region',
    default: 'us-east-1',
    help: 'region of services created without region_code',
  },
  sizes: {
    env: 'BASIN_SIZES',
    flag: '--sizes',
    default: 'shared,500m/2GB,1000m/4GB,2000m/8GB,4000m/16GB,8000m/32GB,16000m/64GB,32000m/128GB',
    help: 'size catalogue: comma-separated <cpu>m/<mem>GB pairs and optionally "shared"',
  },
  publicHost: {
    env: 'BASIN_PUBLIC_HOST',
    flag: '--public-host',
    default: 'localhost',
    help: 'host name reported in service endpoints',
  },
  portRange: {
    env: 'BASIN_PORT_RANGE',
    flag: '--port-range',
    // 4,000 ports: 2,000 services with a pooler each (docs/decisions.md,
    // Density); below the harness's test blocks (20000-31999) and, on a
    // repository host, its servers' port + 10,000.
    default: '16000-19999',
    help: 'ports for databases and poolers, <min>-<max>',
  },
  simDelayMs: {
    env: 'BASIN_SIM_DELAY_MS',
    flag: '--sim-delay-ms',
    default: '3000',
    help: 'how long each sim state change takes',
  },
  bootstrapApiKey: {
    env: 'BASIN_BOOTSTRAP_API_KEY',
    flag: '--bootstrap-api-key',
    help: 'bearer key of the first credential of an empty data directory',
  },
  logLevel: { env: 'BASIN_LOG_LEVEL', flag: '--log-level', default: 'info', help: 'log level' },
  bodyLimit: {
    env: 'BASIN_BODY_LIMIT',
    flag: '--body-limit',
    default: '65536',
    help: 'largest accepted request body, in bytes',
  },
  headersTimeoutMs: {
    env: 'BASIN_HEADERS_TIMEOUT_MS',
    flag: '--headers-timeout-ms',
    default: '10000',
    help: "how long a client may take to send a request's headers (ms); then 408 and the connection is closed",
  },
  requestTimeoutMs: {
    env: 'BASIN_REQUEST_TIMEOUT_MS',
    flag: '--request-timeout-ms',
    default: '30000',
    help: 'how long a client may take to send a whole request, body included (ms); then 408',
  },
  keepAliveTimeoutMs: {
    env: 'BASIN_KEEP_ALIVE_TIMEOUT_MS',
    flag: '--keep-alive-timeout-ms',
    default: '72000',
    help: 'how long an idle keep-alive connection stays open (ms)',
  },
  maxConnections: {
    env: 'BASIN_MAX_CONNECTIONS',
    flag: '--max-connections',
    default: '1024',
    help: 'connections the API keeps open at once; further ones are closed as they arrive',
  },
  reconcileIntervalMs: {
    env: 'BASIN_RECONCILE_INTERVAL_MS',
    flag: '--reconcile-interval-ms',
    default: '5000',
    help: 'how often the engine compares stored state with the driver',
  },
  seriesIntervalMs: {
    env: 'BASIN_SERIES_INTERVAL_MS',
    flag: '--series-interval-ms',
    default: '10000',
    help: 'how often every running node is sampled for the metrics series API (1000 to 60000)',
  },
  restartBackoffMs: {
    env: 'BASIN_RESTART_BACKOFF_MS',
    flag: '--restart-backoff-ms',
    default: '1000',
    help: 'a database node that died is restarted at once; one that dies again waits this long (ms), twice as long each further time',
  },
  restartBackoffMaxMs: {
    env: 'BASIN_RESTART_BACKOFF_MAX_MS',
    flag: '--restart-backoff-max-ms',
    default: '300000',
    help: 'the longest wait before restarting a database node that keeps dying (ms)',
  },
  restartStableMs: {
    env: 'BASIN_RESTART_STABLE_MS',
    flag: '--restart-stable-ms',
    default: '600000',
    help: 'a database node that ran this long (ms) before it died is restarted at once again',
  },
  serviceUidRange: {
    env: 'BASIN_SERVICE_UID_RANGE',
    flag: '--service-uid-range',
    default: '2000000-2999999',
    help: "uids of the services' OS users, <min>-<max>; a uid is never given twice",
  },
  servicePrivateTmp: {
    env: 'BASIN_SERVICE_PRIVATE_TMP',
    flag: '--service-private-tmp',
    default: 'auto',
    help: 'private /tmp, /var/tmp, /dev/shm, /run/lock per service: auto (where the host allows it), on (required) or off',
  },
  serviceTmpSizeMb: {
    env: 'BASIN_SERVICE_TMP_SIZE_MB',
    flag: '--service-tmp-size-mb',
    default: '1024',
    help: 'size of each private /tmp-like file system of a service, in MiB',
  },
  storageAllowance: {
    env: 'BASIN_STORAGE_ALLOWANCE',
    flag: '--storage-allowance',
    default: '25x',
    help: "disk each service's data may take: <n>x (n GB per GB of its size's memory) or a size for every service (500MB, 50GB, 2TB)",
  },
  storageAllowanceShared: {
    env: 'BASIN_STORAGE_ALLOWANCE_SHARED',
    flag: '--storage-allowance-shared',
    default: '10GB',
    help: 'the allowance of a shared service when the allowance is <n>x',
  },
  diskReserve: {
    env: 'BASIN_DISK_RESERVE',
    flag: '--disk-reserve',
    default: '5%',
    help: "free space kept on the file system of the services' data (<data dir>/local): a percentage of it, or a size (20GB)",
  },
  sharedMemoryMb: {
    env: 'BASIN_SHARED_MEMORY_MB',
    flag: '--shared-memory-mb',
    help: "memory all `shared` services' nodes share together, in MiB (default a quarter of the host's)",
  },
  serviceNetwork: {
    env: 'BASIN_SERVICE_NETWORK',
    flag: '--service-network',
    default: DEFAULT_SERVICE_NETWORK,
    help: "IPv4 block for the services' network namespaces (two addresses each), or off: every service in the host's network",
  },
  serviceHostnames: {
    env: 'BASIN_SERVICE_HOSTNAMES',
    flag: '--service-hostnames',
    default: 'off',
    help: "on: endpoints report <service id>.<public host>, which only that service's certificate names (needs wildcard DNS for *.<public host>)",
  },
  repositoryServers: {
    env: 'BASIN_REPOSITORY_SERVERS',
    flag: '--repository-servers',
    default: 'on',
    help: "on: each service's backups and WAL go to a repository of an OS user of its own, through a pgBackRest TLS server (as root with --service-network; services with a local repository move into one); off: new services' go into their own directories",
  },
  idleSuspendAfter: {
    env: 'BASIN_IDLE_SUSPEND_AFTER',
    flag: '--idle-suspend-after',
    default: 'off',
    help: 'a service with no client connection for this long (90s, 15m, 6h) has its PostgreSQL stopped and is woken by the next connection (single-node services without a pooler or read replica set, as root with --service-network); off: never',
  },
  idleEnvironments: {
    env: 'BASIN_IDLE_ENVIRONMENTS',
    flag: '--idle-environments',
    default: 'DEV,PROD',
    help: 'the environments (metadata.environment) whose services --idle-suspend-after applies to, comma-separated, e.g. DEV',
  },
  engineSlots: {
    env: 'BASIN_ENGINE_SLOTS',
    flag: '--engine-slots',
    default: '4',
    help: 'operations the engine runs at once',
  },
  engineProjectSlots: {
    env: 'BASIN_ENGINE_PROJECT_SLOTS',
    flag: '--engine-project-slots',
    help: 'the most engine slots one project may hold (default half of them, at least 1)',
  },
  drainTimeoutMs: {
    env: 'BASIN_DRAIN_TIMEOUT_MS',
    flag: '--drain-timeout-ms',
    default: '10000',
    help: 'how long shutdown waits for running operations (the rest resume at the next start)',
  },
  operationTimeoutMs: {
    env: 'BASIN_OPERATION_TIMEOUT_MS',
    flag: '--operation-timeout-ms',
    default: '120000',
    help: 'how long one attempt of an operation may run before it is given up and retried',
  },
  operationMaxAttempts: {
    env: 'BASIN_OPERATION_MAX_ATTEMPTS',
    flag: '--operation-max-attempts',
    default: '20',
    help: 'failed attempts after which an operation ends failed and its resource is marked failed (deletes go on)',
  },
  operationMaxWaitMs: {
    env: 'BASIN_OPERATION_MAX_WAIT_MS',
    flag: '--operation-max-wait-ms',
    default: '86400000',
    help: 'how long an operation may wait for a step (a server becoming ready, a backup) before it ends failed',
  },
  rateLimitReads: {
    env: 'BASIN_RATE_LIMIT_READS',
    flag: '--rate-limit-reads',
    default: '60000',
    help: 'GET requests a credential may make per minute (0: no limit)',
  },
  rateLimitWrites: {
    env: 'BASIN_RATE_LIMIT_WRITES',
    flag: '--rate-limit-writes',
    default: '1200',
    help: 'other requests (POST, PUT, PATCH, DELETE) a credential may make per minute (0: no limit)',
  },
  rateLimitLoopback: {
    env: 'BASIN_RATE_LIMIT_LOOPBACK',
    flag: '--rate-limit-loopback',
    default: 'on',
    help: 'on: limit clients on 127.0.0.1/::1 too; off: not (development only)',
  },
  backupSchedule: {
    env: 'BASIN_BACKUP_SCHEDULE',
    flag: '--backup-schedule',
    default: '1d',
    help: 'a full backup of every running service this often: <n>s, <n>m, <n>h or <n>d',
  },
  pitrWindow: {
    env: 'BASIN_PITR_WINDOW',
    flag: '--pitr-window',
    default: '3d',
    help: 'how far back point-in-time forks reach (backups and WAL are kept for it): <n>s, <n>m, <n>h or <n>d',
  },
  adminEmail: {
    env: 'BASIN_ADMIN_EMAIL',
    flag: '--admin-email',
    default: 'admin@basin.localhost',
    help: 'email address of the administrator, who issues the credentials `basin` makes (shown by GET /v1/auth/info)',
  },
  console: {
    env: 'BASIN_CONSOLE',
    flag: '--console',
    default: 'on',
    help: 'on: serve the web console at / on the API port; off: not (the API alone)',
  },
  metricsListen: {
    env: 'BASIN_METRICS_LISTEN',
    flag: '--metrics-listen',
    default: 'off',
    help: "host:port of a separate listener serving GET /metrics (Prometheus; every project's series: for the operator, keep it on loopback or a private network); off: none",
  },
  hostListen: {
    env: 'BASIN_HOST_LISTEN',
    flag: '--host-listen',
    default: 'off',
    help: "host:port where hosts of several machines join and report (`basin host run`; mutual TLS with the installation's CA); off: Basin runs on this machine alone",
  },
  hostLostAfter: {
    env: 'BASIN_HOST_LOST_AFTER',
    flag: '--host-lost-after',
    default: '15s',
    help: 'a host that has not reported for this long is LOST, and its services UNSTABLE: <n>s, <n>m, <n>h or <n>d',
  },
  restoreLostServices: {
    env: 'BASIN_RESTORE_LOST_SERVICES',
    flag: '--restore-lost-services',
    default: 'off',
    help: "on: a lost host's services without HA replicas are restored on another host from the repository host by themselves, with what was archived before the loss; off: each on its owner's start",
  },
  serviceTypeName: {
    env: 'BASIN_SERVICE_TYPE_NAME',
    flag: '--service-type-name',
    default: DEFAULT_SERVICE_TYPE_NAME,
    help: "how answers name the time-series service type: TIMESERIESDB (the spec's) or TIMESCALEDB (the vendor's newer clients'); requests may use either",
  },
} satisfies Record<string, Option>;

type Key = keyof typeof OPTIONS;

export class ConfigError extends Error {}

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Config {
  const raw = readRaw(argv, env);
  const get = (k: Key): string | undefined => raw.get(k) ?? (OPTIONS[k] as Option).default;
  const need = (k: Key) => get(k) as string;

  const driver = need('driver');
  if (driver !== 'sim' && driver !== 'local' && driver !== 'hosts') {
    throw new ConfigError(`${OPTIONS.driver.env} must be local, hosts or sim; got ${driver}.`);
  }
  const hostListen = parsed('hostListen', () => parseListen(need('hostListen')));
  if (driver === 'hosts' && hostListen === null) {
    throw new ConfigError(
      `The hosts driver runs databases on hosts that join at ${OPTIONS.hostListen.flag}: give it (${OPTIONS.hostListen.env}).`,
    );
  }
  const regions = need('regions')
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const defaultRegion = need('defaultRegion');
  if (!regions.includes(defaultRegion)) {
    throw new ConfigError(
      `The default region ${defaultRegion} is not in the region list ${regions.join(',')}.`,
    );
  }
  const cert = get('tlsCert');
  const key = get('tlsKey');
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError('Give both --tls-cert and --tls-key, or neither.');
  }
  const selfSigned = isTrue(get('tlsSelfSigned'));
  const range = /^(\d+)-(\d+)$/.exec(need('portRange'));
  const portRange = range ? { min: Number(range[1]), max: Number(range[2]) } : undefined;
  if (
    !portRange ||
    portRange.min < 1024 ||
    portRange.max > 65535 ||
    portRange.min > portRange.max
  ) {
    throw new ConfigError(
      `${OPTIONS.portRange.env} must look like 16000-16999, within 1024-65535.`,
    );
  }
  const uids = /^(\d+)-(\d+)$/.exec(need('serviceUidRange'));
  const serviceUidRange = uids ? { min: Number(uids[1]), max: Number(uids[2]) } : undefined;
  // Above every login user (Debian: 1000-60000, nobody 65534), below 2^31
  // (tools that hold a uid in a signed int).
  if (
    !serviceUidRange ||
    serviceUidRange.min < 65536 ||
    serviceUidRange.max > 2147483646 ||
    serviceUidRange.min > serviceUidRange.max
  ) {
    throw new ConfigError(
      `${OPTIONS.serviceUidRange.env} must look like 2000000-2999999, within 65536-2147483646.`,
    );
  }
  const servicePrivateTmp = need('servicePrivateTmp');
  if (servicePrivateTmp !== 'auto' && servicePrivateTmp !== 'on' && servicePrivateTmp !== 'off') {
    throw new ConfigError(
      `${OPTIONS.servicePrivateTmp.env} must be auto, on or off; got ${servicePrivateTmp}.`,
    );
  }
  const serviceNetwork = need('serviceNetwork').trim();
  if (serviceNetwork !== 'off') {
    try {
      parseBlock(serviceNetwork);
    } catch (err) {
      throw new ConfigError(`${OPTIONS.serviceNetwork.env}: ${(err as Error).message}, or off.`);
    }
  }
  const serviceHostnames = onOff('serviceHostnames', need('serviceHostnames'));
  const publicHost = need('publicHost');
  if (serviceHostnames && isIP(publicHost) !== 0) {
    throw new ConfigError(
      `${OPTIONS.serviceHostnames.env} needs a DNS name as the public host (${OPTIONS.publicHost.env}), not the address ${publicHost}.`,
    );
  }
  const engineSlots = integer('engineSlots', need('engineSlots'), 1, 256);
  const projectSlots = get('engineProjectSlots');
  const engineProjectSlots =
    projectSlots === undefined
      ? Math.max(1, Math.floor(engineSlots / 2))
      : integer('engineProjectSlots', projectSlots, 1, engineSlots);
  const sharedMemory = get('sharedMemoryMb');
  const adminEmail = need('adminEmail');
  if (!isEmail(adminEmail)) {
    throw new ConfigError(
      `${OPTIONS.adminEmail.env} must be an email address like admin@example.com (a domain with a dot); got ${adminEmail}.`,
    );
  }
  const sharedAllowance = parsed('storageAllowanceShared', () =>
    parseBytes(need('storageAllowanceShared')),
  );
  const serviceTypeName = need('serviceTypeName');
  if (!(SERVICE_TYPE_NAMES as readonly string[]).includes(serviceTypeName)) {
    throw new ConfigError(
      `${OPTIONS.serviceTypeName.env} must be TIMESERIESDB or TIMESCALEDB; got ${serviceTypeName}.`,
    );
  }
  const bootstrapApiKey = get('bootstrapApiKey') ?? null;
  if (bootstrapApiKey !== null && bootstrapApiKey.length < 16) {
    throw new ConfigError(`${OPTIONS.bootstrapApiKey.env} must be at least 16 characters long.`);
  }
  return {
    host: need('host'),
    port: integer('port', need('port'), 0, 65535),
    ...storeConfigOf(raw),
    driver,
    tls: cert && key ? { cert, key } : selfSigned ? 'self-signed' : null,
    regions,
    defaultRegion,
    sizes: parseSizes(need('sizes')),
    publicHost,
    portRange,
    simDelayMs: integer('simDelayMs', need('simDelayMs'), 0, 600_000),
    bootstrapApiKey,
    logLevel: need('logLevel'),
    bodyLimitBytes: integer('bodyLimit', need('bodyLimit'), 1024, 100 * 1024 * 1024),
    http: httpLimits(need),
    reconcileIntervalMs: integer(
      'reconcileIntervalMs',
      need('reconcileIntervalMs'),
      100,
      3_600_000,
    ),
    seriesIntervalMs: integer('seriesIntervalMs', need('seriesIntervalMs'), 1000, 60_000),
    restarts: restartPolicy(need),
    serviceUidRange,
    servicePrivateTmp,
    serviceTmpSizeMb: integer('serviceTmpSizeMb', need('serviceTmpSizeMb'), 1, 1024 * 1024),
    storageAllowance: parsed('storageAllowance', () =>
      parseAllowance(need('storageAllowance'), sharedAllowance),
    ),
    diskReserve: parsed('diskReserve', () => parseReserve(need('diskReserve'))),
    sharedMemoryMb:
      sharedMemory === undefined
        ? null
        : integer('sharedMemoryMb', sharedMemory, 256, 1024 * 1024 * 1024),
    serviceNetwork,
    serviceHostnames,
    repositoryServers: onOff('repositoryServers', need('repositoryServers')),
    idleSuspend: idleSuspend(need),
    engineSlots,
    engineProjectSlots,
    drainTimeoutMs: integer('drainTimeoutMs', need('drainTimeoutMs'), 0, 600_000),
    operationTimeoutMs: integer('operationTimeoutMs', need('operationTimeoutMs'), 1_000, 3_600_000),
    operationMaxAttempts: integer('operationMaxAttempts', need('operationMaxAttempts'), 1, 1_000),
    operationMaxWaitMs: integer(
      'operationMaxWaitMs',
      need('operationMaxWaitMs'),
      1_000,
      30 * 86_400_000,
    ),
    rateLimits: {
      readsPerMinute: integer('rateLimitReads', need('rateLimitReads'), 0, 1_000_000_000),
      writesPerMinute: integer('rateLimitWrites', need('rateLimitWrites'), 0, 1_000_000_000),
      loopback: onOff('rateLimitLoopback', need('rateLimitLoopback')),
    },
    backupScheduleMs: duration('backupSchedule', need('backupSchedule')),
    pitrWindowMs: duration('pitrWindow', need('pitrWindow')),
    adminEmail,
    console: onOff('console', need('console')),
    metricsListen: parsed('metricsListen', () => parseListen(need('metricsListen'))),
    hostListen,
    hostLostAfterMs: duration('hostLostAfter', need('hostLostAfter')),
    restoreLostServices: onOff('restoreLostServices', need('restoreLostServices')),
    serviceTypeName: serviceTypeName as ServiceTypeName,
  };
}

function restartPolicy(need: (k: Key) => string): Config['restarts'] {
  const policy = {
    baseMs: integer('restartBackoffMs', need('restartBackoffMs'), 10, 3_600_000),
    capMs: integer('restartBackoffMaxMs', need('restartBackoffMaxMs'), 10, 86_400_000),
    stableMs: integer('restartStableMs', need('restartStableMs'), 1_000, 86_400_000),
  };
  if (policy.capMs < policy.baseMs) {
    throw new ConfigError(
      `${OPTIONS.restartBackoffMaxMs.env} (${policy.capMs}) must not be shorter than ${OPTIONS.restartBackoffMs.env} (${policy.baseMs}).`,
    );
  }
  return policy;
}

/** --idle-suspend-after and the environments it applies to; null when off. */
function idleSuspend(need: (k: Key) => string): Config['idleSuspend'] {
  const after = need('idleSuspendAfter').trim();
  const names = need('idleEnvironments')
    .split(',')
    .map((e) => e.trim().toUpperCase())
    .filter(Boolean);
  const unknown = names.filter((e) => !(ENVIRONMENTS as readonly string[]).includes(e));
  if (names.length === 0 || unknown.length > 0) {
    throw new ConfigError(
      `${OPTIONS.idleEnvironments.env} must list environments among ${ENVIRONMENTS.join(', ')} (comma-separated); got ${need('idleEnvironments')}.`,
    );
  }
  if (/^off$/i.test(after)) return null;
  return {
    afterMs: duration('idleSuspendAfter', after),
    environments: [...new Set(names)] as Environment[],
  };
}

function httpLimits(need: (k: Key) => string): HttpLimits {
  const ms = (k: Key) => integer(k, need(k), 100, 3_600_000);
  const limits = {
    headersTimeoutMs: ms('headersTimeoutMs'),
    requestTimeoutMs: ms('requestTimeoutMs'),
    keepAliveTimeoutMs: ms('keepAliveTimeoutMs'),
    maxConnections: integer('maxConnections', need('maxConnections'), 1, 1_000_000),
  };
  // Node refuses a server whose headers may take longer than the whole request.
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ConfigError(
      `${OPTIONS.headersTimeoutMs.env} (${limits.headersTimeoutMs}) must not be longer than ${OPTIONS.requestTimeoutMs.env} (${limits.requestTimeoutMs}).`,
    );
  }
  return limits;
}

/** What locates the store: all the `basin` administration command needs. */
export type StoreConfig = Pick<Config, 'dataDir' | 'storeUrl'>;

/**
 * The store's options alone, read as parseConfig reads them (flag, then
 * environment, then default), so the CLI and the server find the same data
 * directory. `argv` holds only store flags (`--data-dir <dir>`); the other
 * options are not validated, so a bad BASIN_PORT does not stop the CLI.
 */
export function parseStoreConfig(argv: readonly string[], env: NodeJS.ProcessEnv): StoreConfig {
  return storeConfigOf(readRaw(argv, env));
}

function storeConfigOf(raw: Map<Key, string>): StoreConfig {
  const storeUrl = raw.get('storeUrl')?.trim() || null;
  if (storeUrl !== null && !/^postgres(ql)?:\/\/./.test(storeUrl)) {
    throw new ConfigError(
      `${OPTIONS.storeUrl.env} must be a PostgreSQL URL like postgres://basin:secret@db.example.com:5432/basin.`,
    );
  }
  return { dataDir: resolve(raw.get('dataDir') ?? OPTIONS.dataDir.default), storeUrl };
}

/** `shared,500m/2GB,1000m/4GB` → size catalogue entries. */
export function parseSizes(text: string): Size[] {
  const sizes: Size[] = [];
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (part === 'shared') {
      sizes.push(DEFAULT_SIZES[0] as Size);
      continue;
    }
    // Whole milli-cores and gigabytes: clients read sizes as integers.
    const m = /^(\d+)m\/(\d+)GB$/i.exec(part);
    if (!m) {
      throw new ConfigError(
        `Bad size ${part}: write sizes like 1000m/4GB, in whole milli-cores and gigabytes.`,
      );
    }
    sizes.push({ shared: false, cpuMillis: Number(m[1]), memoryGbs: Number(m[2]) });
  }
  if (!sizes.some((s) => !s.shared))
    throw new ConfigError('The size catalogue needs at least one dedicated size.');
  return sizes;
}

function readRaw(argv: readonly string[], env: NodeJS.ProcessEnv): Map<Key, string> {
  const raw = new Map<Key, string>();
  const keys = Object.keys(OPTIONS) as Key[];
  for (const k of keys) {
    const v = env[OPTIONS[k].env];
    if (v !== undefined && v !== '') raw.set(k, v);
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [flag, inline] = arg.includes('=')
      ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
      : [arg, undefined];
    const key = keys.find((k) => OPTIONS[k].flag === flag);
    if (!key) throw new ConfigError(`Unknown option ${flag}; see --help.`);
    if ((OPTIONS[key] as Option).boolean) {
      raw.set(key, inline ?? 'true');
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new ConfigError(`${flag} needs a value.`);
    raw.set(key, value);
  }
  return raw;
}

function integer(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}; got ${text}.`);
  }
  return n;
}

/** What `parse` returns, or a ConfigError naming the option with what the parser said. */
function parsed<T>(name: Key, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw new ConfigError(`${OPTIONS[name].env} must be ${(err as Error).message}.`);
  }
}

/** `90s`, `15m`, `6h`, `3d` → ms; at least a second, at most ten years. */
function duration(name: Key, text: string): number {
  const m = /^(\d+)(s|m|h|d)$/.exec(text);
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const ms = m ? Number(m[1]) * unit[m[2] as keyof typeof unit] : NaN;
  if (!(ms >= 1_000 && ms <= 3650 * 86_400_000)) {
    throw new ConfigError(
      `${OPTIONS[name].env} must be a duration such as 90s, 15m, 6h or 3d (at most 3650d); got ${text}.`,
    );
  }
  return ms;
}

/** `off`, or `host:port` (`[::1]:9187` for an IPv6 address; port 0: any free one). */
export function parseListen(text: string): { host: string; port: number } | null {
  if (/^off$/i.test(text)) return null;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([\w.-]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || !(port <= 65535))
    throw new Error(`off or host:port (e.g. 127.0.0.1:9187); got ${text}`);
  return { host: (m[1] ?? m[2]) as string, port };
}

function onOff(name: Key, text: string): boolean {
  if (/^(on|true|1|yes)$/i.test(text)) return true;
  if (/^(off|false|0|no)$/i.test(text)) return false;
  throw new ConfigError(`${OPTIONS[name].env} must be on or off; got ${text}.`);
}

function isTrue(v: string | undefined): boolean {
  return v === '1' || v === 'true' || v === 'yes';
}

export function helpText(): string {
  const lines = Object.values(OPTIONS as Record<string, Option>).map(
    (o) =>
      `  ${(o.flag + (o.boolean ? '' : ' <value>')).padEnd(32)} ${o.env.padEnd(28)} ${o.help}${o.default ? ` (default ${o.default})` : ''}`,
  );
  return `Usage: basin-server [options]\n\nEach option can also be set by its environment variable.\n\n${lines.join('\n')}\n`;
}
