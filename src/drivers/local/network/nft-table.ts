// The installation's nftables table, rendered whole from the namespaces'
// records (pure: nft-table.test.ts). `nft -f` applies it in one
// transaction: the table is made if missing, deleted and made again, so
// the kernel switches from the old rules to the new at once (connections
// keep their translations: those live in conntrack, not in the rules).
// https://wiki.nftables.org/wiki-nftables/index.php/Performing_Network_Address_Translation_(NAT)
//
// What it does (docs/decisions.md, Service networks; docs/security.md):
// - DNAT, in prerouting (clients from elsewhere, and from namespaces) and
//   output (clients on this host), of every TCP connection to a local
//   address of this host on a port that leads into a namespace (`ports`:
//   a node's own port, a service's endpoint when no HAProxy serves it, a
//   pooler's) to `<namespace address>:<same port>`. A port not in the map
//   is not translated (HAProxy's endpoints, Basin's API…).
// - SNAT (masquerade: the veth's own address, the namespace's gateway) of
//   what reaches a namespace from 127.0.0.0/8 (a loopback source cannot
//   leave the host; route_localnet lets it be routed there first), from a
//   read replica set's namespace to its service's (`follows`: the
//   service's nodes admit their own gateway for replication), and from a
//   namespace back into itself through the host (hairpin: its replies
//   would otherwise not return through the host), TCP from source ports
//   TRANSLATED_PORTS (see Not tracked). Other clients keep their address:
//   pg_hba and the VPC rules see the real client.
// - Egress: a namespace's connections to the rest of the world leave
//   with the host's address (masquerade), as they did before namespaces.
// - Forward: into a namespace only what was translated to it (or answers
//   its own connections); nothing reaches a namespace's other ports
//   through the host. When the host did not forward before Basin (it was
//   not a router), nothing but traffic from or to a Basin veth is
//   forwarded at all.
// - Parked ports (a suspended service's: idle/) are translated to the
//   namespace's hostAddress instead, on the host's side, where Basin's
//   waker listens; the same port, so no other port of the host is reached.
// - Input: a host-side port reserved for a namespace (`hostPorts` on its
//   `hostAddress`) is reachable from that namespace (and the namespaces it
//   admits meanwhile: `hostGuests`) and from the host itself only;
//   everything else a namespace sends the host is as before.
// - Not tracked (raw, before connection tracking): a connection from this
//   host straight to a namespace's address on one of its ports, from the
//   veth's own address (the gateway) and a client port in
//   DIRECT_CLIENT_PORTS: a local client the eBPF redirect gave the address
//   (connect-redirect.ts), HAProxy's to its backends. Such a connection
//   needs no translation, and tracking it was most of what is left of a
//   namespace's cost (docs/decisions.md, Service networks). Its answers are
//   told apart from those of translated connections, which have the same
//   addresses, by the client port alone: the masquerade into a namespace
//   gives TCP sources TRANSLATED_PORTS, never DIRECT_CLIENT_PORTS. A
//   namespace's own SYNs are always tracked (what it opens towards the host
//   is translated as before), and a packet to a port that leads into a
//   namespace too. Untracked packets are local ones (to or from the host's
//   side of a veth): the forward chain still drops every untracked packet
//   bound for a namespace.

import { VETH_PREFIX } from './addresses.js';

/**
 * Client ports of a connection from this host to a namespace's address that
 * is not tracked: Linux's default ephemeral range (32768-60999) and above.
 * A client bound elsewhere is tracked, as before.
 */
export const DIRECT_CLIENT_PORTS = '32768-65535';
/** Source ports the masquerade into a namespace gives TCP: disjoint from DIRECT_CLIENT_PORTS. */
export const TRANSLATED_PORTS = '1024-32767';

/** One namespace, as the table needs it. */
export interface TableNamespace {
  id: string;
  veth: string;
  address: string;
  hostAddress: string;
  /** Host ports that lead into it (DNAT to its address, same port). */
  ports: readonly number[];
  /**
   * Those of its ports that lead to its hostAddress instead, same port:
   * where Basin's waker listens while the service is suspended (idle/).
   */
  parked?: readonly number[];
  /** A read replica set's service (its id): connections to it are SNATed to the service's gateway. */
  streamsFrom?: string;
  /** Ports on its hostAddress that only it (and the host) may reach… */
  hostPorts: readonly number[];
  /** …and these other namespaces (a fork's, while it restores from its parent's repository). */
  hostGuests?: readonly string[];
}

export interface TableSpec {
  installation: string;
  /** The service network, e.g. 198.18.0.0/15. */
  block: string;
  /** The host did not forward before Basin: forward nothing but Basin's. */
  restrictForwarding: boolean;
  namespaces: readonly TableNamespace[];
}

/** The table's name: one per installation. */
export const tableName = (installation: string) => `basin-${installation}`;

/** What `nft -f` takes to remove the table (made first, so a missing one is no error). */
export function dropTable(installation: string): string {
  const t = tableName(installation);
  return `table ip ${t} {}\ndelete table ip ${t}\n`;
}

const byIdOrder = <T extends { id: string }>(list: readonly T[]) =>
  [...list].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

/**
 * The ports that lead into a namespace, each to its address: the first
 * namespace in id order that claims a port has it (see renderTable). The
 * table's DNAT and the local redirect (connect-redirect.ts) both use this.
 */
export function forwardedPorts(
  namespaces: readonly Pick<
    TableNamespace,
    'id' | 'ports' | 'address' | 'hostAddress' | 'parked'
  >[],
): Map<number, string> {
  const ports = new Map<number, string>();
  for (const n of byIdOrder(namespaces)) {
    for (const p of n.ports) {
      if (!ports.has(p)) ports.set(p, n.parked?.includes(p) ? n.hostAddress : n.address);
    }
  }
  return ports;
}

/**
 * The whole table. A port claimed by two namespaces (which ServiceNetworks
 * never records) goes to the first in id order, so that one bad record
 * cannot make the whole table fail to load.
 */
export function renderTable(spec: TableSpec): string {
  const t = tableName(spec.installation);
  const namespaces = byIdOrder(spec.namespaces);
  const byId = new Map(namespaces.map((n) => [n.id, n]));
  const ports = forwardedPorts(namespaces);
  const pairs: string[] = [];
  for (const n of namespaces) {
    pairs.push(`${n.address} . ${n.address}`);
    const service = n.streamsFrom === undefined ? undefined : byId.get(n.streamsFrom);
    if (service) pairs.push(`${n.address} . ${service.address}`);
  }
  const direct = namespaces.flatMap((n) =>
    [...new Set(n.ports)].map((p) => `"${n.veth}" . ${n.address} . ${n.hostAddress} . ${p}`),
  );
  const reserved = namespaces.flatMap((n) => n.hostPorts.map((p) => `${n.hostAddress} . ${p}`));
  const reservedFor = namespaces.flatMap((n) => {
    const admitted = [n, ...(n.hostGuests ?? []).flatMap((g) => byId.get(g) ?? [])];
    return n.hostPorts.flatMap((p) =>
      admitted.map((a) => `"${a.veth}" . ${a.address} . ${n.hostAddress} . ${p}`),
    );
  });
  const set = (name: string, type: string, elements: string[]) => [
    `\tset ${name} {`,
    `\t\ttype ${type}`,
    ...(elements.length > 0 ? [`\t\telements = { ${elements.join(', ')} }`] : []),
    '\t}',
  ];
  const map = [
    '\tmap ports {',
    '\t\ttype inet_service : ipv4_addr',
    ...(ports.size > 0
      ? [
          `\t\telements = { ${[...ports]
            .sort(([a], [b]) => a - b)
            .map(([p, a]) => `${p} : ${a}`)
            .join(', ')} }`,
        ]
      : []),
    '\t}',
  ];
  const chain = (name: string, hook: string | undefined, rules: string[]) => [
    `\tchain ${name} {`,
    ...(hook ? [`\t\t${hook}`] : []),
    ...rules.map((r) => `\t\t${r}`),
    '\t}',
  ];
  const dnat = 'fib daddr type local dnat ip to tcp dport map @ports';
  const basin = `"${VETH_PREFIX}*"`;
  return [
    `table ip ${t} {}`,
    `delete table ip ${t}`,
    `table ip ${t} {`,
    ...set(
      'veths',
      'ifname',
      namespaces.map((n) => `"${n.veth}"`),
    ),
    ...map,
    ...set('snat_pairs', 'ipv4_addr . ipv4_addr', pairs),
    ...set('reserved', 'ipv4_addr . inet_service', reserved),
    ...set('direct', 'ifname . ipv4_addr . ipv4_addr . inet_service', direct),
    ...set('forwarded', 'inet_service', [...ports.keys()].sort((a, b) => a - b).map(String)),
    ...set('reserved_for', 'ifname . ipv4_addr . ipv4_addr . inet_service', reservedFor),
    // Every packet of the host would pass these: only while some port leads
    // into a namespace. In: the namespace's answers (a pure SYN is its own
    // connection), not to a port that leads into a namespace. Out: to its
    // address and port, from a client port of the range.
    ...(direct.length === 0
      ? []
      : [
          ...chain('notrack_in', 'type filter hook prerouting priority raw; policy accept;', [
            `tcp dport ${DIRECT_CLIENT_PORTS} tcp flags & (syn | ack) != syn iifname . ip saddr . ip daddr . tcp sport @direct tcp dport != @forwarded notrack`,
          ]),
          ...chain('notrack_out', 'type filter hook output priority raw; policy accept;', [
            `tcp sport ${DIRECT_CLIENT_PORTS} oifname . ip daddr . ip saddr . tcp dport @direct notrack`,
          ]),
        ]),
    ...chain('prerouting', 'type nat hook prerouting priority -100; policy accept;', [dnat]),
    ...chain('output', 'type nat hook output priority -100; policy accept;', [dnat]),
    ...chain('postrouting', 'type nat hook postrouting priority 100; policy accept;', [
      // TCP into a namespace from TRANSLATED_PORTS (see notrack_in).
      `oifname @veths ip saddr 127.0.0.0/8 meta l4proto tcp masquerade to :${TRANSLATED_PORTS}`,
      'oifname @veths ip saddr 127.0.0.0/8 masquerade',
      `oifname @veths ip saddr . ip daddr @snat_pairs meta l4proto tcp masquerade to :${TRANSLATED_PORTS}`,
      'oifname @veths ip saddr . ip daddr @snat_pairs masquerade',
      `ip saddr ${spec.block} oifname != ${basin} masquerade`,
    ]),
    // Every packet the host receives would pass an input hook: only while
    // some port is reserved.
    ...(reserved.length === 0
      ? []
      : [
          ...chain('input', 'type filter hook input priority 0; policy accept;', [
            'ip daddr . tcp dport @reserved jump reserved',
          ]),
          ...chain('reserved', undefined, [
            'iif "lo" accept',
            'iifname . ip saddr . ip daddr . tcp dport @reserved_for accept',
            'reject with tcp reset',
          ]),
        ]),
    ...chain('forward', 'type filter hook forward priority 0; policy accept;', [
      'oifname @veths ct state established,related accept',
      'oifname @veths ct status dnat accept',
      'oifname @veths drop',
      ...(spec.restrictForwarding
        ? [`iifname ${basin} accept`, `oifname ${basin} accept`, 'drop']
        : []),
    ]),
    '}',
    '',
  ].join('\n');
}
