// IPv4 CIDR blocks for VPCs. A VPC is a private network, so its block must be
// an RFC 1918 range, aligned to its prefix, between /16 and /28.

import { invalid } from './errors.js';

export interface Cidr {
  network: number;
  prefix: number;
}

const PRIVATE_RANGES: readonly Cidr[] = [
  { network: ip(10, 0, 0, 0), prefix: 8 },
  { network: ip(172, 16, 0, 0), prefix: 12 },
  { network: ip(192, 168, 0, 0), prefix: 16 },
];

export const MIN_PREFIX = 16;
export const MAX_PREFIX = 28;

/** Parses and checks a VPC CIDR block; returns it in canonical form. */
export function parseVpcCidr(text: string): Cidr {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(text);
  const octets = m ? m.slice(1, 5).map(Number) : [];
  const prefix = m ? Number(m[5]) : NaN;
  if (
    !m ||
    octets.some((o) => o > 255) ||
    m.slice(1, 5).some((o) => o.length > 1 && o.startsWith('0'))
  ) {
    throw invalid(`cidr must be an IPv4 block like 10.0.0.0/16; got ${JSON.stringify(text)}.`);
  }
  if (prefix < MIN_PREFIX || prefix > MAX_PREFIX) {
    throw invalid(`cidr prefix must be between /${MIN_PREFIX} and /${MAX_PREFIX}; got /${prefix}.`);
  }
  const [a, b, c, d] = octets as [number, number, number, number];
  const network = ip(a, b, c, d);
  if ((network & mask(prefix)) >>> 0 !== network) {
    const aligned = format({ network: (network & mask(prefix)) >>> 0, prefix });
    throw invalid(`cidr ${text} has host bits set; did you mean ${aligned}?`);
  }
  const cidr = { network, prefix };
  if (!PRIVATE_RANGES.some((r) => contains(r, cidr))) {
    throw invalid(
      `cidr ${text} is not a private range; use a block inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16.`,
    );
  }
  return cidr;
}

export function format(c: Cidr): string {
  const n = c.network;
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/${c.prefix}`;
}

export function overlaps(a: Cidr, b: Cidr): boolean {
  const p = Math.min(a.prefix, b.prefix);
  return (a.network & mask(p)) >>> 0 === (b.network & mask(p)) >>> 0;
}

function contains(outer: Cidr, inner: Cidr): boolean {
  return (
    inner.prefix >= outer.prefix && (inner.network & mask(outer.prefix)) >>> 0 === outer.network
  );
}

function mask(prefix: number): number {
  return prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
}

function ip(a: number, b: number, c: number, d: number): number {
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
}
