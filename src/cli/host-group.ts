// `basin host …`: the machines of an installation of several hosts
// (docs/decisions.md, "Several hosts"). `run` is the agent on each machine;
// `token`, `list`, `check`, `drain` and `remove` administer them on the
// control plane's store.

import { hostname } from 'node:os';
import { JoinError } from '../agent/join.js';
import {
  DEFAULT_HOST_LOST_AFTER_MS,
  type Host,
  HOST_NAME,
  HOST_ROLES,
  type HostRole,
  hostState,
  ZONE_NAME,
} from '../domain/hosts.js';
import { checkAgent } from '../hosts/agent-client.js';
import { type EtcdHealth, etcdHealth } from '../hosts/etcd-cluster.js';
import { servicesCa } from '../hosts/installation-ca.js';
import { DEFAULT_TOKEN_TTL_MS, issueJoinToken } from '../hosts/join-tokens.js';
import { OPTIONS, parseConfig } from '../config.js';
import type { Store } from '../store/store.js';
import { replicaSetConverge, serviceConverge } from '../domain/operations.js';
import { applyServiceAction } from '../domain/service-status.js';
import { CliFailure } from './cli-failure.js';
import type { CliGroup } from './command.js';
import { DATA_DIR } from './global-options.js';
import { table } from './table.js';

const AGENT_DATA_DIR = '/var/lib/basin-host';
const AGENT_PORT = 9444;

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)}G`;

/** A host's etcd member as listed: none, or its health and whether it leads. */
function memberOf(health: EtcdHealth | null, hostId: string) {
  const m = health?.members.find((x) => x.hostId === hostId);
  return m ? { id: m.id, started: m.started, healthy: m.healthy, leader: m.leader } : null;
}

function memberText(m: ReturnType<typeof memberOf>): string {
  if (!m) return '-';
  if (!m.started) return 'starting';
  if (!m.healthy) return 'UNHEALTHY';
  return m.leader ? 'leader' : 'healthy';
}

function quorumText(health: EtcdHealth | null): string {
  if (!health) return 'etcd: no cluster (it forms once three hosts are online)\n';
  const healthy = health.members.filter((m) => m.healthy).length;
  return `etcd: ${healthy} of ${health.members.length} members healthy, ${health.quorum ? 'quorum' : 'NO QUORUM'}\n`;
}

/** LOST, or else DRAINING while a drained host still holds something (DRAINED once not), or ONLINE. */
function shownState(h: Host, now: number, lostAfterMs: number, holds: boolean): string {
  const state = hostState(h, now, lostAfterMs);
  if (state === 'LOST' || !h.draining) return state;
  return holds ? 'DRAINING' : 'DRAINED';
}

const shown = (h: Host, now: number, lostAfterMs: number, holds = false) => ({
  id: h.id,
  name: h.name,
  role: h.role,
  address: h.address,
  agent_port: h.agentPort,
  zone: h.zone,
  cpus: h.capacity.cpus,
  memory_bytes: h.capacity.memoryBytes,
  disk_bytes: h.capacity.diskBytes,
  memory_free_bytes: h.usage?.memoryFreeBytes ?? null,
  disk_free_bytes: h.usage?.diskFreeBytes ?? null,
  load1: h.usage?.load1 ?? null,
  state: shownState(h, now, lostAfterMs, holds),
  joined_at: h.joinedAt,
  heartbeat_at: new Date(h.heartbeatAt).toISOString(),
});

async function findHost(store: Store, which: string): Promise<Host> {
  const host = (await store.hosts.get(which)) ?? (await store.hosts.findByName(which));
  if (!host) throw new CliFailure(`No host ${which}: see \`basin host list\`.`);
  return host;
}

export const hostGroup: CliGroup = {
  name: 'host',
  summary: [
    'The machines of an installation of several hosts: `run` the agent on each,',
    'join it with a one-time `token`, `list`, `check` and `remove` them.',
  ].join('\n'),
  commands: [
    {
      name: 'run',
      kind: 'plain',
      args: [],
      rest: "the server's options for the databases this host runs (--service-uid-range, --service-network, …)",
      options: {
        'control-plane': {
          value: 'url',
          help: "the control plane's --host-listen, https://address:port (to join)",
        },
        token: { value: 'token', help: 'a one-time join token from `basin host token` (to join)' },
        'ca-sha256': {
          value: 'hash',
          help: "the installation CA's SHA-256 that `basin host token` printed (to join)",
        },
        address: {
          value: 'ip',
          help: 'the address the control plane reaches this host at; the agent listens there',
        },
        port: { value: 'port', help: `the agent's port (default ${AGENT_PORT})` },
        name: {
          value: 'name',
          help: "this host's name in the installation (default: the host name)",
        },
        role: {
          value: 'role',
          help: 'database (runs the nodes placed on it, the default) or repository (holds the backups of the database hosts\' services: docs/decisions.md, "Several hosts")',
        },
        zone: {
          value: 'zone',
          help: 'a zone label: standbys prefer another zone (default "default")',
        },
        'heartbeat-ms': {
          value: 'ms',
          help: 'how often it reports to the control plane (default 2000)',
        },
      },
      usage: [
        [
          'run --address <ip> [--control-plane <url> --token <token> --ca-sha256 <hash>]',
          "run this machine's host agent; the first run joins the installation",
        ],
      ],
      details: [
        'Runs the host agent of this machine, as root, until it is stopped (SIGTERM).',
        'The first run joins the installation with a token from `basin host token`:',
        "it checks that the control plane presents the installation's CA (by the",
        'hash), makes a key that never leaves this machine and gets a certificate',
        'for it. Later runs need only --address: the identity is kept in the data',
        `directory (--data-dir, default ${AGENT_DATA_DIR}). The agent serves only the`,
        'control plane (mutual TLS) and reports its capacity and free resources.',
        'With --role repository (given when it joins) the host runs no databases: it',
        "holds the pgBackRest repositories of the database hosts' services, with a",
        "server certificate from the installation's repositories CA.",
      ].join('\n'),
      examples: [
        'basin host run --data-dir /var/lib/basin-host --address 10.0.0.11 --zone a \\\n    --control-plane https://10.0.0.1:9443 --token 1a2b…  --ca-sha256 9f86…',
        'basin host run --role repository --address 10.0.0.20 \\\n    --control-plane https://10.0.0.1:9443 --token 3c4d…  --ca-sha256 9f86…',
      ],
      check(opt) {
        if (opt('address') === undefined) return 'host run needs --address <ip>.';
        const name = opt('name');
        if (name !== undefined && !HOST_NAME.test(name))
          return `--name must be a DNS name; got ${name}.`;
        const role = opt('role');
        if (role !== undefined && !HOST_ROLES.includes(role as HostRole))
          return `--role must be database or repository; got ${role}.`;
        const zone = opt('zone');
        if (zone !== undefined && !ZONE_NAME.test(zone))
          return `--zone must be lowercase letters, digits and dashes; got ${zone}.`;
        return undefined;
      },
      async run(c) {
        // Loaded here, not with the group: the agent is the local driver and
        // its dependencies (most of Basin), which no other `basin` command
        // needs and every one would otherwise load (docs/architecture.md §6).
        const [{ runAgent }, { createServerLog }] = await Promise.all([
          import('../agent/host-agent.js'),
          import('../lib/logger.js'),
        ]);
        const serverLog = createServerLog({ level: 'info' });
        const log = serverLog.logger;
        const port = Number(c.opt('port') ?? AGENT_PORT);
        const heartbeatMs = Number(c.opt('heartbeat-ms') ?? 2000);
        if (!Number.isInteger(port) || port < 0 || port > 65535)
          throw new CliFailure('--port must be a port number.');
        if (!(heartbeatMs >= 100)) throw new CliFailure('--heartbeat-ms must be at least 100.');
        // Nothing the agent writes (keys, certificates) is for other OS users.
        process.umask(0o077);
        const dataDir = c.opt(DATA_DIR) ?? AGENT_DATA_DIR;
        let driverConfig;
        try {
          // The same flags (and BASIN_* variables) as the server's, for the local driver.
          driverConfig = parseConfig([...c.rest, OPTIONS.dataDir.flag, dataDir], c.env);
        } catch (err) {
          throw new CliFailure(`after --: ${(err as Error).message}`);
        }
        let agent;
        try {
          agent = await runAgent({
            dataDir,
            driverConfig,
            controlPlane: c.opt('control-plane')?.replace(/\/+$/, ''),
            token: c.opt('token'),
            caSha256: c.opt('ca-sha256'),
            name: c.opt('name') ?? hostname().toLowerCase(),
            address: c.opt('address') as string,
            port,
            zone: c.opt('zone') ?? 'default',
            role: c.opt('role') as HostRole | undefined,
            heartbeatMs,
            log,
          });
        } catch (err) {
          if (err instanceof JoinError) throw new CliFailure(err.message);
          throw err;
        }
        await new Promise<void>((done) => {
          process.once('SIGTERM', done);
          process.once('SIGINT', done);
        });
        await agent.stop();
        log.info({}, 'host agent stopped');
        await serverLog.flush();
      },
    },
    {
      name: 'token',
      args: [],
      options: {
        ttl: {
          value: 'minutes',
          help: `how long it may be used (default ${DEFAULT_TOKEN_TTL_MS / 60_000})`,
        },
      },
      usage: [
        ['token [--ttl <minutes>]', 'make a one-time token that joins one host (shown once)'],
      ],
      details: [
        'Prints a one-time join token (shown once; Basin keeps its hash) and the',
        "SHA-256 of the installation's CA, which the joining host checks the control",
        'plane against. The CA is made on first use.',
      ].join('\n'),
      examples: ['basin host token --ttl 30'],
      async run(c) {
        const ttl = Number(c.opt('ttl') ?? DEFAULT_TOKEN_TTL_MS / 60_000);
        if (!(ttl > 0 && ttl <= 7 * 24 * 60))
          throw new CliFailure('--ttl must be minutes, at most a week.');
        const t = await issueJoinToken(c.store, c.clock, ttl * 60_000);
        if (c.json)
          return c.print({ token: t.token, ca_sha256: t.caSha256, expires_at: t.expiresAt });
        c.out(
          [
            `Token:      ${t.token}`,
            `CA SHA-256: ${t.caSha256}`,
            `Expires:    ${t.expiresAt}`,
            '',
            'On the new host, as root:',
            `  basin host run --address <its ip> --control-plane https://<--host-listen> \\`,
            `    --token ${t.token} --ca-sha256 ${t.caSha256}`,
            '',
          ].join('\n'),
        );
      },
    },
    {
      name: 'ca',
      args: [],
      options: {},
      usage: [['ca', 'print the CA certificate clients verify every service of every host with']],
      details: [
        "Prints the installation's services CA (PEM): give it to clients as",
        "`sslrootcert` for `sslmode=verify-full`. Each host issues its services'",
        'certificates from a CA of its own under this one.',
      ].join('\n'),
      examples: ['basin host ca > services-ca.crt'],
      async run(c) {
        c.out((await servicesCa(c.store)).cert);
      },
    },
    {
      name: 'list',
      args: [],
      options: {
        'lost-after': {
          value: 'seconds',
          help: `a host silent this long is LOST (default ${DEFAULT_HOST_LOST_AFTER_MS / 1000})`,
        },
      },
      usage: [
        ['list [--lost-after <seconds>]', 'the hosts, their capacity and whether they report'],
      ],
      details: `A host that has not reported for ${DEFAULT_HOST_LOST_AFTER_MS / 1000} s (--lost-after) is LOST.`,
      examples: ['basin host list --json'],
      async run(c) {
        const now = c.clock();
        const lostAfter = Number(c.opt('lost-after') ?? DEFAULT_HOST_LOST_AFTER_MS / 1000);
        if (!(lostAfter > 0)) throw new CliFailure('--lost-after must be a number of seconds.');
        const health = await etcdHealth(c.store);
        const placements = await c.store.placements.list();
        const hosts = (await c.store.hosts.list()).map((h) => ({
          ...shown(
            h,
            now,
            lostAfter * 1000,
            placements.some((p) => p.hostId === h.id),
          ),
          etcd: memberOf(health, h.id),
        }));
        if (c.json) return c.print(hosts);
        c.out(
          table(
            [
              'NAME',
              'ID',
              'ROLE',
              'ADDRESS',
              'ZONE',
              'CPUS',
              'MEMORY',
              'DISK',
              'STATE',
              'SEEN',
              'ETCD',
            ],
            hosts.map((h) => [
              h.name,
              h.id,
              h.role,
              `${h.address}:${h.agent_port}`,
              h.zone,
              String(h.cpus),
              gib(h.memory_bytes),
              gib(h.disk_bytes),
              h.state,
              `${Math.max(0, Math.round((now - Date.parse(h.heartbeat_at)) / 1000))}s ago`,
              memberText(h.etcd),
            ]),
          ),
        );
        c.out(quorumText(health));
      },
    },
    {
      name: 'etcd',
      args: [],
      options: {},
      usage: [['etcd', "etcd's members on the hosts: each one's health, the leader, the quorum"]],
      details: [
        "Asks every member of the installation's etcd (as its root user) for its",
        'status. The cluster forms once three hosts are online (five members from',
        'five hosts); it keeps accepting writes while a majority is healthy.',
      ].join('\n'),
      examples: ['basin host etcd --json'],
      async run(c) {
        const health = await etcdHealth(c.store);
        const names = new Map((await c.store.hosts.list()).map((h) => [h.id, h.name]));
        const members = (health?.members ?? []).map((m) => ({
          host: m.hostId === null ? null : (names.get(m.hostId) ?? null),
          host_id: m.hostId,
          id: m.id,
          endpoint: m.endpoint,
          started: m.started,
          healthy: m.healthy,
          leader: m.leader,
        }));
        if (c.json)
          return c.print({ formed: health !== null, quorum: health?.quorum ?? false, members });
        c.out(
          table(
            ['HOST', 'MEMBER', 'ENDPOINT', 'STATE'],
            members.map((m) => [m.host ?? '(gone)', m.id, m.endpoint, memberText(m)]),
          ),
        );
        c.out(quorumText(health));
      },
    },
    {
      name: 'check',
      args: ['host'],
      options: {},
      usage: [['check <host>', "call a host's agent as the control plane does (mutual TLS)"]],
      details: "Calls the agent's health route with the control plane's certificate.",
      examples: ['basin host check db-1'],
      async run(c) {
        const host = await findHost(c.store, c.args[0] as string);
        const health = await checkAgent(c.store, host);
        if (c.json) return c.print(health);
        c.out(`${host.name} (${host.id}) answers at ${host.address}:${host.agentPort}\n`);
      },
    },
    {
      name: 'drain',
      args: ['host'],
      options: {
        undo: { help: 'take the host back: services are placed on it again' },
      },
      usage: [
        [
          'drain <host>',
          'move every service off a host, each with a short stop, and place nothing new on it',
        ],
        ['drain <host> --undo', 'place services on it again'],
      ],
      details: [
        'Nothing new is placed on the host from then on, and each running service',
        'on it without HA replicas moves to another host: its logs announce it,',
        'it stops where it is (everything written is archived), and it is',
        'restored on the other host from its backups on the repository host;',
        'its endpoint then names that host. A stopped service moves when it is',
        'started. `basin host list` shows the host DRAINING, then DRAINED once',
        'nothing is placed on it; services without HA replicas need a repository',
        'host. A node of an HA service moves without a stop: a standby is rebuilt',
        'on another host (copied from the primary), a primary first hands over',
        'to a standby; a node of a read replica set is rebuilt on another host',
        "than its service's, one at a time while the others serve",
        '(docs/decisions.md, "Draining a host").',
      ].join('\n'),
      examples: ['basin host drain db-1', 'basin host drain db-1 --undo'],
      async run(c) {
        const host = await findHost(c.store, c.args[0] as string);
        const undo = c.flag('undo');
        if (host.role !== 'database') {
          throw new CliFailure(
            `${host.name} is the repository host: it runs no services to drain.`,
          );
        }
        const hosts = await c.store.hosts.list();
        const placed = (await c.store.placements.list()).filter((p) => p.hostId === host.id);
        // A service's own row, or (HA across hosts) one of its nodes' rows.
        const services = (await c.store.services.listAll()).filter((svc) =>
          placed.some((p) => p.resourceId === svc.id || p.resourceId.startsWith(`${svc.id}:node`)),
        );
        // Without HA replicas a service moves through the repository host;
        // an HA service's node is copied from its primary by Patroni.
        const plain = services.filter((svc) => svc.ha.replicaCount === 0);
        if (!undo && plain.length > 0 && !hosts.some((h) => h.role === 'repository')) {
          throw new CliFailure(
            'Services without HA replicas move off a drained host through the repository host, and this installation has none: join one with `basin host run --role repository`.',
          );
        }
        const moving = services;
        // Read replica sets with a node's row here (`<set>:node<i>`).
        const sets = (await c.store.replicaSets.listAll()).filter((rs) =>
          placed.some((p) => p.resourceId.startsWith(`${rs.id}:node`)),
        );
        const setNodes = placed.filter((p) =>
          sets.some((rs) => p.resourceId.startsWith(`${rs.id}:node`)),
        ).length;
        await c.store.transaction(async (tx) => {
          await tx.hosts.setDraining(host.id, !undo);
          if (undo) return;
          // Each converges, and its apply moves it (drivers/hosts:
          // moveOffDraining); a READY one shows CONFIGURING meanwhile.
          for (const svc of moving) {
            const current = await tx.services.get(svc.id);
            if (!current || current.status === 'DELETING') continue;
            const next = await tx.services.update(applyServiceAction(current, 'reconfigure'));
            await tx.operations.enqueue(serviceConverge(next), c.clock());
          }
          // A set keeps its status: its other nodes serve while one moves
          // (drivers/hosts/replica-sets.ts moveOffDraining).
          for (const rs of sets) {
            const current = await tx.replicaSets.get(rs.id);
            if (!current || current.status === 'deleting') continue;
            await tx.operations.enqueue(replicaSetConverge(current), c.clock());
          }
        });
        if (c.json) {
          return c.print({
            host: host.name,
            draining: !undo,
            moving: undo ? [] : moving.map((svc) => svc.id),
            replica_sets: undo ? [] : sets.map((rs) => rs.id),
            staying: undo
              ? []
              : services.filter((svc) => !moving.includes(svc)).map((svc) => svc.id),
          });
        }
        if (undo) return c.out(`${host.name} takes services again.\n`);
        const ha = services.length - plain.length;
        c.out(
          `Draining ${host.name}: ${plain.length} service(s) move to other hosts, each with a short stop` +
            (ha > 0 ? `; ${ha} with HA replicas move their node(s) there without a stop` : '') +
            (setNodes > 0
              ? `; ${setNodes} node(s) of ${sets.length} read replica set(s) move one at a time, copied from their primary (a node no other host has room for stays, and its set's logs say so)`
              : '') +
            '. `basin host list` shows it DRAINED once nothing is placed on it.\n',
        );
      },
    },
    {
      name: 'remove',
      args: ['host'],
      options: {},
      usage: [['remove <host>', 'forget a host: its certificate is refused from then on']],
      details: [
        'Forgets a host (by name or id). Its certificate is refused from then on: to',
        'come back it must join again with a new token (and a fresh data directory).',
      ].join('\n'),
      examples: ['basin host remove db-1'],
      async run(c) {
        const host = await findHost(c.store, c.args[0] as string);
        await c.store.transaction((tx) => tx.hosts.remove(host.id));
        c.out(`Removed host ${host.name} (${host.id}).\n`);
      },
    },
  ],
};
