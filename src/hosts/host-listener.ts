// The control plane's listener for its hosts (`--host-listen`), apart from
// the public API: mutual TLS with the installation's CA. A host that has not
// joined yet has no certificate, so the handshake asks for one without
// requiring it; every route but the CA's and the join's then requires a
// verified host certificate, the one issued to a host still registered.

import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { AppError } from '../domain/errors.js';
import {
  HOST_NAME,
  HOST_ROLES,
  hostResourcesOf,
  type HostRole,
  ZONE_NAME,
} from '../domain/hosts.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { certCn, certSha256 } from '../lib/x509.js';
import type { Store } from '../store/store.js';
import { etcdMemberAnswer } from './etcd-member-route.js';
import { issuePatroniNode } from './patroni-node.js';
import {
  issueRepositoryBackupClient,
  issueRepositoryClient,
  issueRepositoryServer,
  issueServicesCa,
  joinHost,
  recordHeartbeat,
} from './host-registry.js';
import { controlPlaneIdentity, installationCa } from './installation-ca.js';

const capacity = {
  type: 'object',
  additionalProperties: false,
  required: ['cpus', 'memory_bytes', 'disk_bytes'],
  properties: {
    cpus: { type: 'integer', minimum: 1, maximum: 4096 },
    memory_bytes: { type: 'integer', minimum: 0 },
    disk_bytes: { type: 'integer', minimum: 0 },
  },
} as const;

const usage = {
  type: 'object',
  additionalProperties: false,
  required: ['memory_free_bytes', 'disk_free_bytes', 'load1'],
  properties: {
    memory_free_bytes: { type: 'integer', minimum: 0 },
    disk_free_bytes: { type: 'integer', minimum: 0 },
    load1: { type: 'number', minimum: 0 },
  },
} as const;

interface Capacity {
  cpus: number;
  memory_bytes: number;
  disk_bytes: number;
}
interface Usage {
  memory_free_bytes: number;
  disk_free_bytes: number;
  load1: number;
}

export interface HostListener {
  port: number;
  close(): Promise<void>;
}

export interface HostListenerOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  host: string;
  port: number;
  /** A host silent this long is LOST (--host-lost-after): a host cut off fences itself in half of it. */
  lostAfterMs: number;
}

export async function listenForHosts(o: HostListenerOptions): Promise<HostListener> {
  const ca = await installationCa(o.store);
  const identity = await controlPlaneIdentity(o.store, ca);
  const app = Fastify({
    https: { ...identity, ca: [ca.cert], requestCert: true, rejectUnauthorized: false },
    bodyLimit: 64 * 1024,
    logger: false,
  });
  routes(app, o);
  await app.listen({ host: o.host, port: o.port });
  return {
    port: (app.server.address() as AddressInfo).port,
    close: () => app.close(),
  };
}

function routes(
  app: FastifyInstance,
  o: Pick<HostListenerOptions, 'store' | 'clock' | 'log' | 'lostAfterMs'>,
): void {
  app.setErrorHandler((err: Error, _req, reply) => {
    if (err instanceof AppError) {
      return reply.status(err.status).send({ code: err.code, message: err.message });
    }
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.status(400).send({ code: 'INVALID_REQUEST', message: err.message });
    }
    o.log.error({ err }, 'host listener: request failed');
    return reply.status(500).send({ code: 'INTERNAL', message: 'A bug in Basin; retry.' });
  });
  app.setNotFoundHandler((req, reply) =>
    reply.status(404).send({ code: 'NOT_FOUND', message: `No route ${req.method} ${req.url}.` }),
  );

  // What a joining host checks against the hash it was given, before it trusts this listener.
  app.get('/v1/hosts/ca', async (_req, reply) =>
    reply.type('application/x-pem-file').send((await installationCa(o.store)).cert),
  );

  app.post<{
    Body: {
      token: string;
      csr: string;
      name: string;
      address: string;
      agent_port: number;
      zone: string;
      role?: HostRole;
      capacity: Capacity;
    };
  }>(
    '/v1/hosts/join',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['token', 'csr', 'name', 'address', 'agent_port', 'zone', 'capacity'],
          properties: {
            token: { type: 'string', maxLength: 100 },
            csr: { type: 'string', maxLength: 8192 },
            name: { type: 'string', pattern: HOST_NAME.source },
            address: { type: 'string', anyOf: [{ format: 'ipv4' }, { format: 'ipv6' }] },
            agent_port: { type: 'integer', minimum: 1, maximum: 65535 },
            zone: { type: 'string', pattern: ZONE_NAME.source },
            // Absent from agents older than roles: a database host.
            role: { type: 'string', enum: [...HOST_ROLES] },
            capacity,
          },
        },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const joined = await joinHost(o.store, o.clock, {
        token: b.token,
        csr: b.csr,
        name: b.name,
        address: b.address,
        agentPort: b.agent_port,
        zone: b.zone,
        role: b.role ?? 'database',
        capacity: fromCapacity(b.capacity),
      });
      o.log.info(
        {
          host: joined.host.id,
          name: b.name,
          address: b.address,
          zone: b.zone,
          role: joined.host.role,
        },
        'host joined',
      );
      return reply.status(201).send({
        host_id: joined.host.id,
        certificate: joined.certificate,
        ca_certificate: joined.caCertificate,
      });
    },
  );

  // A host's CA for its services' certificates, under the installation's services root.
  app.post<{ Body: { csr: string } }>(
    '/v1/hosts/services-ca',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['csr'],
          properties: { csr: { type: 'string', maxLength: 8192 } },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      const issued = await issueServicesCa(o.store, peer.hostId, peer.sha256, req.body.csr);
      o.log.info({ host: peer.hostId }, "host's services CA issued");
      return reply.send({ certificate: issued.certificate, root_certificate: issued.root });
    },
  );

  // Whether this host runs an etcd member, how to start it, and (with a csr) its certificate.
  app.post<{ Body: { csr?: string } }>(
    '/v1/hosts/etcd',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { csr: { type: 'string', maxLength: 8192 } },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      return reply.send(await etcdMemberAnswer(o.store, peer.hostId, peer.sha256, req.body.csr));
    },
  );

  // A repository host's pgBackRest servers' certificate, under the repositories CA.
  app.post<{ Body: { csr: string } }>(
    '/v1/hosts/repository-server',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['csr'],
          properties: { csr: { type: 'string', maxLength: 8192 } },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      const issued = await issueRepositoryServer(o.store, peer.hostId, peer.sha256, req.body.csr);
      o.log.info({ host: peer.hostId }, "repository host's server certificate issued");
      return reply.send({ certificate: issued.certificate, ca_certificate: issued.ca });
    },
  );

  // A service's pgBackRest client certificate (or, `kind: source`, the server
  // certificate a backup reads its data through; `kind: fork`, a fork's
  // short-lived one for its parent's stanza while it is made), for the
  // database host it is placed on.
  app.post<{ Body: { service_id: string; csr: string; kind?: 'client' | 'source' | 'fork' } }>(
    '/v1/hosts/repository-client',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['service_id', 'csr'],
          properties: {
            service_id: { type: 'string', pattern: '^[a-z0-9]{1,32}$' },
            csr: { type: 'string', maxLength: 8192 },
            kind: { type: 'string', enum: ['client', 'source', 'fork'] },
          },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      const { service_id: serviceId, csr, kind } = req.body;
      const issued = await issueRepositoryClient(
        o.store,
        peer.hostId,
        peer.sha256,
        serviceId,
        csr,
        kind ?? 'client',
      );
      o.log.info(
        { host: peer.hostId, serviceId, kind: kind ?? 'client' },
        "a service's repository certificate issued",
      );
      return reply.send({ certificate: issued.certificate, ca_certificate: issued.ca });
    },
  );

  // The repository host's client certificate at a service's own pgBackRest server, for its backups.
  app.post<{ Body: { service_id: string; csr: string } }>(
    '/v1/hosts/repository-backup-client',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['service_id', 'csr'],
          properties: {
            service_id: { type: 'string', pattern: '^[a-z0-9]{1,32}$' },
            csr: { type: 'string', maxLength: 8192 },
          },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      const { service_id: serviceId, csr } = req.body;
      const issued = await issueRepositoryBackupClient(
        o.store,
        peer.hostId,
        peer.sha256,
        serviceId,
        csr,
      );
      return reply.send({ certificate: issued.certificate, ca_certificate: issued.ca });
    },
  );

  // What a node's Patroni needs of the control plane (the service's etcd identity, its shared passwords), for a host that runs a node of it.
  app.post<{ Body: { service_id: string; csr: string } }>(
    '/v1/hosts/patroni-node',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['service_id', 'csr'],
          properties: {
            service_id: { type: 'string', pattern: '^[a-z0-9]{1,32}$' },
            csr: { type: 'string', maxLength: 8192 },
          },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      const { service_id: serviceId, csr } = req.body;
      const issued = await issuePatroniNode(o.store, peer.hostId, peer.sha256, serviceId, csr);
      // The passwords are secrets: never in the log.
      o.log.info({ host: peer.hostId, serviceId }, "a Patroni node's secrets issued");
      return reply.send({
        etcd: {
          certificate: issued.etcd.certificate,
          ca_certificate: issued.etcd.ca,
          endpoints: issued.etcd.endpoints,
          username: issued.etcd.username,
          password: issued.etcd.password,
        },
        replication_password: issued.replicationPassword,
        restapi_password: issued.restApiPassword,
      });
    },
  );

  app.post<{ Body: { capacity: Capacity; usage: Usage; endpoints?: string[] } }>(
    '/v1/hosts/heartbeat',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['capacity', 'usage'],
          properties: {
            capacity,
            usage,
            // The frontends its HAProxy has (agent/stale-services.ts localEndpoints).
            endpoints: {
              type: 'array',
              maxItems: 10_000,
              items: { type: 'string', pattern: '^[a-z0-9]{1,32}$' },
            },
          },
        },
      },
    },
    async (req, reply) => {
      const peer = presentedHost(req);
      const u = req.body.usage;
      const host = await recordHeartbeat(o.store, o.clock, peer.hostId, peer.sha256, {
        capacity: fromCapacity(req.body.capacity),
        usage: {
          memoryFreeBytes: u.memory_free_bytes,
          diskFreeBytes: u.disk_free_bytes,
          load1: u.load1,
        },
      });
      // What it runs that is placed here: anything else it has is stale (agent/stale-services.ts).
      const placed = (await o.store.placements.list())
        .filter((p) => p.hostId === host.id)
        .flatMap((p) => hostResourcesOf(p.resourceId));
      // With a repository host, a lost host's services may be restored
      // elsewhere: a database host that cannot reach the control plane
      // stops its own before they could be (agent/self-fence.ts).
      const restorable =
        host.role === 'database' &&
        (await o.store.hosts.list()).some((h) => h.role === 'repository');
      const gone = await unknownResources(o.store, req.body.endpoints ?? []);
      return reply.send({
        host_id: host.id,
        name: host.name,
        placed: [...new Set(placed)],
        // Always, empty too: it tells an agent this control plane takes its `endpoints`.
        gone,
        ...(restorable ? { fence_after_ms: Math.floor(o.lostAfterMs / 2) } : {}),
      });
    },
  );
}

/**
 * Of a host's frontends, those whose service or read replica set the
 * store no longer holds: deleted while the host could not be told (it was
 * lost), to be removed there. A service being deleted is still held until
 * its rows go, and one being created is held before any host has its
 * frontend.
 */
async function unknownResources(
  store: HostListenerOptions['store'],
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const known = new Set([
    ...(await store.services.listAll()).map((s) => s.id),
    ...(await store.replicaSets.listAll()).map((r) => r.id),
  ]);
  return ids.filter((id) => !known.has(id));
}

function fromCapacity(c: Capacity) {
  return { cpus: c.cpus, memoryBytes: c.memory_bytes, diskBytes: c.disk_bytes };
}

/** The host a request's client certificate names, when the CA verified it; else 401. */
function presentedHost(req: FastifyRequest): { hostId: string; sha256: string } {
  const socket = req.raw.socket as TLSSocket;
  // Parsed once a request (every heartbeat of every host comes here).
  const cert = socket.authorized ? socket.getPeerX509Certificate() : undefined;
  const cn = cert ? certCn(cert) : undefined;
  if (!cert || !cn?.startsWith('host:')) {
    throw new AppError(
      'UNAUTHORIZED',
      "This route needs the host's certificate from the installation's CA (a host gets one when it joins).",
    );
  }
  return { hostId: cn.slice('host:'.length), sha256: certSha256(cert) };
}
