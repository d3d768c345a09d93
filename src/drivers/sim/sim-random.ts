// Seeded randomness for the sim driver. Everything the sim makes up (log
// entries, metrics) is a pure function of a resource id, a position and the
// clock, so that two calls (or two servers) agree and tests are reproducible
// without storing anything.

/** A source of numbers in [0, 1). */
export type Rng = () => number;

/** FNV-1a, 32 bits: a cheap, well-spread hash of a string. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Combines a 32-bit seed with an integer (which may exceed 32 bits or be
 * negative) into a new well-mixed seed (murmur3's finaliser).
 */
export function mixSeed(seed: number, n: number): number {
  const high = Math.floor(n / 0x100000000);
  let h = (seed ^ Math.imul(n | 0, 0x9e3779b1) ^ Math.imul(high | 0, 0x85ebca77)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** mulberry32: a tiny, fast PRNG with good enough statistics for fake data. */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [lo, hi], both included. */
export function int(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** One member of a non-empty list. */
export function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)] as T;
}
