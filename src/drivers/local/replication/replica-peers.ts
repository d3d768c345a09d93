// The read replica sets across hosts a service's primary streams to
// (docs/decisions.md, "Read replica sets across hosts"): for each set, the
// addresses of the hosts of its nodes, from which the primary's pg_hba
// admits the replication role (a namespace's connections out leave with
// its host's address). Root's file beside the service's nodes
// (instances/<id>/replica-peers.json): the control plane says it once
// (admitReplicaSet), and every later converge of the service, whatever
// asked for it, writes the same pg_hba from it.

import { readFile } from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import { join } from 'node:path';
import type { Layout } from '../layout.js';
import { mkdirIn, writeRootFile } from '../node/node-files.js';

/** Each set's host addresses, by set id. */
export type ReplicaPeers = Record<string, string[]>;

const file = (layout: Layout, serviceId: string) =>
  join(layout.instanceDir(serviceId), 'replica-peers.json');

/** What the file says; nothing when it is absent or not what Basin writes. */
export async function readReplicaPeers(layout: Layout, serviceId: string): Promise<ReplicaPeers> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file(layout, serviceId), 'utf8'));
  } catch {
    return {};
  }
  const out: ReplicaPeers = {};
  if (typeof parsed !== 'object' || parsed === null) return out;
  for (const [id, addrs] of Object.entries(parsed as Record<string, unknown>)) {
    if (!/^[a-z0-9]{1,32}$/.test(id) || !Array.isArray(addrs)) continue;
    out[id] = addrs.filter((a): a is string => typeof a === 'string' && isAddress(a));
  }
  return out;
}

/** The set's addresses (none: the set is gone), written when they change. */
export async function writeReplicaPeers(
  layout: Layout,
  serviceId: string,
  setId: string,
  addresses: readonly string[],
): Promise<void> {
  for (const a of addresses) {
    if (!isAddress(a)) throw new Error(`not an address: ${a}`);
  }
  const peers = await readReplicaPeers(layout, serviceId);
  if (addresses.length === 0) delete peers[setId];
  else peers[setId] = [...new Set(addresses)].sort();
  await mkdirIn(layout.instanceDir(serviceId), 0o711);
  await writeRootFile(file(layout, serviceId), `${JSON.stringify(peers)}\n`, {
    name: 'root',
    uid: 0,
    gid: 0,
  });
}

/** Every set's addresses as pg_hba rows' addresses (/32, /128). */
export function peerCidrs(peers: ReplicaPeers): string[] {
  const all = new Set(Object.values(peers).flat());
  return [...all].sort().map((a) => (isIPv6(a) ? `${a}/128` : `${a}/32`));
}

const isAddress = (a: string) => isIPv4(a) || isIPv6(a);
