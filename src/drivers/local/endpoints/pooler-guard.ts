// Failed logins at a connection pooler, limited per client address
// (docs/decisions.md, Connection poolers; docs/security.md). PgBouncer
// checks a client's SCRAM proof itself, against its auth_file, so a wrong
// password there never reaches the server and its auth_delay: a guesser
// would get thousands of tries a second. PgBouncer 1.18 has no delay or
// limit of its own, but it logs every failed login with the client's
// address (pooler.log, root's). Basin reads what each pooler logged since
// the last look, counts the failed logins of each address over a sliding
// window, and an address with too many is refused by that pooler (a
// `reject` line first in its hba file, reloaded) for a while.
//
// The pure part is here: what a failed login looks like in the log, the
// counting, and the blocks. pooler.ts reads the log, keeps the blocks in
// its directory and renders them into hba.conf.

import { isIP } from 'node:net';

export interface LoginLimits {
  /** Failed logins of one address within `windowMs` that get it blocked. */
  maxFailures: number;
  windowMs: number;
  /** How long a blocked address is refused. */
  blockMs: number;
}

/**
 * 20 failed logins in a minute, then 5 minutes refused: a person who
 * mistypes, or a client deployed with an old password, is far below it
 * (each try of a retrying client costs it a connection); a guesser gets
 * at most 20 tries per 6 minutes from one address.
 */
export const POOLER_LOGIN_LIMITS: LoginLimits = {
  maxFailures: 20,
  windowMs: 60_000,
  blockMs: 300_000,
};

/**
 * A failed login in PgBouncer's log, e.g. (1.18)
 * `… ERROR C-0x55…: tsdb/tsdbadmin@10.1.2.3:40312 password authentication failed`
 * or `… LOG C-0x55…: (nodb)/(nouser)@[::1]:40312 no such user: bob`.
 */
const FAILED =
  /^\S+ \S+ \S+ \[\d+\] [A-Z]+ C-0x[0-9a-f]+: \S*@(\[[0-9a-fA-F:.]+\]|[0-9.]+):\d+ (?:password authentication failed|SASL authentication failed|no such user)/;

/** The client address of a log line that is a failed login, normalised; undefined for any other line. */
export function failedLoginAddress(line: string): string | undefined {
  const m = FAILED.exec(line);
  if (!m) return undefined;
  let addr = (m[1] as string).replace(/^\[|\]$/g, '');
  // An IPv4 client on an IPv6 socket.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  if (mapped) addr = mapped[1] as string;
  return isIP(addr) === 0 ? undefined : addr.toLowerCase();
}

/** Blocked addresses and until when (epoch ms). */
export type Blocks = Record<string, number>;

/**
 * The failed logins of one pooler, by address, within the window; an
 * address over the limit is blocked. Memory is bounded: at most
 * `maxFailures` times per address, and addresses without a failure in the
 * window are forgotten.
 */
export class FailedLogins {
  private readonly seen = new Map<string, number[]>();

  constructor(private readonly limits: LoginLimits) {}

  /**
   * Counts the failed logins in `lines` (at `now`) and returns `blocks`
   * with every address over the limit added and the expired ones gone.
   */
  note(lines: readonly string[], blocks: Blocks, now: number): Blocks {
    const { maxFailures, windowMs, blockMs } = this.limits;
    const next: Blocks = {};
    for (const [addr, until] of Object.entries(blocks)) {
      if (until > now && isIP(addr) !== 0) next[addr] = until;
    }
    for (const line of lines) {
      const addr = failedLoginAddress(line);
      if (addr === undefined || next[addr] !== undefined) continue;
      const times = (this.seen.get(addr) ?? []).filter((t) => t > now - windowMs);
      times.push(now);
      if (times.length >= maxFailures) {
        next[addr] = now + blockMs;
        this.seen.delete(addr);
      } else {
        this.seen.set(addr, times.slice(-maxFailures));
      }
    }
    for (const [addr, times] of this.seen) {
      if (!times.some((t) => t > now - windowMs)) this.seen.delete(addr);
    }
    return next;
  }
}

/** Whether two sets of blocks refuse the same addresses. */
export function sameAddresses(a: Blocks, b: Blocks): boolean {
  const x = Object.keys(a).sort();
  const y = Object.keys(b).sort();
  return x.length === y.length && x.every((k, i) => k === y[i]);
}
