// The machines an installation runs databases on (docs/decisions.md,
// "Several hosts"). A host joins with a one-time token, then proves itself
// with a certificate from the installation's CA and reports at a fixed
// interval; the control plane judges it lost when the reports stop.

/** What a host has to give; what it reports when it joins and at every heartbeat. */
export interface HostCapacity {
  cpus: number;
  memoryBytes: number;
  diskBytes: number;
}

/** What a host has free, as of its last heartbeat. */
export interface HostUsage {
  memoryFreeBytes: number;
  diskFreeBytes: number;
  /** The one-minute load average. */
  load1: number;
}

/**
 * What a host is for: `database` hosts run the nodes the control plane
 * places; a `repository` host runs none and holds the pgBackRest
 * repositories of the services on the database hosts (docs/decisions.md,
 * "Several hosts": the repository host).
 */
export type HostRole = 'database' | 'repository';
export const HOST_ROLES: readonly HostRole[] = ['database', 'repository'];

export interface Host {
  id: string;
  role: HostRole;
  /** Unique in the installation; the machine's host name unless the operator chose one. */
  name: string;
  /** The address the control plane and other hosts reach it at. */
  address: string;
  /** Its agent's port on that address (mutual TLS). */
  agentPort: number;
  zone: string;
  capacity: HostCapacity;
  usage: HostUsage | null;
  /** SHA-256 of the certificate it was issued: the only one accepted from it. */
  certSha256: string;
  joinedAt: string;
  /** The control plane's clock (epoch ms) at its last heartbeat. */
  heartbeatAt: number;
  /**
   * Being drained (`basin host drain`): nothing new is placed on it, and
   * what it runs moves to other hosts (docs/decisions.md, "Draining a host").
   */
  draining?: boolean;
}

export type HostState = 'ONLINE' | 'LOST';

/** How long a host may be silent before it is lost, unless configured. */
export const DEFAULT_HOST_LOST_AFTER_MS = 15_000;

/**
 * A host's state by its last report. `heardSince`: since when the one
 * judging has been listening (a control plane that has led since then):
 * silence from before it is no evidence (nobody listened: the control
 * plane was down or restarting), so a host is not lost until it has been
 * silent for `lostAfterMs` of the time someone listened.
 */
export function hostState(
  h: Pick<Host, 'heartbeatAt'>,
  now: number,
  lostAfterMs: number,
  heardSince = -Infinity,
): HostState {
  return now - Math.max(h.heartbeatAt, heardSince) > lostAfterMs ? 'LOST' : 'ONLINE';
}

/** Whether new nodes may be placed on a host: a database host, online, not being drained. */
export function takesNodes(
  h: Pick<Host, 'role' | 'heartbeatAt' | 'draining'>,
  now: number,
  lostAfterMs: number,
): boolean {
  return h.role === 'database' && !h.draining && hostState(h, now, lostAfterMs) === 'ONLINE';
}

/** A join token as stored: the secret only as its hash. */
export interface HostToken {
  id: string;
  secretHash: string;
  createdAt: string;
  /** Epoch ms after which it is refused. */
  expiresAt: number;
  /** Set once a host joined with it: it is then refused. */
  usedBy: string | null;
}

/** How a token is written: `<id>.<secret>`, both lowercase hex. */
const TOKEN = /^([0-9a-f]{12})\.([0-9a-f]{32})$/;

export function formatToken(id: string, secret: string): string {
  return `${id}.${secret}`;
}

export function parseToken(token: string): { id: string; secret: string } | undefined {
  const m = TOKEN.exec(token.trim());
  return m ? { id: m[1] as string, secret: m[2] as string } : undefined;
}

/** A route of a host's agent, as the control plane reaches it (an IPv6 address in brackets). */
export function agentUrl(h: Pick<Host, 'address' | 'agentPort'>, path: string): string {
  const where = h.address.includes(':') ? `[${h.address}]` : h.address;
  return `https://${where}:${h.agentPort}${path}`;
}

/** The subject a host's certificate carries: tells hosts from the control plane. */
export function hostCertCn(hostId: string): string {
  return `host:${hostId}`;
}

/**
 * The subject of a service's pgBackRest client certificate: what a
 * repository server authorizes for the service's stanza (tls-server-auth),
 * on one machine as on the repository host.
 */
export function serviceRepositoryClientCn(serviceId: string): string {
  return `basin-service-${serviceId}`;
}

/** The CN of a repository's client at its service's pgBackRest server, for backups (what that server authorizes). */
export function repositoryBackupClientCn(serviceId: string): string {
  return `basin-repository-${serviceId}`;
}

/** The subject of the control plane's certificate: the only client a host accepts. */
/**
 * The header with which the leading control plane names its term on every
 * call to a host, which refuses a lower one (agent/term-fence.ts).
 */
export const LEADER_TERM_HEADER = 'basin-term';

export const CONTROL_PLANE_CN = 'basin-control-plane';

/** A host's name: a DNS label or dotted name, as an operator would give. */
export const HOST_NAME = /^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/;
/** A zone label. */
export const ZONE_NAME = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;

/** Where a service runs, and what it holds of that host (its size at its last apply). */
export interface Placement {
  resourceId: string;
  hostId: string;
  cpuMillis: number;
  memoryMb: number;
  /**
   * The host the node was moved from (its host lost, or drained) while its
   * data is restored from its stanza on the repository host onto this one
   * (docs/decisions.md, "A lost host's service restored elsewhere"): until
   * then the node must be restored, never made anew. Absent otherwise.
   */
  movedFrom?: string;
}

/**
 * The placement id of node `index` of a service: the service's own id for
 * its first node (so a service placed before HA across hosts keeps its
 * row), `<serviceId>:node<i>` for each standby. One row per node: a
 * standby holds its host's room as the primary does.
 */
export function nodeResourceId(serviceId: string, index: number): string {
  return index === 0 ? serviceId : `${serviceId}:node${index}`;
}

/**
 * What a node of an HA service across hosts is on its host: a resource of
 * its own, `<serviceId>n<index>` (its OS user, network namespace, files,
 * cgroups; deleteService of it removes them all). Never another resource's
 * id (those are 10 characters: lib/ids.ts), and never the same on two
 * hosts, so that hosts sharing one machine (the cluster tests' topology,
 * one /etc/passwd) hold each its own node. Patroni's scope, the etcd
 * identity and the placements stay the service's.
 */
export function patroniNodeId(serviceId: string, index: number): string {
  return `${serviceId}n${index}`;
}

/**
 * What a host keeps for one placement row: the service itself (node 0 of
 * a service without HA across hosts) or the Patroni node of the row's
 * index (patroniNodeId). A host told what is placed on it keeps these and
 * removes any other (agent/stale-services.ts).
 */
export function hostResourcesOf(resourceId: string): string[] {
  const [serviceId = resourceId, node] = resourceId.split(':node');
  const index = node === undefined ? 0 : Number(node);
  return node === undefined
    ? [serviceId, patroniNodeId(serviceId, 0)]
    : [patroniNodeId(serviceId, index)];
}

/** The placements of a service's nodes, node 0 first (only those that exist). */
export function nodePlacements(placements: readonly Placement[], serviceId: string): Placement[] {
  const mine = placements.filter(
    (p) => p.resourceId === serviceId || p.resourceId.startsWith(`${serviceId}:node`),
  );
  const index = (p: Placement) =>
    p.resourceId === serviceId ? 0 : Number(p.resourceId.slice(`${serviceId}:node`.length));
  return mine.sort((a, b) => index(a) - index(b));
}
