// etcd's leader kept off the hosts of Patroni's primaries (docs/decisions.md,
// "HA across hosts", Patroni's timing; the rule: domain/etcd-leader.ts).
// The control plane, etcd's root, reads who leads each service's cluster
// from Patroni's own keys, asks each member whether it leads etcd, and when
// a member whose host runs fewer primaries could lead, hands etcd's
// leadership to it (`etcdctl move-leader`, sent to the leader's endpoint:
// etcd transfers only from the leader, once the target caught up).

import {
  etcdLeaderTarget,
  type EtcdLeaderMember,
  primariesByAddress,
} from '../domain/etcd-leader.js';
import { PATRONI_ETCD_NAMESPACE } from '../domain/etcd.js';
import type { Logger } from '../lib/logger.js';
import { type EtcdClient, etcdctl, endpointStatus, type EtcdMember } from './etcdctl.js';

/** Every key under Patroni's namespace, as `etcdctl get --prefix -w json` gives them (base64). */
async function patroniKeys(client: EtcdClient): Promise<{ key: string; value: string }[]> {
  const out = await etcdctl(client, ['get', PATRONI_ETCD_NAMESPACE, '--prefix', '-w', 'json']);
  const kvs = (JSON.parse(out) as { kvs?: { key?: string; value?: string }[] }).kvs ?? [];
  const text = (b64: string | undefined) => Buffer.from(b64 ?? '', 'base64').toString('utf8');
  return kvs.map((kv) => ({ key: text(kv.key), value: text(kv.value) }));
}

/**
 * One look: moves etcd's leadership when its leader's host runs more
 * Patroni leaders than another healthy member's. Returns the member it was
 * moved to, or undefined. Throws what etcdctl says when a step fails (the
 * next pass looks again).
 */
export async function placeEtcdLeader(
  o: { log: Logger },
  client: EtcdClient,
  members: readonly EtcdMember[],
): Promise<string | undefined> {
  const urls = members.map((m) => m.clientUrls[0]).filter((u): u is string => u !== undefined);
  const status = await endpointStatus(client, urls);
  const seen: EtcdLeaderMember[] = members.flatMap((m) => {
    const url = m.clientUrls[0];
    const st = status.find((s) => s.endpoint === url);
    if (url === undefined || st === undefined) return [];
    return [{ id: m.id, address: new URL(url).hostname.replace(/^\[(.*)\]$/, '$1'), healthy: st.healthy, leader: st.leader }]; // prettier-ignore
  });
  const leader = seen.find((m) => m.leader);
  // Nothing to weigh without a leader, or with no other member that answers.
  if (!leader || !seen.some((m) => m.healthy && !m.leader)) return undefined;
  const primaries = primariesByAddress(PATRONI_ETCD_NAMESPACE, await patroniKeys(client));
  const target = etcdLeaderTarget(seen, primaries);
  if (target === undefined) return undefined;
  const leaderUrl = members.find((m) => m.id === leader.id)?.clientUrls[0] as string;
  await etcdctl({ ...client, endpoints: [leaderUrl] }, ['move-leader', target]);
  const to = seen.find((m) => m.id === target) as EtcdLeaderMember;
  o.log.info(
    {
      from: leader.address,
      to: to.address,
      primaries: { from: primaries.get(leader.address) ?? 0, to: primaries.get(to.address) ?? 0 },
    },
    "etcd: moved etcd's leadership to a member whose host runs fewer primaries",
  );
  return target;
}
