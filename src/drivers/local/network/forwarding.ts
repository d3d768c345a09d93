// IPv4 forwarding, which the namespaces need: a client on another host
// reaches a namespace through this host (its connection is translated,
// then forwarded), and a read replica set's namespace reaches its
// service's. Linux decides by the interface a packet came in on, so the
// host's own interfaces must forward, which is `net.ipv4.ip_forward`.
//
// A host that did not forward before Basin must not silently become a
// router: the first Basin that turns forwarding on leaves a mark in /run
// (host-wide, gone at reboot with the setting itself), and every
// installation's table then forwards only what comes from or goes to a
// Basin veth (nft-table.ts, restrictForwarding). When the last Basin table
// is removed (an installation's clean-up: tests, benchmarks;
// remove-installation.ts), forwarding goes back off. docs/decisions.md,
// Service networks.

import { mkdir, readFile, writeFile } from 'node:fs/promises';

const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';
const MARK_DIR = '/run/basin';
/** Present while Basin keeps forwarding on, on a host that did not forward before it. */
export const FORWARDING_MARK = `${MARK_DIR}/ip-forward-was-off`;

/**
 * Turns forwarding on if it is off; returns whether the host forwarded
 * before any Basin did (false: forward only Basin's traffic).
 */
export async function ensureForwarding(): Promise<{ hostForwarded: boolean }> {
  const marked = await exists(FORWARDING_MARK);
  const on = (await readFile(IP_FORWARD, 'utf8')).trim() === '1';
  if (on) return { hostForwarded: !marked };
  if (!marked) {
    await mkdir(MARK_DIR, { recursive: true, mode: 0o755 });
    await writeFile(FORWARDING_MARK, 'Basin turned net.ipv4.ip_forward on; it was off.\n', {
      mode: 0o644,
    });
  }
  await writeFile(IP_FORWARD, '1');
  return { hostForwarded: false };
}

async function exists(path: string): Promise<boolean> {
  try {
    await readFile(path);
    return true;
  } catch {
    return false;
  }
}
