// What ServiceNetworks.start does before it loads the table
// (service-networks.ts): whether the host can give services namespaces at
// all (a probe), which records can keep their pair, and the sweep of the
// namespaces and veths of services and sets that are gone (Basin killed
// between a delete's steps, or the service removed while Basin was down).

import type { Logger } from '../../../lib/logger.js';
import { onPath, run } from '../host/exec.js';
import type { Layout } from '../layout.js';
import { exists } from '../node/node-files.js';
import { isRoot } from '../host/os-user.js';
import { type Block, capacity, namespaceName, vethAliasOf, vethName } from './addresses.js';
import { hostVeths, namespacesNamed, removeNamespace } from './namespace.js';
import type { NetworkRecord } from './records.js';

const TOOLS = ['ip', 'nft', 'ss', 'nsenter'];

/** Why this host cannot give services namespaces, if it cannot (a probe, named like a namespace of this installation). */
export async function whyUnusable(installation: string): Promise<string | undefined> {
  if (!isRoot()) return 'Basin does not run as root, and only root can make network namespaces';
  const missing = TOOLS.filter((t) => !onPath(t));
  if (missing.length > 0) return `${missing.join(', ')} cannot be found`;
  const probe = namespaceName(installation, 'probe');
  try {
    await run('ip', ['netns', 'add', probe], { timeoutMs: 10_000 });
    await run('ip', [
      '-n',
      probe,
      'link',
      'add',
      'probe0',
      'type',
      'veth',
      'peer',
      'name',
      'probe1',
    ]);
    await run('nft', ['-c', '-f', '-'], { timeoutMs: 10_000, input: PROBE_TABLE });
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await removeNamespace(probe, 'probe0').catch(() => {});
  }
}

/** What the probe checks nftables can do (without loading it): NAT by a map, fib, masquerade. */
const PROBE_TABLE = [
  'table ip basin-probe {',
  '\tmap ports { type inet_service : ipv4_addr; }',
  '\tchain output {',
  '\t\ttype nat hook output priority -100; policy accept;',
  '\t\tfib daddr type local dnat ip to tcp dport map @ports',
  '\t}',
  '\tchain postrouting {',
  '\t\ttype nat hook postrouting priority 100; policy accept;',
  '\t\tip saddr 127.0.0.0/8 masquerade',
  '\t}',
  '}',
  '',
].join('\n');

/** Records whose slot lies outside the block (it was changed) or is another's: given a new one at their next ensure. */
export function dropUnusable(block: Block, records: Map<string, NetworkRecord>): void {
  const seen = new Set<number>();
  for (const id of [...records.keys()].sort()) {
    const r = records.get(id) as NetworkRecord;
    if (r.slot >= capacity(block) || seen.has(r.slot)) records.delete(id);
    else seen.add(r.slot);
  }
}

/** Namespaces and veths of this installation whose service or set is gone (its instance directory). */
export async function sweep(
  o: { layout: Layout; installation: string; log: Logger },
  records: Map<string, NetworkRecord>,
): Promise<void> {
  const gone = async (id: string) => !records.has(id) && !(await exists(o.layout.instanceDir(id)));
  const removed: string[] = [];
  const prefix = namespaceName(o.installation, '');
  for (const name of await namespacesNamed(prefix)) {
    const id = name.slice(prefix.length);
    if (!/^[a-z0-9]{1,32}$/.test(id) || !(await gone(id))) continue;
    await removeNamespace(name, vethName(o.installation, id));
    removed.push(name);
  }
  for (const v of await hostVeths()) {
    const of = vethAliasOf(v.alias);
    if (of?.installation !== o.installation || !(await gone(of.id))) continue;
    await removeNamespace(namespaceName(o.installation, of.id), v.name);
    removed.push(v.name);
  }
  if (removed.length > 0) {
    o.log.info({ removed }, 'removed the network namespaces of services that are gone');
  }
}
