// Everything of an installation's networks, removed at once: for the tools
// and tests that clean up after an installation (test/local/helpers.ts,
// bench/local-basin.ts), never in normal operation (a deleted service's
// go with it; a dead installation's are swept by nothing else).
// Synchronous, for exit handlers that cannot wait for a promise.

import { execFileSync, type ExecFileSyncOptionsWithStringEncoding } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { contains, namespaceName, parseCidr, vethAliasOf, vethName } from './addresses.js';
import { removeConnectRedirect } from './connect-redirect.js';
import { FORWARDING_MARK } from './forwarding.js';
import { dropTable } from './nft-table.js';

// `ip link show` warns on stderr about veths whose peer's namespace another
// program is making or removing right then; the JSON on stdout is whole.
const QUIET: ExecFileSyncOptionsWithStringEncoding = {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'ignore'],
};

/** Removes the namespaces, veths and table of `installation`; forwarding goes back off if Basin turned it on and no Basin table is left. */
export function removeInstallationNetwork(installation: string): void {
  const ip = (...args: string[]) => {
    try {
      execFileSync('ip', args, { stdio: 'pipe' });
    } catch {
      // gone already
    }
  };
  const prefix = namespaceName(installation, '');
  let names: string[] = [];
  try {
    names = readdirSync('/run/netns').filter((n) => n.startsWith(prefix));
  } catch {
    // none
  }
  for (const name of names) {
    ip('link', 'del', vethName(installation, name.slice(prefix.length)));
    ip('netns', 'del', name);
    rmSync(`/run/netns/${name}`, { force: true });
  }
  try {
    const links = JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'type', 'veth'], QUIET)) as {
      ifname: string;
      ifalias?: string;
    }[];
    for (const l of links) {
      if (vethAliasOf(l.ifalias ?? '')?.installation === installation) ip('link', 'del', l.ifname);
    }
  } catch {
    // no ip: nothing was made
  }
  removeConnectRedirect(installation);
  try {
    execFileSync('nft', ['-f', '-'], { input: dropTable(installation), stdio: 'pipe' });
  } catch {
    // no nft: nothing was made
  }
  if (!existsSync(FORWARDING_MARK)) return;
  try {
    const tables = execFileSync('nft', ['list', 'tables', 'ip'], { encoding: 'utf8' });
    if (/^table ip basin-/m.test(tables)) return;
    if (readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() === '1') {
      writeFileSync('/proc/sys/net/ipv4/ip_forward', '0');
    }
    rmSync(FORWARDING_MARK, { force: true });
    rmdirSync(dirname(FORWARDING_MARK));
  } catch {
    // leave it as it is
  }
}

/**
 * Removes, as removeInstallationNetwork, every installation that has a
 * veth with an address in `block`, or a table that names one: a test or
 * benchmark that claimed the block clears what a killed predecessor on it
 * left (its data directory, and so its tag, may be gone already). A table
 * outlives its veths when its installation was killed between the two:
 * its `reserved` rule then answers the new namespace's first connection to
 * its repository server's port with a reset, and pgBackRest retried it
 * until its command was killed (a create that sat in CONFIGURING, in CI).
 * Returns their tags.
 */
export function removeNetworksIn(block: string): string[] {
  const json = (...args: string[]) => JSON.parse(execFileSync('ip', args, QUIET));
  let veths: { ifname: string; ifalias?: string }[];
  let addrs: { ifname: string; addr_info?: { local?: string }[] }[];
  try {
    veths = json('-j', 'link', 'show', 'type', 'veth');
    addrs = json('-j', '-4', 'addr', 'show');
  } catch {
    return [];
  }
  const b = parseCidr(block);
  const tags = new Set<string>();
  for (const v of veths) {
    const of = vethAliasOf(v.ifalias ?? '');
    const shown = addrs.find((a) => a.ifname === v.ifname)?.addr_info ?? [];
    if (of && shown.some((a) => a.local !== undefined && contains(b, a.local))) {
      tags.add(of.installation);
    }
  }
  for (const tag of tablesNaming(b)) tags.add(tag);
  for (const tag of tags) removeInstallationNetwork(tag);
  return [...tags];
}

/** The installations whose Basin table names an address in `b`. */
function tablesNaming(b: ReturnType<typeof parseCidr>): string[] {
  let tables: string;
  try {
    tables = execFileSync('nft', ['list', 'tables', 'ip'], QUIET);
  } catch {
    return []; // no nft: nothing was made
  }
  const tags: string[] = [];
  for (const [, tag] of tables.matchAll(/^table ip basin-([0-9a-f]{16})$/gm)) {
    let text = '';
    try {
      text = execFileSync('nft', ['list', 'table', 'ip', `basin-${tag}`], QUIET);
    } catch {
      continue; // removed meanwhile
    }
    // Addresses, not blocks: a live installation's rules name its own block.
    const addresses = text.match(/\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b(?!\/)/g) ?? [];
    if (addresses.some((a) => contains(b, a))) tags.push(tag as string);
  }
  return tags;
}
