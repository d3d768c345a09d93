// One node of an HA service across hosts, as its host's local driver runs it
// (docs/decisions.md, "HA across hosts"): the control plane places the
// nodes and calls each node's host with the node's index and every node's
// host address and ports (applyPatroniNode); this host does the rest, each
// step re-checked from files and processes at every call, so a kill of the
// agent anywhere in between is harmless:
//   1. the service's OS user and its network namespace; the node's
//      PostgreSQL and REST API ports forwarded from this host's address
//      into the namespace (the service networks' DNAT, as a node's own port
//      on one host);
//   2. the node's certificate (PostgreSQL's and the REST API's, client use
//      too: Patroni shows it to the other members' APIs), naming every
//      address the service is reached by, from this host's CA;
//   3. the service's etcd identity and the passwords every node shares,
//      asked of the control plane once (the first apply; later ones read
//      them back from the node's own configuration);
//   4. the template cloned into the node's seed, Patroni's YAML
//      (patroni-config.ts) with the members at their hosts' addresses;
//   5. Patroni started as the service's user, confined as a postmaster, in
//      the node's cgroups (patroni.ts), or adopted; reloaded when its
//      configuration changed.
//
// Across hosts the nodes reach each other through their hosts: a
// namespace's connections out leave with its host's address (masquerade),
// so each node admits replication from the other nodes' host addresses, and
// from its own namespace address (Patroni's own replication connection
// before a rewind).

import { X509Certificate } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DONE, type Progress, wait } from '../../../domain/progress.js';
import type { ClusterState } from '../../../domain/patroni-cluster.js';
import { signRequest, makeKeyAndRequest } from '../../../lib/x509.js';
import {
  DriverError,
  type ForkParent,
  patroniNodeId,
  type PatroniNodeSpec,
  type PatroniTiming,
  type PatroniNodeView,
  type ServiceSpec,
} from '../../driver.js';
import type { DriverContext } from '../context.js';
import { nodeBounds } from '../host/cgroups/node-bounds.js';
import { nodeUnit } from '../host/cgroups/node-cgroups.js';
import { signalAll } from '../host/processes.js';
import { wantedExtensions } from '../config/conf.js';
import {
  ADMIN_GRANTS,
  type AdminTarget,
  createExtensions,
  grantAdminRoles,
  setTsdbadminPassword,
} from '../node/admin.js';
import { hash } from '../node/node-state.js';
import { exists, mkdirIn, ensureOwnedDir, writeOwned, writeRootFile } from '../node/node-files.js';
import { apiGet, apiRequest, type ClientTls, clusterState, walSenders } from './client.js';
import { ensurePatroniDirs, patroniFiles, prepareSeed, type PatroniFiles } from './files.js';
import {
  CLUSTER_WIDE,
  FAILSAFE_MODE,
  type PatroniInputs,
  patroniConfig,
  patroniParameters,
  renderPatroniConfig,
  RESTAPI_USER,
} from './patroni-config.js';
import { patroniStatus, startPatroni } from './patroni.js';
import { ensureNodeArchive, ensureNodeStanza, nodePorts, openNodeSource } from './node-archive.js';
import type { SourceInfo } from '../backups/backups.js';
import { archiveUpToNow } from '../backups/fork-restore.js';
import { readSystemId } from '../node/system-id.js';
import { readControlState } from '../node/control-state.js';
import { SafeDir, withSafeDir } from '../host/files/safe-dir.js';
import type { OsUser } from '../host/os-user.js';
import { convergeNodePooler } from '../endpoints/patroni-pooler.js';

/** What the control plane gives a node's host for its Patroni (agent/patroni-node.ts fetches it). */
export interface PatroniSecrets {
  etcd: {
    cert: string;
    key: string;
    /** The etcd members CA: what Patroni verifies the members with. */
    ca: string;
    /** The members' client URLs: Patroni's `etcd3.hosts`. */
    endpoints: string[];
    username: string;
    password: string;
  };
  replicationPassword: string;
  restApiPassword: string;
}

export type FetchPatroniSecrets = (serviceId: string) => Promise<PatroniSecrets>;

type Ctx = Pick<
  DriverContext,
  | 'layout'
  | 'users'
  | 'template'
  | 'networks'
  | 'cgroups'
  | 'privateTmp'
  | 'pg'
  | 'publicCidrs'
  | 'remoteIdentity'
> & { adminOsUsers: DriverContext['adminOsUsers'] };

/** What the node's apply needs besides, for its pooler (endpoints/patroni-pooler.ts). */
type PoolerCtx = Pick<DriverContext, 'listenAddresses' | 'log' | 'oom' | 'publicHost' | 'spawned'>;

/** The node's files, under its own resource's instance directory (patroniNodeId). */
export const nodeFiles = (ctx: Pick<Ctx, 'layout'>, local: string): PatroniFiles =>
  patroniFiles(join(ctx.layout.instanceDir(local), 'patroni'));

/** One step of bringing this host's node of `spec` to what `node` says; DONE once its Patroni runs. */
export async function applyPatroniNode(
  ctx: Ctx & PoolerCtx,
  spec: ServiceSpec,
  node: PatroniNodeSpec,
  secretsOf: FetchPatroniSecrets | undefined,
): Promise<Progress> {
  const self = node.members.find((m) => m.index === node.index);
  if (!self) throw new DriverError(`Node ${node.index} is not among the members given.`, false);
  if (!ctx.networks.enabled) {
    throw new DriverError(
      'A node of an HA service across hosts needs service networks (--service-network): its ports are forwarded into its namespace.',
      false,
    );
  }
  const local = patroniNodeId(spec.serviceId, node.index);
  const user = await ctx.users.ensure(local);
  if ((await ctx.template.poll()) !== 'ready') {
    return wait(250, 'preparing the PostgreSQL template (once per host)');
  }
  const net = await ctx.networks.ensure(local);
  await ctx.networks.forward(local, { ports: nodePorts(spec, self) });

  const f = nodeFiles(ctx, local);
  await mkdirIn(ctx.layout.instanceDir(local), 0o711);
  await ensurePatroniDirs(f, user);
  const socketDir = join(f.data, 'sock');
  await ensureOwnedDir(socketDir, user);
  await prepareSeed(f, ctx.layout.templatePgdata, user);

  const tls = join(f.dir, 'tls');
  await mkdirIn(tls, 0o711);
  const ca = join(tls, 'ca.crt');
  await writeRootFile(ca, await readFile(ctx.layout.caCert, 'utf8'), user);
  const cert = join(tls, 'node.crt');
  const key = join(tls, 'node.key');
  // Every address the service is reached by, and the namespace's own:
  // Patroni's replication connection to its own server (before a rewind)
  // goes to the address it listens on, with verify-full.
  const names = [...new Set([...node.names, net.address])];
  if (!(await certCovers(cert, ctx.layout.caCert, names))) {
    const pair = await issueLeaf(ctx, node.names[0] ?? self.address, names, undefined);
    // The key first: a certificate is never there without its key.
    await writeOwned(key, pair.key, user);
    await writeRootFile(cert, pair.cert, user);
  }

  const secrets = (await knownSecrets(f, tls)) ?? (await fetchSecrets(secretsOf, spec.serviceId));
  const etcdCert = join(tls, 'etcd.crt');
  const etcdKey = join(tls, 'etcd.key');
  const etcdCa = join(tls, 'etcd-ca.crt');
  if (secrets.etcd.key !== '') {
    await writeOwned(etcdKey, secrets.etcd.key, user);
    await writeRootFile(etcdCert, secrets.etcd.cert, user);
    await writeRootFile(etcdCa, secrets.etcd.ca, user);
  }

  // The service's stanza on the repository host, when it has one (node-archive.ts).
  const archive = await ensureNodeArchive(
    ctx,
    spec,
    local,
    { pgdata: f.pgdata, socketDir, port: self.port },
    user,
  );

  const inputs: PatroniInputs = {
    spec,
    self,
    listen: net.address,
    members: node.members,
    paths: {
      socketDir,
      pgbackrest: archive?.pgbackrest ?? '/bin/false',
      backupConf: archive?.backupConf ?? '/nonexistent',
      forkSourceConf: '/nonexistent',
      forkSourcePg: '/nonexistent',
      pgdata: f.pgdata,
      pgBin: ctx.pg.bin,
      seed: f.seed,
      pgpass: f.pgpass,
      serverTls: { cert, key, ca },
    },
    conf: { publicCidrs: ctx.publicCidrs },
    adminOsUsers: ctx.adminOsUsers(user),
    etcd: {
      endpoints: secrets.etcd.endpoints.map((u) => u.replace(/^https?:\/\//, '')),
      tls: { cert: etcdCert, key: etcdKey, ca: etcdCa },
      auth: { username: secrets.etcd.username, password: secrets.etcd.password },
    },
    restApi: {
      tls: { cert, key, ca },
      password: secrets.restApiPassword,
      allowlist: node.allowlist,
    },
    // HAProxy on each host reaches the node from that host's address (or,
    // on this one, from the namespace's gateway).
    proxies: [...new Set([...node.names, net.hostAddress])],
    replicationSecret: secrets.replicationPassword,
    ...(node.readers && node.readers.length > 0 ? { readers: node.readers } : {}),
    archiving: archive !== undefined,
    ...(node.timing ? { timing: node.timing } : {}),
  };
  const changed = await writeRootFile(f.config, renderPatroniConfig(inputs), user);

  const params = patroniParameters(inputs);
  const cgroups = await ctx.cgroups.ensure(
    nodeUnit({ id: local, node: node.index }),
    nodeBounds(spec.size, {
      maxConnections: Number(params.max_connections),
      maxWorkerProcesses: Number(params.max_worker_processes),
    }),
    spec.size.shared,
  );
  const st = await patroniStatus(f, user);
  if (st.up) {
    // Patroni reads its configuration again on SIGHUP, and writes the
    // node's pg_hba from it (a VPC attached or detached): the apply is
    // done once it has, so that READY means the new rules hold.
    if (changed) signalAll([st.pid], 'SIGHUP');
    const hba = patroniConfig(inputs) as { postgresql: { pg_hba: string[] } };
    if (!(await hbaWritten(f, user, hba.postgresql.pg_hba))) {
      return wait(300, "Patroni is writing the node's new pg_hba (its reload)");
    }
    const api = `https://${hostPort(self.address, self.apiPort)}`;
    const sync = await keepDynamic(ctx, api, spec, node.members.length, secrets, params, {
      timing: node.timing,
    });
    if (sync) return sync;
    const running = await nodeRunning(ctx, api);
    if (running !== 'primary') {
      if (!running.done) return running;
    } else {
      // The leader: the service's own SQL (tsdbadmin's password, its grants,
      // the type's extensions), which the standbys replay.
      await applySql(spec, f, {
        socketDir,
        port: self.port,
        pgdata: f.pgdata,
      });
      if (archive) await ensureNodeStanza(ctx, spec, local, archive, user);
      const named = await synchronousNamed(ctx, api, spec, node.members.length);
      if (!named.done) return named;
    }
    // The service's pooler on this host, once its node runs: its server is
    // this host's endpoint, which leads to the leader wherever it is.
    return convergeNodePooler(ctx, spec, local, { certFile: cert, keyFile: key }, user);
  }
  await startPatroni({ files: f, user, privateTmp: ctx.privateTmp, prelude: { cgroups } });
  return wait(500, 'starting Patroni');
}

/**
 * The cluster's dynamic configuration as the spec asks now (`bootstrap.dcs`
 * holds only what it was at creation; later changes are Patroni's dynamic
 * configuration, PATCH /config, which the agent may ask of its own node:
 * its host's address is a member's, on the REST API's allowlist): the
 * synchronous replication (a setHA), failsafe mode (clusters made before
 * it was on: patroni-config.ts), Patroni's timing across hosts (the leader
 * key's ttl, the loop, the retries and the primary's stop timeout:
 * clusters made before ha-nodes.ts's PATRONI_TIMING keep theirs
 * otherwise), and the settings every member must
 * share (max_connections, max_worker_processes…: a resize), which Patroni
 * takes from the DCS over a node's own YAML. Undefined once it is; a wait
 * while the cluster has no configuration yet (being formed) or does not
 * answer.
 */
async function keepDynamic(
  ctx: Pick<Ctx, 'layout'>,
  api: string,
  spec: ServiceSpec,
  nodes: number,
  secrets: PatroniSecrets,
  params: Record<string, string>,
  o: { timing: PatroniTiming | undefined },
): Promise<Progress | undefined> {
  const sync = Math.max(0, Math.min(spec.ha.syncReplicaCount, nodes - 1));
  const t = o.timing;
  const wanted = {
    synchronous_mode: sync > 0,
    synchronous_mode_strict: sync > 0,
    synchronous_node_count: Math.max(1, sync),
    failsafe_mode: FAILSAFE_MODE,
    ...(t ? { ttl: t.ttl, loop_wait: t.loopWait, retry_timeout: t.retryTimeout } : {}),
    ...(t?.primaryStopTimeout ? { primary_stop_timeout: t.primaryStopTimeout } : {}),
  };
  const shared = Object.fromEntries(
    CLUSTER_WIDE.filter((k) => k in params).map((k) => [k, String(params[k])]),
  );
  try {
    const tls = await readerTls(ctx);
    const got = await apiGet(api, '/config', tls);
    if (got.status !== 200 || typeof got.body !== 'object' || got.body === null) {
      return wait(500, "waiting for the cluster's configuration in etcd");
    }
    const now = got.body as Record<string, unknown>;
    const nowParams = ((now.postgresql as { parameters?: Record<string, unknown> } | undefined)
      ?.parameters ?? {}) as Record<string, unknown>;
    const syncAsAsked = Object.entries(wanted).every(([k, v]) => now[k] === v);
    const sharedAsAsked = Object.entries(shared).every(([k, v]) => String(nowParams[k]) === v);
    if (syncAsAsked && sharedAsAsked) return undefined;
    const patched = await apiRequest(api, 'PATCH', '/config', tls, 5000, {
      body: { ...wanted, postgresql: { parameters: shared } },
      auth: { username: RESTAPI_USER, password: secrets.restApiPassword },
    });
    if (patched.status !== 200) {
      return wait(1000, `Patroni answered ${patched.status} to its dynamic configuration`);
    }
    return undefined;
  } catch (err) {
    return wait(500, `Patroni's REST API does not answer yet (${(err as Error).message})`);
  }
}

/**
 * Whether the node's pg_hba.conf, which Patroni writes into the data
 * directory from the YAML on each reload, holds `wanted`'s lines; read
 * without following the tenant's links (SafeDir), bounded.
 */
async function hbaWritten(f: PatroniFiles, user: OsUser, wanted: readonly string[]) {
  try {
    const text = await withSafeDir(f.pgdata, user.uid, (d) => d.readSmall('pg_hba.conf', 1 << 20));
    const lines = text
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    return lines.join('\n') === wanted.map((l) => l.trim()).join('\n');
  } catch {
    return false;
  }
}

/**
 * `primary` or DONE once the node's PostgreSQL runs as Patroni says (GET
 * /patroni: `running`, the leader or a replica); a wait while it is
 * bootstrapped, copied from the leader or started.
 */
async function nodeRunning(ctx: Pick<Ctx, 'layout'>, api: string): Promise<Progress | 'primary'> {
  try {
    const got = await apiGet(api, '/patroni', await readerTls(ctx));
    const body = (got.body ?? {}) as { state?: unknown; role?: unknown };
    if (body.state !== 'running') {
      const state = typeof body.state === 'string' ? body.state : 'not running yet';
      return wait(500, `PostgreSQL under Patroni is ${state}`);
    }
    return body.role === 'master' || body.role === 'primary' ? 'primary' : DONE;
  } catch (err) {
    return wait(500, `Patroni's REST API does not answer yet (${(err as Error).message})`);
  }
}

/**
 * What a service's primary must hold as its spec says, applied on the
 * leader as the superuser over the socket (admin.ts), as a primary on one
 * host gets it (converge/service-node.ts applySql); recorded by hash in
 * the node's directory (root's), so each is done once per leader and change.
 */
async function applySql(spec: ServiceSpec, f: PatroniFiles, target: AdminTarget): Promise<void> {
  const record = join(f.dir, 'sql.json');
  let done: { password?: string; extensions?: string[]; grants?: number } = {};
  try {
    done = JSON.parse(await readFile(record, 'utf8')) as typeof done;
  } catch {
    // None yet.
  }
  const password = hash(spec.passwordVerifier);
  const extensions = wantedExtensions(spec);
  try {
    if (done.password !== password) await setTsdbadminPassword(target, spec.passwordVerifier);
    const missing = extensions.filter((e) => !(done.extensions ?? []).includes(e));
    if (missing.length > 0) await createExtensions(target, missing);
    if (done.grants !== ADMIN_GRANTS.version) await grantAdminRoles(target);
  } catch (err) {
    throw new DriverError(`Could not configure the database: ${(err as Error).message}`, true);
  }
  const next = JSON.stringify({ password, extensions, grants: ADMIN_GRANTS.version });
  await writeFile(`${record}.tmp`, `${next}\n`, { mode: 0o600 });
  await rename(`${record}.tmp`, record);
}

/**
 * On the leader: DONE once Patroni has named as many synchronous standbys
 * as asked, or as many as stream (a lost standby is not waited for: the
 * service's status says it is degraded); a wait meanwhile, so that a
 * setHA's READY means what it asked for.
 */
async function synchronousNamed(
  ctx: Pick<Ctx, 'layout'>,
  api: string,
  spec: ServiceSpec,
  nodes: number,
): Promise<Progress> {
  const wanted = Math.max(0, Math.min(spec.ha.syncReplicaCount, nodes - 1));
  if (wanted === 0) return DONE;
  try {
    const cluster = await clusterState(api, await readerTls(ctx));
    const standbys = cluster.members.filter((m) => m.name !== cluster.leader);
    const streaming = standbys.filter((m) => ['running', 'streaming'].includes(m.state));
    const named = streaming.filter((m) => m.role === 'sync_standby').length;
    if (named >= Math.min(wanted, streaming.length)) return DONE;
    return wait(500, `waiting for Patroni to name ${wanted} synchronous standby(s)`);
  } catch (err) {
    return wait(500, `Patroni's REST API does not answer yet (${(err as Error).message})`);
  }
}

const hostPort = (address: string, port: number) =>
  address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;

/**
 * Whether this host's node of the service runs its Patroni, and the
 * cluster as its REST API says; when the cluster names this node (`name`)
 * the leader, with its WAL senders (GET /patroni), which alone tell which
 * standbys stream (docs/decisions.md, "HA across hosts", the status).
 */
export async function inspectPatroniNode(
  ctx: Pick<Ctx, 'layout' | 'users'>,
  local: string,
  name: string,
  apiUrl: string,
): Promise<PatroniNodeView> {
  const user = ctx.users.lookup(local);
  const f = nodeFiles(ctx, local);
  if (!user || !(await exists(f.config))) return { patroni: false, cluster: null };
  const up = (await patroniStatus(f, user)).up;
  let cluster: ClusterState | null = null;
  try {
    const tls = await readerTls(ctx);
    cluster = await clusterState(apiUrl, tls);
    if (cluster.leader === name) {
      const replication = await walSenders(apiUrl, tls).catch(() => undefined);
      if (replication) cluster = { ...cluster, replication };
    }
  } catch {
    // Not answering (starting, stopped): nothing read.
  }
  if (up) return { patroni: up, cluster };
  // Stopped: how its PostgreSQL stopped, for the order of a start (an
  // unreadable control file, a node never started: nothing said).
  const stopped = await withSafeDir(f.pgdata, user.uid, readControlState).catch(() => undefined);
  return { patroni: up, cluster, ...(stopped ? { stopped } : {}) };
}

/**
 * The certificate this host's agent shows a node's REST API to read it
 * (verify_client: required): a client certificate of this host's CA, made
 * once, root's alone. Not the host's identity key (which drives the
 * control plane's listener), and not any tenant's.
 */
export function readerTls(ctx: Pick<Ctx, 'layout'>): Promise<ClientTls> {
  // Read and checked once a minute, not at every look at a node (an
  // agent looks every few seconds): it is renewed two months before it
  // expires (certCovers).
  const cached = readers.get(ctx.layout.root);
  if (cached && Date.now() - cached.at < READER_TTL_MS) return cached.tls;
  const tls = loadReaderTls(ctx);
  readers.set(ctx.layout.root, { at: Date.now(), tls });
  // A failed read is not kept: the next look tries again.
  tls.catch(() => {
    if (readers.get(ctx.layout.root)?.tls === tls) readers.delete(ctx.layout.root);
  });
  return tls;
}

const readers = new Map<string, { at: number; tls: Promise<ClientTls> }>();
const READER_TTL_MS = 60_000;

async function loadReaderTls(ctx: Pick<Ctx, 'layout'>): Promise<ClientTls> {
  const dir = join(ctx.layout.root, 'patroni-reader');
  const certFile = join(dir, 'client.crt');
  const keyFile = join(dir, 'client.key');
  const caCert = await readFile(ctx.layout.caCert, 'utf8');
  if (!(await certCovers(certFile, ctx.layout.caCert, []))) {
    await mkdirIn(dir, 0o700);
    const pair = await issueLeaf(ctx, 'basin-patroni-reader', [], 'client');
    await writeFile(`${keyFile}.tmp`, pair.key, { mode: 0o600 });
    await rename(`${keyFile}.tmp`, keyFile);
    await writeFile(`${certFile}.tmp`, pair.cert, { mode: 0o600 });
    await rename(`${certFile}.tmp`, certFile);
  }
  return {
    ca: caCert,
    cert: await readFile(certFile, 'utf8'),
    key: await readFile(keyFile, 'utf8'),
  };
}

/** A key and a certificate from this host's CA, with the CA after it when it is not the root. */
export async function issueLeaf(
  ctx: Pick<Ctx, 'layout'>,
  cn: string,
  names: readonly string[],
  use: 'client' | undefined,
): Promise<{ cert: string; key: string }> {
  const pems = pemsOf(await readFile(ctx.layout.caCert, 'utf8'));
  const issuer = pems[0];
  if (!issuer) throw new DriverError(`${ctx.layout.caCert} holds no certificate.`, false);
  const ca = { cert: issuer, key: await readFile(ctx.layout.caKey, 'utf8') };
  const req = await makeKeyAndRequest(cn);
  const leaf = await signRequest(ca, req.csr, {
    cn,
    names,
    days: 825,
    ...(use ? { use } : {}),
  });
  const chain = pems.length > 1 ? `${issuer}\n` : '';
  return { cert: `${leaf.trim()}\n${chain}`, key: req.key };
}

/** Whether `certFile` was issued by the host's CA (ca.crt's first), names every one of `names`, and is not near expiry. */
export async function certCovers(certFile: string, caFile: string, names: readonly string[]) {
  try {
    const issuer = pemsOf(await readFile(caFile, 'utf8'))[0];
    const pem = pemsOf(await readFile(certFile, 'utf8'))[0];
    if (!issuer || !pem) return false;
    const ca = new X509Certificate(issuer);
    const cert = new X509Certificate(pem);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    if (Date.parse(cert.validTo) - Date.now() < 60 * 24 * 3600 * 1000) return false;
    const sans = (cert.subjectAltName ?? '').split(', ');
    return names.every((n) => sans.includes(`IP Address:${n}`) || sans.includes(`DNS:${n}`));
  } catch {
    return false;
  }
}

const pemsOf = (text: string) =>
  text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];

/**
 * The secrets a node's earlier apply wrote into its configuration (the
 * etcd key stays in its file): asked of the control plane only once.
 */
async function knownSecrets(f: PatroniFiles, tls: string): Promise<PatroniSecrets | undefined> {
  try {
    if (!(await exists(join(tls, 'etcd.key')))) return undefined;
    const c = parse(await readFile(f.config, 'utf8')) as {
      etcd3: { hosts: string[]; username: string; password: string };
      restapi: { authentication: { password: string } };
      postgresql: { authentication: { replication: { password: string } } };
    };
    const s: PatroniSecrets = {
      // Files already in place: key '' leaves them as they are.
      etcd: {
        cert: '',
        key: '',
        ca: '',
        endpoints: c.etcd3.hosts,
        username: c.etcd3.username,
        password: c.etcd3.password,
      },
      replicationPassword: c.postgresql.authentication.replication.password,
      restApiPassword: c.restapi.authentication.password,
    };
    const all = [s.etcd.username, s.etcd.password, s.replicationPassword, s.restApiPassword];
    return s.etcd.endpoints.length > 0 && all.every((v) => typeof v === 'string' && v !== '')
      ? s
      : undefined;
  } catch {
    return undefined;
  }
}

async function fetchSecrets(
  secretsOf: FetchPatroniSecrets | undefined,
  serviceId: string,
): Promise<PatroniSecrets> {
  if (!secretsOf) {
    throw new DriverError(
      'This host cannot run a node of an HA service across hosts: it is not an agent of an installation of several hosts.',
      false,
    );
  }
  try {
    return await secretsOf(serviceId);
  } catch (err) {
    throw new DriverError((err as Error).message, true);
  }
}

/** This host's node's backup source (node-archive.ts openNodeSource), with the node's own paths. */
export async function openPatroniSource(
  ctx: Ctx & Pick<DriverContext, 'backups'>,
  spec: ServiceSpec,
  local: string,
  node: { index: number; port: number; apiPort: number },
): Promise<SourceInfo> {
  const f = nodeFiles(ctx, local);
  if (!(await exists(f.config))) {
    throw new DriverError(`Node ${node.index} of ${spec.serviceId} is not on this host.`, false);
  }
  const user = await ctx.users.ensure(local);
  return openNodeSource(
    ctx,
    spec,
    local,
    { pgdata: f.pgdata, socketDir: join(f.data, 'sock'), port: node.port, apiPort: node.apiPort },
    user,
  );
}

/**
 * A fork's parent side (backups/fork-parent.ts's, for an HA service across
 * hosts), on the leader's node: the system identifier in its control file
 * (the nodes share it), and for a point-in-time or NOW fork everything up
 * to now pushed into the service's stanza (a commit, a segment switch, the
 * archiver).
 */
export async function readyPatroniParent(
  ctx: Ctx & Pick<DriverContext, 'adminBounds'>,
  local: string,
  node: { index: number; port: number },
  archive: boolean,
): Promise<ForkParent> {
  const f = nodeFiles(ctx, local);
  const user = ctx.users.lookup(local);
  if (!user || !(await exists(f.config))) {
    throw new DriverError(`Node ${node.index} is not on this host.`, false);
  }
  const systemId = await readSystemId(await SafeDir.open(f.pgdata, user.uid));
  if (archive) {
    const target = {
      socketDir: join(f.data, 'sock'),
      port: node.port,
      pgdata: f.pgdata,
      bounds: ctx.adminBounds,
    };
    await archiveUpToNow(target, AbortSignal.timeout(90_000));
  }
  return { systemId, running: true, stoppedAt: null };
}
