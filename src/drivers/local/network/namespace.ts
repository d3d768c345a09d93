// Making and removing one namespace and its veth, with iproute2 (`ip`),
// as root. Every step is idempotent and checked from what the kernel has,
// so a crash anywhere (Basin's, or the host's reboot: /run/netns is gone
// then, and so are the namespaces) is mended by the next ensure.
//
//   host:      <veth> (bsn…), <hostAddress>/31, up, alias "basin <tag> <id>",
//              route_localnet and forwarding on, IPv6 off
//   namespace: lo up; eth0 (the veth's peer), <address>/31, up;
//              default route via <hostAddress>
// https://man7.org/linux/man-pages/man8/ip-netns.8.html

import { statfs } from 'node:fs/promises';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { run } from '../host/exec.js';

/** nsfs's magic number (statfs(2)): a namespace file that is mounted, not a stale file. */
const NSFS_MAGIC = 0x6e736673;

export interface NamespaceSpec {
  name: string;
  path: string;
  veth: string;
  alias: string;
  hostAddress: string;
  address: string;
}

/** Whether `path` is a live namespace (an nsfs mount), not a stale file or nothing. */
export async function isNamespace(path: string): Promise<boolean> {
  try {
    return (await statfs(path)).type === NSFS_MAGIC;
  } catch {
    return false;
  }
}

/** Makes (or mends) the namespace, its veth and their addresses and routes. */
export async function ensureNamespace(s: NamespaceSpec): Promise<void> {
  if (!(await isNamespace(s.path))) {
    // A file left without its mount (a host whose /run outlives a reboot).
    await rm(s.path, { force: true });
    await run('ip', ['netns', 'add', s.name]);
  }
  const inside = (...args: string[]) => run('ip', ['-n', s.name, ...args]);
  if (!(await hasLink(s.veth)) || !(await hasLink('eth0', s.name))) {
    // Half a pair (the namespace was made again): both ends go, one pair is made.
    await run('ip', ['link', 'del', s.veth]).catch(() => {});
    await inside('link', 'del', 'eth0').catch(() => {});
    await run('ip', [
      'link',
      'add',
      s.veth,
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      s.name,
    ]);
  }
  await run('ip', ['link', 'set', 'dev', s.veth, 'alias', s.alias]);
  // A loopback source (psql host=127.0.0.1, DNATed) may leave through it, to be SNATed;
  // a namespace's traffic is forwarded (to its service, out of the host).
  const conf = `/proc/sys/net/ipv4/conf/${s.veth}`;
  await writeFile(`${conf}/route_localnet`, '1');
  await writeFile(`${conf}/forwarding`, '1');
  await writeFile(`/proc/sys/net/ipv6/conf/${s.veth}/disable_ipv6`, '1').catch(() => {});
  await ensureAddress(s.veth, `${s.hostAddress}/31`);
  await run('ip', ['link', 'set', 'dev', s.veth, 'up']);
  await inside('link', 'set', 'dev', 'lo', 'up');
  await ensureAddress('eth0', `${s.address}/31`, s.name);
  await inside('link', 'set', 'dev', 'eth0', 'up');
  await inside('route', 'replace', 'default', 'via', s.hostAddress, 'dev', 'eth0');
}

/** Removes the veth (both ends) and the namespace; what is gone already is no error. */
export async function removeNamespace(name: string, veth: string): Promise<void> {
  // The veth first: were the namespace still held (a process in it), its
  // end, and so the host's, would otherwise live on with the address.
  await run('ip', ['link', 'del', veth]).catch(() => {});
  await run('ip', ['netns', 'del', name]).catch(() => {});
  await rm(`/run/netns/${name}`, { force: true }).catch(() => {});
}

/** The names in /run/netns that start with `prefix`. */
export async function namespacesNamed(prefix: string): Promise<string[]> {
  try {
    return (await readdir('/run/netns')).filter((n) => n.startsWith(prefix));
  } catch {
    return [];
  }
}

/** The host's veths with their alias. */
export async function hostVeths(): Promise<{ name: string; alias: string }[]> {
  const links = JSON.parse(await run('ip', ['-j', 'link', 'show', 'type', 'veth'])) as {
    ifname: string;
    ifalias?: string;
  }[];
  return links.map((l) => ({ name: l.ifname.replace(/@.*$/, ''), alias: l.ifalias ?? '' }));
}

/** Whether something listens on TCP `port` in namespace `name` (any address). */
export async function listensIn(name: string, port: number): Promise<boolean> {
  const out = await run('ss', ['-N', name, '-Hltn', `sport = :${port}`]);
  return out.trim() !== '';
}

async function hasLink(dev: string, netns?: string): Promise<boolean> {
  try {
    await run('ip', [...(netns ? ['-n', netns] : []), 'link', 'show', 'dev', dev]);
    return true;
  } catch {
    return false;
  }
}

/** `dev` has exactly `cidr` as its IPv4 address (others removed). */
async function ensureAddress(dev: string, cidr: string, netns?: string): Promise<void> {
  const ip = (...args: string[]) => run('ip', [...(netns ? ['-n', netns] : []), ...args]);
  const shown = JSON.parse(await ip('-j', '-4', 'addr', 'show', 'dev', dev)) as {
    addr_info?: { local?: string; prefixlen?: number }[];
  }[];
  const have = (shown[0]?.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`);
  if (have.length === 1 && have[0] === cidr) return;
  if (have.length > 0) await ip('-4', 'addr', 'flush', 'dev', dev);
  await ip('addr', 'add', cidr, 'dev', dev);
}
