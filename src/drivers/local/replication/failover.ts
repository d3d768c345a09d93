// What the local driver does for a failover (the engine decides it:
// engine/failover.ts): it notices a dead or hung primary, fences it, and
// reports how far each standby got. Basin spawned every postmaster, so a
// primary killed or crashed is seen at once: its postmaster is gone from
// postmaster.pid and /proc. A watch looks every WATCH_MS at the primaries
// of the running services with standbys; a primary the driver is itself
// stopping or starting (a restart for new settings) is not dead. One that
// runs but stops answering is found by periodic checks (primary-health.ts).
// The same watch starts the installation's HAProxy again if it died.

import { nodeName } from '../../../domain/service-nodes.js';
import type { FailoverView, PrimaryEvent, ServiceSpec } from '../../driver.js';
import { nodeExists } from '../node/node-files.js';
import { readNodeState } from '../node/node-state.js';
import { postmasterStatus } from '../node/postmaster.js';
import { CHECK_TIMEOUT_MS, PrimaryHealth } from './primary-health.js';
import { clusterProcesses, signalAll } from '../host/processes.js';
import { nodeStatus } from './replication.js';
import { primaryNode } from '../primary-node.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<
  DriverContext,
  'adminBounds' | 'haproxy' | 'layout' | 'log' | 'spawned' | 'stopper' | 'unresponsive'
>;

/** How often the watch looks at the primaries… */
export const WATCH_MS = 200;
/** …and every how many looks at HAProxy. */
const SUPERVISE_EVERY = 5;

/**
 * Whether the recorded primary of `spec` is dead: not running, and not
 * stopped or started by the driver; or running but hung (it left too many
 * checks in a row unanswered: primary-health.ts).
 */
export async function primaryIsDead(ctx: Ctx, spec: ServiceSpec): Promise<boolean> {
  if (!spec.running || spec.nodes.length < 2) return false;
  const primary = primaryNode(spec);
  const ref = { id: spec.serviceId, node: primary.index };
  const pgdata = ctx.layout.pgdata(ref);
  if (!(await nodeExists(ctx.layout, ref))) return false;
  // A node that never ran (a service being made) is not dead.
  if ((await readNodeState(ctx.layout.stateFile(ref))).startedWith === undefined) return false;
  const pm = await postmasterStatus(pgdata);
  if (pm.up) return ctx.unresponsive.get(pgdata) === pm.pid;
  if (ctx.stopper.busy(pgdata)) return false;
  const spawned = ctx.spawned.get(pgdata);
  return !(spawned && !spawned.proc.exit);
}

/** What postmaster.pid and /proc say of the recorded primary. */
function primaryStatus(ctx: Ctx, spec: ServiceSpec) {
  const ref = { id: spec.serviceId, node: primaryNode(spec).index };
  return postmasterStatus(ctx.layout.pgdata(ref));
}

/**
 * A dead primary is fenced (what is left of it, backends of a killed
 * postmaster, is killed: none may finish a commit any more; a hung one is
 * killed whole, SIGKILL reaching even stopped processes), and every
 * standby that answers says how far it received WAL.
 */
export async function prepareFailover(ctx: Ctx, spec: ServiceSpec): Promise<FailoverView> {
  if (!(await primaryIsDead(ctx, spec))) return { dead: false };
  const primary = primaryNode(spec);
  const pgdata = ctx.layout.pgdata({ id: spec.serviceId, node: primary.index });
  for (let i = 0; i < 50; i++) {
    const left = await clusterProcesses(pgdata);
    if (left.length === 0) break;
    signalAll(left, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 20));
  }
  ctx.unresponsive.delete(pgdata);
  const standbys: { index: number; lsn: string | null }[] = [];
  for (const n of spec.nodes) {
    if (n.role !== 'standby') continue;
    const ref = { id: spec.serviceId, node: n.index };
    try {
      const st = await nodeStatus({
        socketDir: ctx.layout.socketDir(ref),
        port: n.port,
        pgdata: ctx.layout.pgdata(ref),
        bounds: { ...ctx.adminBounds, connectMs: 1_000, callMs: 2_000 },
      });
      standbys.push({ index: n.index, lsn: st.standby ? (st.receivedLsn ?? st.lsn) : null });
    } catch {
      standbys.push({ index: n.index, lsn: null });
    }
  }
  ctx.log.warn(
    { serviceId: spec.serviceId, node: nodeName(primary.index), standbys },
    'the primary is dead; fenced',
  );
  return { dead: true, standbys };
}

/**
 * Looks at the primaries of the services it was told about (track),
 * checks that they answer (primary-health.ts), and reports each death or
 * hang once (until that service's primary runs again or changes).
 */
export class PrimaryWatch {
  private readonly specs = new Map<string, ServiceSpec>();
  private readonly reported = new Set<string>();
  /** Services whose primary this watch saw running: only those can die (the reconciler sees the rest). */
  private readonly seenUp = new Set<string>();
  private readonly health: PrimaryHealth;
  private timer: NodeJS.Timeout | undefined;
  private looking = false;
  private ticks = 0;

  constructor(
    private readonly ctx: () => Ctx,
    private readonly report: (serviceId: string, event: PrimaryEvent) => void,
    /** Whether this process may still act (LocalDriverOptions.mayAct): a deposed leader's watch does nothing. */
    private readonly mayAct: () => boolean = () => true,
  ) {
    this.health = new PrimaryHealth(ctx, report);
  }

  /** The latest spec of a service; one without standbys, or not running, is not watched. */
  track(spec: ServiceSpec): void {
    const key = spec.serviceId;
    const before = this.specs.get(key);
    if (!spec.running || spec.nodes.length < 2) {
      this.forget(key);
      return;
    }
    if (before && primaryNode(before).index !== primaryNode(spec).index) this.reported.delete(key);
    this.specs.set(key, spec);
  }

  forget(serviceId: string): void {
    this.specs.delete(serviceId);
    this.reported.delete(serviceId);
    this.seenUp.delete(serviceId);
    this.health.forget(serviceId);
  }

  start(): void {
    this.timer = setInterval(() => void this.look(), WATCH_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async look(): Promise<void> {
    if (this.looking || !this.mayAct()) return;
    this.looking = true;
    try {
      // HAProxy is supervised like a postmaster: started again if it died.
      if (++this.ticks % SUPERVISE_EVERY === 0) {
        await this.ctx()
          .haproxy.supervise()
          .catch(() => {});
      }
      for (const [id, spec] of this.specs) {
        const dead = await primaryIsDead(this.ctx(), spec).catch(() => false);
        const pm = await primaryStatus(this.ctx(), spec);
        if (!dead) {
          this.reported.delete(id);
          if (pm.up) this.seenUp.add(id);
          if (pm.up && pm.state === 'ready') this.health.look(spec, pm.pid);
        } else if (this.seenUp.has(id) && !this.reported.has(id)) {
          this.reported.add(id);
          this.report(
            id,
            pm.up
              ? { kind: 'hung', count: this.health.silences(id), timeoutMs: CHECK_TIMEOUT_MS }
              : { kind: 'dead' },
          );
        }
      }
    } finally {
      this.looking = false;
    }
  }
}
