// Pure rules of the services' networks (docs/decisions.md, Service networks):
// the block of addresses Basin gives them, the /31 pair of each namespace,
// and the names of the namespace and of its veth. No I/O here, so every
// rule is unit-tested (addresses.test.ts).
//
// Each namespace gets slot k of the block: the pair base + 2k (the host
// side of its veth, the namespace's gateway: `hostAddress`) and
// base + 2k + 1 (the namespace side, `eth0` inside: `address`), a /31
// point-to-point link (RFC 3021) that wastes no address on a network or
// broadcast address.

import { createHash } from 'node:crypto';
import { isIPv4 } from 'node:net';

/** Basin's default block: RFC 2544's benchmarking space (neither RFC 1918, which VPCs use, nor 100.64/10). */
export const DEFAULT_SERVICE_NETWORK = '198.18.0.0/15';

/** An IPv4 block, as numbers. */
export interface Block {
  /** The block as given, e.g. 198.18.0.0/15. */
  cidr: string;
  base: number;
  prefix: number;
}

/** A namespace's pair of addresses. */
export interface Pair {
  /** The host side of its veth: its gateway. */
  hostAddress: string;
  /** Its own address, inside. */
  address: string;
}

/** Blocks a service network may not touch: this host, "this network", multicast and above. */
const FORBIDDEN = ['0.0.0.0/8', '127.0.0.0/8', '169.254.0.0/16', '224.0.0.0/3'];

/**
 * `text` as a block, or an Error whose message says what is wrong: an IPv4
 * block, no host bits set, /8 to /30 (two namespaces at least), clear of
 * loopback, link-local and multicast.
 */
export function parseBlock(text: string): Block {
  const m = /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/.exec(text.trim());
  if (!m || !isIPv4(m[1] as string)) {
    throw new Error(
      `${JSON.stringify(text)} is not an IPv4 block such as ${DEFAULT_SERVICE_NETWORK}`,
    );
  }
  const prefix = Number(m[2]);
  if (prefix < 8 || prefix > 30) {
    throw new Error(`${text}: the prefix must be /8 to /30 (each namespace takes two addresses)`);
  }
  const base = toNumber(m[1] as string);
  if ((base & hostMask(prefix)) >>> 0 !== 0) {
    const network = toAddress((base & ~hostMask(prefix)) >>> 0);
    throw new Error(`${text} has host bits set: did you mean ${network}/${prefix}?`);
  }
  const block = { cidr: `${m[1]}/${prefix}`, base, prefix };
  const bad = FORBIDDEN.find((f) => overlaps(block, parseCidr(f)));
  if (bad) throw new Error(`${text} overlaps ${bad}, which a service network may not use`);
  return block;
}

/** How many namespaces the block holds. */
export const capacity = (b: Block): number => 2 ** (32 - b.prefix) / 2;

/** The pair of slot `slot` (0 ≤ slot < capacity). */
export function pairOf(b: Block, slot: number): Pair {
  if (!Number.isInteger(slot) || slot < 0 || slot >= capacity(b)) {
    throw new Error(`slot ${slot} lies outside ${b.cidr}`);
  }
  const host = b.base + 2 * slot;
  return { hostAddress: toAddress(host), address: toAddress(host + 1) };
}

/** The lowest slot not in `used`; undefined when the block is full. */
export function lowestFreeSlot(b: Block, used: ReadonlySet<number>): number | undefined {
  const n = capacity(b);
  for (let s = 0; s < n; s++) if (!used.has(s)) return s;
  return undefined;
}

/** The network namespace of `id` (`ip netns`): basin-<installation>-<id>. */
export const namespaceName = (installation: string, id: string) => `basin-${installation}-${id}`;

/** Its file, the one `nsenter --net=` takes. */
export const namespacePath = (name: string) => `/run/netns/${name}`;

/** The prefix of every Basin installation's host-side veths (the forward chain knows them all by it). */
export const VETH_PREFIX = 'bsn';

/**
 * The host side of the namespace's veth: `bsn` and 12 hex digits of a hash
 * of installation and id, 15 characters (the kernel's limit), unique per
 * installation and id. Its alias (`ip link … alias`) names both in full.
 */
export function vethName(installation: string, id: string): string {
  const h = createHash('sha256').update(`${installation}:${id}`).digest('hex').slice(0, 12);
  return `${VETH_PREFIX}${h}`;
}

/** The alias of the veth of `id`: how a sweep recognises this installation's (vethAliasOf reads it back). */
export const vethAlias = (installation: string, id: string) => `basin ${installation} ${id}`;

/** The installation and id an alias names, if it is one of Basin's. */
export function vethAliasOf(alias: string): { installation: string; id: string } | undefined {
  const m = /^basin ([0-9a-f]{16}) ([a-z0-9]{1,32})$/.exec(alias);
  return m ? { installation: m[1] as string, id: m[2] as string } : undefined;
}

/** A CIDR (or a bare address: /32) as a Block, without parseBlock's rules. */
export function parseCidr(text: string): Block {
  const [addr = '', len] = text.split('/');
  if (!isIPv4(addr)) throw new Error(`not an IPv4 address or block: ${text}`);
  const prefix = len === undefined ? 32 : Number(len);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > 32)
    throw new Error(`bad prefix: ${text}`);
  return { cidr: text, base: (toNumber(addr) & ~hostMask(prefix)) >>> 0, prefix };
}

/** Whether two blocks share an address. */
export function overlaps(a: Block, b: Block): boolean {
  const prefix = Math.min(a.prefix, b.prefix);
  const mask = ~hostMask(prefix) >>> 0;
  return (a.base & mask) >>> 0 === (b.base & mask) >>> 0;
}

/** Whether the address lies in the block. */
export const contains = (b: Block, address: string) => overlaps(b, parseCidr(address));

const hostMask = (prefix: number) => (prefix === 0 ? 0xffffffff : 2 ** (32 - prefix) - 1);

function toNumber(address: string): number {
  return address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

function toAddress(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}
