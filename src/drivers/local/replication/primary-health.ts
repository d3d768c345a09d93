// A primary that runs but does not answer: its postmaster is alive (so the
// watch's look at postmaster.pid and /proc finds nothing wrong) while it
// accepts no work, stopped (SIGSTOP), stuck in the kernel, or with every
// process wedged. The watch (failover.ts) therefore also asks each running
// primary, every CHECK_EVERY_MS, for a bounded administrative answer (a
// login over its socket and one query: admin.ts). Only silence counts: an
// error is an answer (a server that refuses logins while it recovers from a
// backend's crash runs). One silence is no verdict on a 2-core host that
// may be busy: only HUNG_AFTER of them in a row, against the same
// postmaster, mark it hung (`ctx.unresponsive`), and from then on
// primaryIsDead takes it for dead: prepareFailover fences it (kills every
// process of it, which a stopped process cannot ignore) and the engine
// fails over as for a dead one. Every silence, the verdict and an answer
// after silences are reported, for the service's logs.

import type { PrimaryEvent, ServiceSpec } from '../../driver.js';
import { AdminTimeoutError, withAdmin } from '../node/admin.js';
import { primaryNode } from '../primary-node.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<DriverContext, 'layout' | 'log' | 'stopper' | 'unresponsive'>;

/** How often a running primary is asked… */
export const CHECK_EVERY_MS = 1_000;
/** …how long it has to answer (to log in, and to run one query)… */
export const CHECK_TIMEOUT_MS = 1_500;
/** …and how many silences in a row make it hung. */
export const HUNG_AFTER = 3;

interface Check {
  pid: number;
  silences: number;
  running: boolean;
  lastAt: number;
}

export class PrimaryHealth {
  private readonly checks = new Map<string, Check>();

  constructor(
    private readonly ctx: () => Ctx,
    private readonly report: (serviceId: string, event: PrimaryEvent) => void,
  ) {}

  /**
   * The primary of `spec` runs as `pid` and says it is ready: a check is
   * started if one is due (and none is under way); it never waits for it.
   */
  look(spec: ServiceSpec, pid: number): void {
    const id = spec.serviceId;
    const ctx = this.ctx();
    const ref = { id, node: primaryNode(spec).index };
    const pgdata = ctx.layout.pgdata(ref);
    let check = this.checks.get(id);
    if (!check || check.pid !== pid) {
      check = { pid, silences: 0, running: false, lastAt: 0 };
      this.checks.set(id, check);
    }
    // Basin stopping or starting it is no silence of its own.
    if (ctx.stopper.busy(pgdata)) {
      check.silences = 0;
      return;
    }
    const now = Date.now();
    if (check.running || now - check.lastAt < CHECK_EVERY_MS) return;
    if (ctx.unresponsive.get(pgdata) === pid) return; // hung already: being failed over
    check.running = true;
    check.lastAt = now;
    const target = {
      socketDir: ctx.layout.socketDir(ref),
      port: primaryNode(spec).port,
      pgdata,
      bounds: {
        connectMs: CHECK_TIMEOUT_MS,
        statementMs: CHECK_TIMEOUT_MS,
        lockMs: CHECK_TIMEOUT_MS,
        queryMs: CHECK_TIMEOUT_MS,
        callMs: CHECK_TIMEOUT_MS + 500,
      },
    };
    const running = check;
    void withAdmin(target, 'postgres', (c) => c.query('SELECT 1'))
      .then(
        () => 'answered' as const,
        (err: unknown) =>
          err instanceof AdminTimeoutError ? ('silent' as const) : ('other' as const),
      )
      .then((outcome) => {
        running.running = false;
        // A check of a postmaster that is gone, or that Basin began to stop meanwhile, tells nothing.
        if (this.checks.get(id) !== running || ctx.stopper.busy(pgdata)) return;
        if (outcome === 'answered') {
          if (running.silences > 0) this.report(id, { kind: 'answering', after: running.silences });
          running.silences = 0;
        } else if (outcome === 'silent') {
          running.silences++;
          if (running.silences >= HUNG_AFTER) {
            ctx.unresponsive.set(pgdata, pid);
            ctx.log.warn(
              { serviceId: id, pid, silences: running.silences },
              'the primary does not answer; taken for hung',
            );
          } else {
            this.report(id, {
              kind: 'unanswered',
              count: running.silences,
              limit: HUNG_AFTER,
              timeoutMs: CHECK_TIMEOUT_MS,
            });
          }
        }
      });
  }

  /** How many checks in a row the primary of `serviceId` left unanswered. */
  silences(serviceId: string): number {
    return this.checks.get(serviceId)?.silences ?? 0;
  }

  /** Nothing to check (the service stopped, or has no standbys any more). */
  forget(serviceId: string): void {
    this.checks.delete(serviceId);
  }
}
