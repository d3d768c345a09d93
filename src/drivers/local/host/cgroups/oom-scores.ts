// Whom the kernel kills first when memory runs out (oom_score_adj,
// docs/decisions.md, Memory and processes). The kernel picks the process
// with the highest score: its share of the memory it may use (the host's,
// or its cgroup's bound) in thousandths, plus its oom_score_adj. Under a
// node's bound only the node's processes are candidates; when the host
// itself runs out, every process is.
//
// - Protected, PROTECTED (-900): Basin, HAProxy, every PgBouncer and every
//   postmaster (and pgBackRest's repository server, when there is one:
//   it starts through the same prelude). Not -1000, which would make them
//   unkillable: a node whose private /tmp holds its whole bound leaves the
//   kernel nothing else to kill, and once the postmaster goes the
//   namespace and its /tmp go with it, and Basin restarts the node;
//   and a protected process that is itself the runaway can still be
//   stopped rather than the kernel having no one to kill.
// - The tenant's side, TENANT_GAP above them (0 when they are at -900):
//   every backend and what it starts (COPY … PROGRAM). PostgreSQL writes
//   PG_OOM_ADJUST_VALUE into PG_OOM_ADJUST_FILE in every process the
//   postmaster forks, so its children go back up while it stays protected;
//   Basin's helpers run as the service's user (backups, restores) get it
//   from their prelude.
//
// Lowering a score takes CAP_SYS_RESOURCE. Where Basin has not got it (a
// container, this project's development VM, Basin not root) it cannot
// protect anything: it says so once, and the tenant's side is raised
// instead (anyone may raise a score), so that the order stays the same:
// Basin, the daemons and the postmasters keep the score they have (0),
// the backends and helpers get TENANT_GAP.
//
// A tenant's processes can raise their score, never lower it below the
// oom_score_adj_min the kernel keeps per process tree: that is the value
// root set last on an ancestor with CAP_SYS_RESOURCE, so the postmaster's
// (-900; 0 without the capability). Its backends, and what they run, can
// go back down to the postmaster's score, not lower: what that buys them
// is the rank of a protected process in a host-wide shortage (still
// counted by the memory they hold, which their node's bound caps), never
// a place below Basin's.

import { writeFile } from 'node:fs/promises';
import type { Logger } from '../../../../lib/logger.js';
import type { Prelude } from '../exec.js';

/** The score of what is protected: Basin, HAProxy, PgBouncer, the postmasters. */
export const PROTECTED = -900;
/** How far above the protected processes the tenant's side is. */
export const TENANT_GAP = 900;

export interface OomScores {
  /** What protected processes are set to; undefined where the kernel does not let Basin lower a score. */
  protected: number | undefined;
  /** What every backend, and every helper run as a service's user, is set to. */
  tenant: number;
}

/**
 * Protects Basin itself, which tells whether protection is possible at
 * all: if the kernel refuses it (no CAP_SYS_RESOURCE), a warning, and the
 * tenant's side is raised instead. `selfFile` is /proc/self/oom_score_adj
 * but in unit tests.
 */
export async function startOomScores(
  log: Logger,
  selfFile = '/proc/self/oom_score_adj',
): Promise<OomScores> {
  try {
    await writeFile(selfFile, String(PROTECTED));
    return { protected: PROTECTED, tenant: PROTECTED + TENANT_GAP };
  } catch (err) {
    log.warn(
      { err: (err as Error).message },
      `WARNING: the kernel does not let Basin lower oom_score_adj (it needs CAP_SYS_RESOURCE): ` +
        `Basin, HAProxy, PgBouncer and the postmasters keep theirs (0), and the tenants' backends ` +
        `and helpers are raised to ${TENANT_GAP} instead, so that the kernel still kills those ` +
        'first when memory runs out (docs/security.md).',
    );
    return { protected: undefined, tenant: TENANT_GAP };
  }
}

/**
 * How a protected daemon starts (exec.ts, withPrelude): in `cgroups`, with
 * the protected score where there is one. Postmasters, PgBouncers and
 * HAProxy start through it; so must pgBackRest's repository server, when
 * Basin runs one.
 */
export function protectedPrelude(scores: OomScores, cgroups: readonly string[] = []): Prelude {
  return {
    cgroups,
    ...(scores.protected === undefined ? {} : { oomScoreAdj: scores.protected }),
  };
}

/** The postmaster's environment for its children's score (PostgreSQL's fork_process). */
export function postmasterOomEnv(scores: OomScores): Record<string, string> {
  return {
    PG_OOM_ADJUST_FILE: '/proc/self/oom_score_adj',
    PG_OOM_ADJUST_VALUE: String(scores.tenant),
  };
}
