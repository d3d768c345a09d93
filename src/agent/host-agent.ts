// `basin host run`: a machine's agent in an installation of several hosts
// (docs/decisions.md, "Several hosts"). It joins once (with a token), runs
// the local driver for the services the control plane places here (as a
// one-machine Basin runs it: OS user per service, confinement, cgroups,
// namespaces), serves the control plane on its own mutual-TLS listener
// (the driver's calls, driver-rpc.ts) and reports to it at a fixed
// interval. A composition root, like main.ts: it wires the local driver.

import type { Config } from '../config.js';
import type { Driver } from '../drivers/driver.js';
import { createLocalDriver } from '../drivers/local/local-driver.js';
import { localDriverOptions } from '../local-driver-options.js';
import { makeDataDir } from '../lib/data-dir.js';
import { lockDataDir } from '../lib/data-dir-lock.js';
import type { Logger } from '../lib/logger.js';
import { CONTROL_PLANE_CN, type HostRole } from '../domain/hosts.js';
import { httpsJson } from '../lib/https-json.js';
import { type AgentIdentity, readIdentity, writeIdentity } from './agent-files.js';
import { serveAgent } from './agent-server.js';
import { TermFence } from './term-fence.js';
import { hostCapacity, hostUsage, wireCapacity, wireUsage } from './capacity.js';
import { answerDriverCall } from './driver-rpc.js';
import { join, JoinError } from './join.js';
import { EtcdMemberSupervisor } from './etcd/etcd-member.js';
import { repositoryClientSigner, repositoryServerIdentity } from './repository-identity.js';
import { RepositoryHost } from './repository-host/repository-host.js';
import { answerRepositoryCall } from './repository-host/repository-route.js';
import { patroniNodeSecrets } from './patroni-node.js';
import { servicesCaFor } from './services-ca.js';
import { SelfFence } from './self-fence.js';
import { localEndpoints, StaleServices } from './stale-services.js';
import { Layout } from '../drivers/local/layout.js';
import { fileUidAllocator } from './uid-counter.js';

export interface AgentOptions {
  dataDir: string;
  /**
   * The local driver's settings (the server's flags: uid range, service
   * network, …), its data directory this one; none: the agent joins and
   * reports but runs no databases (tests of joining alone, and a
   * repository host, which never runs one).
   */
  driverConfig: Config | null;
  /** Needed only to join: the control plane's host listener, a token and the CA's hash. */
  controlPlane?: string;
  token?: string;
  caSha256?: string;
  name: string;
  /** The address the control plane reaches this host at; the agent listens there. */
  address: string;
  port: number;
  zone: string;
  /**
   * What this host is for (domain/hosts.ts HostRole): given to join, then
   * checked against what it joined as; undefined: whatever it joined as.
   */
  role?: HostRole;
  heartbeatMs: number;
  log: Logger;
}

export interface RunningAgent {
  identity: AgentIdentity;
  port: number;
  stop(): Promise<void>;
}

export async function runAgent(o: AgentOptions): Promise<RunningAgent> {
  makeDataDir(o.dataDir);
  // One agent per data directory, as one Basin per data directory.
  const lock = lockDataDir(o.dataDir);
  let identity = readIdentity(o.dataDir);
  if (!identity) {
    if (!o.controlPlane || !o.token || !o.caSha256) {
      throw new JoinError(
        'This host has not joined an installation: give --control-plane, --token and --ca-sha256 (from `basin host token` on the control plane).',
      );
    }
    identity = await join({
      ...o,
      controlPlane: o.controlPlane,
      token: o.token,
      caSha256: o.caSha256,
      agentPort: o.port,
      role: o.role ?? 'database',
    });
    writeIdentity(o.dataDir, identity);
    o.log.info({ host: identity.hostId, name: identity.name }, 'joined the installation');
  }
  if (o.role !== undefined && o.role !== identity.role) {
    throw new JoinError(
      `This host joined the installation as a ${identity.role} host, not a ${o.role} host: run it with --role ${identity.role}, or join it again with a fresh data directory.`,
    );
  }
  const id = identity;
  const repository = id.role === 'repository';
  // A repository host holds repositories, never a database: no local driver.
  if (repository) await repositoryServerIdentity(id, o.dataDir);
  // One allocator for the services' users and etcd's: a uid is never given twice.
  const allocateUid = o.driverConfig
    ? fileUidAllocator(o.dataDir, o.driverConfig.serviceUidRange)
    : undefined;
  // A host cut off from the control plane stops what may be restored elsewhere (self-fence.ts).
  const fence =
    o.driverConfig && allocateUid && !repository
      ? new SelfFence({
          dataDir: o.dataDir,
          uidRange: o.driverConfig.serviceUidRange,
          log: o.log,
        })
      : null;
  const driver: Driver | null =
    o.driverConfig && allocateUid && !repository
      ? createLocalDriver(
          localDriverOptions(o.driverConfig, {
            allocateUid,
            log: o.log,
            // Clients reach this host's services at its address: their certificates name it.
            publicHost: o.address,
            // Issued from a CA of this host's under the installation's: one root for clients.
            ca: () => servicesCaFor(id),
            // A service's side of its repository on the repository host.
            remoteIdentity: repositoryClientSigner(id),
            // What a node of an HA service across hosts needs for its Patroni.
            patroniSecrets: (serviceId) => patroniNodeSecrets(id, serviceId),
            // Nothing of its own (a wake, a restart) while fenced.
            mayAct: () => fence?.mayAct() ?? true,
          }),
        )
      : null;
  // What the control plane no longer places here never serves again: its
  // processes killed before the driver starts, then removed
  // (stale-services.ts). Only on the control plane's word: a host that
  // cannot reach it keeps what it has.
  const stale =
    driver && o.driverConfig
      ? new StaleServices({
          dataDir: o.dataDir,
          uidRange: o.driverConfig.serviceUidRange,
          log: o.log,
        })
      : null;
  const first = stale ? await heartbeat(id, o, false).catch(() => undefined) : undefined;
  /** Whether the control plane answers with `gone` (heartbeat). */
  let listsGone = first?.gone !== undefined;
  /** When a heartbeat last named the frontends (every FRONTENDS_EVERY_MS). */
  let namedAt = 0;
  if (first?.placed) fence?.answered(first.fenceAfterMs);
  if (stale && first?.placed) await stale.placed(first.placed, first.sentAt);
  await driver?.start();
  if (driver) stale?.useDriver(driver);
  // A repository host's repositories, one per service (repository-host/).
  const repositories =
    repository && allocateUid
      ? new RepositoryHost({
          dataDir: o.dataDir,
          address: o.address,
          identity: id,
          allocateUid,
          log: o.log,
        })
      : null;
  const server = await serveAgent(
    id,
    { host: o.address, port: o.port },
    {
      ...(driver
        ? {
            'POST /v1/agent/driver': (req) =>
              answerDriverCall(driver, req, (serviceId) => stale?.called(serviceId)),
          }
        : {}),
      ...(repositories
        ? { 'POST /v1/agent/repository': (req) => answerRepositoryCall(repositories, req) }
        : {}),
      'GET /v1/agent/health': async () => ({
        status: 200,
        body: {
          host_id: id.hostId,
          name: id.name,
          role: id.role,
          capacity: wireCapacity(hostCapacity(o.dataDir)),
          usage: wireUsage(hostUsage(o.dataDir)),
        },
      }),
    },
    new TermFence(o.dataDir),
  );
  o.log.info(
    { host: id.hostId, port: server.port },
    `host agent at https://${o.address}:${server.port}`,
  );

  // An etcd member when the control plane places one here (it needs a uid of the host's range).
  const etcd = allocateUid
    ? new EtcdMemberSupervisor({
        dataDir: o.dataDir,
        address: o.address,
        identity: id,
        allocateUid,
        log: o.log,
      })
    : null;

  let stopped = false;
  /** A repository host's servers being looked after (keepServing): one round at a time. */
  let serving = false;
  let timer: NodeJS.Timeout | undefined;
  let refusedBefore = false;
  const beat = async () => {
    try {
      const naming = stale !== null && listsGone && Date.now() - namedAt >= FRONTENDS_EVERY_MS;
      if (naming) namedAt = Date.now();
      const { res, sentAt, placed, gone, fenceAfterMs } = await heartbeat(id, o, naming);
      if (res.status === 200) listsGone = gone !== undefined;
      if (placed) fence?.answered(fenceAfterMs);
      if (stale && placed) await stale.placed(placed, sentAt);
      if (stale && gone) await stale.gone(gone, sentAt);
      if (res.status !== 200) {
        // Said once, not at every beat: a removed host keeps trying, quietly.
        if (!refusedBefore)
          o.log.warn(
            { status: res.status, body: res.body },
            'the control plane refused the heartbeat',
          );
        refusedBefore = true;
      } else refusedBefore = false;
    } catch (err) {
      o.log.warn({ err: (err as Error).message }, 'heartbeat failed');
    }
    await fence?.check().catch((err: unknown) => {
      o.log.warn({ err: (err as Error).message }, 'fencing this host failed');
    });
    // Not awaited: a slow step of etcd's must not delay the heartbeats.
    void etcd?.tick();
    if (repositories && !serving) {
      serving = true;
      void repositories.keepServing().finally(() => (serving = false));
    }
    if (!stopped) timer = setTimeout(() => void beat(), o.heartbeatMs);
  };
  await beat();
  return {
    identity: id,
    port: server.port,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      stale?.close();
      await server.close();
      await driver?.close();
      lock.release();
    },
  };
}

/** The most frontends a heartbeat names (the listener's bound; more wait for later beats). */
const MAX_ENDPOINTS = 10_000;
/**
 * How often a heartbeat names the frontends: the control plane reads every
 * service's and set's id to answer, and a frontend left by a delete while
 * the host was lost can wait this long to go.
 */
const FRONTENDS_EVERY_MS = 30_000;

/**
 * One heartbeat: this host's capacity and usage (and its frontends) to the
 * control plane, and what it answers: the services it places here
 * (undefined when it did not answer with them), and the frontends whose
 * service is gone.
 */
async function heartbeat(
  id: AgentIdentity,
  o: Pick<AgentOptions, 'dataDir' | 'heartbeatMs'>,
  /**
   * Whether it names its frontends, for the answer's `gone`: a database
   * host's, once the control plane answered with a `gone` list (one of an
   * older version, which refuses a field it does not know, never does).
   */
  frontends: boolean,
): Promise<{
  res: { status: number; body: unknown };
  sentAt: number;
  placed?: string[];
  gone?: string[];
  fenceAfterMs?: number;
}> {
  const sentAt = Date.now();
  const endpoints = frontends
    ? (await localEndpoints(new Layout(o.dataDir))).slice(0, MAX_ENDPOINTS)
    : [];
  const res = await httpsJson(`${id.controlPlane}/v1/hosts/heartbeat`, {
    ca: id.ca,
    cert: id.cert,
    key: id.key,
    peerCn: CONTROL_PLANE_CN,
    body: {
      capacity: wireCapacity(hostCapacity(o.dataDir)),
      usage: wireUsage(hostUsage(o.dataDir)),
      ...(endpoints.length > 0 ? { endpoints } : {}),
    },
    timeoutMs: Math.max(1000, o.heartbeatMs * 2),
  });
  const body = res.body as
    { placed?: unknown; gone?: unknown; fence_after_ms?: unknown } | undefined;
  const placed = body?.placed;
  const gone = body?.gone;
  const fence = body?.fence_after_ms;
  const strings = (v: unknown): v is string[] =>
    Array.isArray(v) && v.every((p) => typeof p === 'string');
  return res.status === 200 && strings(placed)
    ? {
        res,
        sentAt,
        placed,
        ...(strings(gone) ? { gone } : {}),
        ...(typeof fence === 'number' && fence > 0 ? { fenceAfterMs: fence } : {}),
      }
    : { res, sentAt };
}
