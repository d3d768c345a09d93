// Idle services that suspend and wake on connect (docs/decisions.md, Idle
// services): the local driver's watch of its services' clients, the
// suspension of an idle one, and its wake by its next client.
//
// Suspend (under the service's lock, each step safe to repeat after a crash):
//   1. its waker listens on the host side of its namespace (waker.ts);
//   2. its record says it sleeps (idle-record.ts);
//   3. its port is parked: the DNAT and the local redirect lead to the
//      waker (ServiceNetworks.park); a client that connected just before
//      keeps it awake (looked at again, then everything undone);
//   4. a CHECKPOINT, then its node is converged as a stopped one (its WAL
//      archived, a fast shutdown, its user's processes ended: the stop of
//      a paused service, service-node.ts), recorded as Basin's stop, so no
//      restart takes it for a death (restarts.ts).
// The service stays READY: inspectService reports a sleeping service
// running, and applyService keeps it stopped (a resize writes its new
// settings, which its wake starts with), until its spec no longer lets it
// sleep (stopped, HA, a pooler, a read replica set): then it is released
// (unparked, its waker closed) and converged as usual.
//
// Wake (the first client, or a backup or read replica set that needs it;
// a backup then holds it awake until it is taken):
// its node converged as a running one, then its port unparked (new
// connections go straight to the server again, nothing of Basin in their
// way), its record removed; the waker splices the clients it holds and
// those still arriving for a few seconds, then stops listening. A wake
// that fails answers its clients with an error and leaves the service
// asleep: the next client tries again.
//
// A restarted Basin (adopt) arms the waker of every service recorded
// asleep whose server is down, and finishes the wake of one whose server
// runs (Basin died mid-wake); a parked port with no record is unparked.

import { setTimeout as sleep } from 'node:timers/promises';
import type { ProgressNote, Progress } from '../../../domain/progress.js';
import { duration } from '../../../lib/duration.js';
import type { Logger } from '../../../lib/logger.js';
import type { ServiceSpec } from '../../driver.js';
import { admittedCidrs } from '../config/conf.js';
import type { DriverContext } from '../context.js';
import { adminOf } from '../converge/converge-nodes.js';
import { withAdmin } from '../node/admin.js';
import { postmasterStatus } from '../node/postmaster.js';
import { primaryNode } from '../primary-node.js';
import { readIdleRecord, removeIdleRecord, writeIdleRecord } from './idle-record.js';
import {
  admits,
  CLIENTS_SQL,
  decide,
  type IdleClock,
  type IdlePolicy,
  sampleEveryMs,
  whyAwake,
} from './idle-policy.js';
import { Waker } from './waker.js';

/** What the driver gives its idle services. */
export interface IdleHost {
  ctx(): DriverContext;
  /** One step of applyService's work; the caller holds the service's lock. */
  applyNow(spec: ServiceSpec): Promise<Progress>;
  /** An entry of the service's logs (a `basin: …` event). */
  note(id: string, note: ProgressNote): void;
  policy: IdlePolicy | undefined;
  log: Logger;
}

/** How long a wake or a suspension may take before it is given up. */
const STEP_DEADLINE_MS = 60_000;
/** How long the waker goes on splicing after a wake: connections translated to it before the switch. */
const DRAIN_MS = 5_000;
/** How long a wake waits for the service's spec after Basin started (the reconciler's first round). */
const SPEC_WAIT_MS = 30_000;
/** The longest a backup keeps a service awake (hold) without being taken. */
const HOLD_MS = 600_000;

interface Asleep {
  since: number;
  port: number;
  waker: Waker;
}

/** What the API's metrics say of a service that may suspend (metrics). */
export interface IdleView {
  suspended: boolean;
  /** Since when it sleeps (ISO), when it does. */
  since?: string;
}

/** The view of every service that may sleep and is awake (shared: never changed). */
const AWAKE: IdleView = Object.freeze({ suspended: false });

export class IdleServices {
  /** The last spec inspectService saw of each service. */
  private readonly specs = new Map<string, ServiceSpec>();
  private readonly clocks = new Map<string, IdleClock>();
  /** Services a read replica set streams from. */
  private readonly withSets = new Set<string>();
  private readonly asleep = new Map<string, Asleep>();
  /** Wakes in progress: their applyNow starts the node. */
  private readonly waking = new Set<string>();
  /** Wakers still splicing late arrivals after a wake. */
  private readonly draining = new Map<string, Waker>();
  /** Services kept awake until then (epoch ms): a backup due, not taken yet. */
  private readonly holds = new Map<string, number>();
  /** whyAwakeKept's answers, by spec object (the reconciler's, replaced at each of its rounds). */
  private readonly awakeKept = new WeakMap<
    ServiceSpec,
    { gateway: string | undefined; withSet: boolean; why: string | undefined }
  >();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;

  constructor(private readonly host: IdleHost) {}

  /** Samples every service that may suspend, at the policy's pace (none when off). */
  start(): void {
    const policy = this.host.policy;
    if (!policy || this.timer) return;
    this.timer = setInterval(() => void this.tick(), sampleEveryMs(policy.afterMs));
    this.timer.unref();
  }

  /** Stops sampling and listening (Basin's shutdown: the next start arms the wakers again). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const w of this.draining.values()) await w.close();
    for (const a of this.asleep.values()) await a.waker.close();
  }

  /** The spec of a service as the reconciler sees it (no operation pending). */
  seen(spec: ServiceSpec): void {
    this.specs.set(spec.serviceId, spec);
  }

  /** An operation works on it: its idle time starts again. */
  busy(id: string): void {
    this.clocks.delete(id);
  }

  /**
   * Keeps `id` awake until `unhold` (or HOLD_MS): a backup of it is due,
   * and is taken once it runs (a sleeping one is woken for it).
   */
  hold(id: string): void {
    this.holds.set(id, Date.now() + HOLD_MS);
    this.wakeInBackground(id, 'its scheduled backup');
  }

  unhold(id: string): void {
    this.holds.delete(id);
  }

  /** A read replica set streams from `serviceId`: it never sleeps again (and wakes now). */
  streamedFrom(serviceId: string): void {
    this.withSets.add(serviceId);
    this.wakeInBackground(serviceId, 'a read replica set streams from it');
  }

  /** Whether `id` sleeps (and is not being woken): its node stays stopped. */
  keepsAsleep(id: string): boolean {
    return this.asleep.has(id) && !this.waking.has(id);
  }

  /** Whether `id` sleeps or is being woken: reported running. */
  isAsleep(id: string): boolean {
    return this.asleep.has(id);
  }

  /** Why `spec` may not sleep now, or undefined. */
  whyAwake(spec: ServiceSpec): string | undefined {
    const { networks, publicCidrs } = this.host.ctx();
    const net = networks.get(spec.serviceId);
    return whyAwake(spec, this.host.policy, {
      namespaced: networks.enabled && net !== undefined,
      withReplicaSet: this.withSets.has(spec.serviceId),
      admitted: admittedCidrs(spec, publicCidrs),
      gateway: net?.hostAddress,
    });
  }

  /** For metrics: whether it sleeps, for a service that may; undefined for one that never does. */
  view(id: string): IdleView | undefined {
    const a = this.asleep.get(id);
    if (a) return { suspended: true, since: new Date(a.since).toISOString() };
    const spec = this.specs.get(id);
    return spec && this.whyAwakeKept(spec) === undefined ? AWAKE : undefined;
  }

  /**
   * whyAwake, kept per spec object while what else it reads is the same
   * (its network's gateway, whether a read replica set streams from it): a
   * GET of a service, and a list for each of its services, ask it through
   * the service's metrics, and working it out afresh (its access rules
   * parsed into a BlockList) cost more than the rest of a polled GET.
   */
  private whyAwakeKept(spec: ServiceSpec): string | undefined {
    const { networks } = this.host.ctx();
    const gateway = networks.enabled ? networks.get(spec.serviceId)?.hostAddress : undefined;
    const withSet = this.withSets.has(spec.serviceId);
    const kept = this.awakeKept.get(spec);
    if (kept && kept.gateway === gateway && kept.withSet === withSet) return kept.why;
    const why = this.whyAwake(spec);
    this.awakeKept.set(spec, { gateway, withSet, why });
    return why;
  }

  /**
   * Lets a sleeping service go without starting it: its port leads into
   * its namespace again, its waker stops listening, its record goes. The
   * caller holds its lock (applyService, when its spec no longer lets it
   * sleep); its converge then does what the spec says.
   */
  async release(id: string, why: string): Promise<void> {
    const a = this.asleep.get(id);
    if (!a) return;
    const ctx = this.host.ctx();
    await ctx.networks.park(id, []);
    await removeIdleRecord(ctx.layout, id);
    this.asleep.delete(id);
    this.drain(id, a.waker);
    this.host.log.info({ serviceId: id, why }, 'idle service released');
  }

  /** The service is being deleted: its waker goes, with every connection it holds. */
  async forget(id: string): Promise<void> {
    const a = this.asleep.get(id);
    this.asleep.delete(id);
    await a?.waker.close(true);
    await this.draining.get(id)?.close(true);
    this.draining.delete(id);
    this.specs.delete(id);
    this.clocks.delete(id);
    this.withSets.delete(id);
    this.holds.delete(id);
  }

  /**
   * At start: the wakers of services recorded asleep are armed again, a
   * wake Basin died in is finished, a parked port without a record is
   * unparked.
   */
  async adopt(ids: readonly string[]): Promise<void> {
    const ctx = this.host.ctx();
    for (const id of ids) {
      const record = await readIdleRecord(ctx.layout, id);
      if (!record) continue;
      const net = ctx.networks.get(id);
      const pm = await postmasterStatus(ctx.layout.pgdata({ id, node: record.node }));
      if (!net || pm.up) {
        if (net) await ctx.networks.park(id, []);
        await removeIdleRecord(ctx.layout, id);
        continue;
      }
      const waker = this.waker(id, record.port, net);
      try {
        await waker.arm();
      } catch (err) {
        // Its port leads into its namespace again: the reconciler starts it.
        this.host.log.warn(
          { serviceId: id, err: (err as Error).message },
          'could not arm the waker of a suspended service; it is started instead',
        );
        await ctx.networks.park(id, []);
        await removeIdleRecord(ctx.layout, id);
        continue;
      }
      await ctx.networks.park(id, [record.port]);
      this.asleep.set(id, { since: record.since, port: record.port, waker });
    }
    for (const id of ctx.networks.parkedIds()) {
      if (!this.asleep.has(id)) await ctx.networks.park(id, []);
    }
    if (this.asleep.size > 0) {
      this.host.log.info(
        { services: [...this.asleep.keys()] },
        'armed the wakers of suspended services',
      );
    }
  }

  /** Wakes `id` if it sleeps (a backup, a read replica set); errors are logged. */
  wakeInBackground(id: string, why: string): void {
    if (!this.asleep.has(id)) return;
    this.wake(id, why).catch((err: Error) =>
      this.host.log.warn({ serviceId: id, err: err.message }, 'could not wake the service'),
    );
  }

  /** One round of samples: the clients of each service that may sleep, and the suspension of idle ones. */
  async tick(now = () => Date.now()): Promise<void> {
    const policy = this.host.policy;
    if (!policy || this.ticking) return;
    this.ticking = true;
    try {
      for (const [id, spec] of this.specs) {
        if (this.asleep.has(id) || this.waking.has(id)) continue;
        if (
          this.whyAwake(spec) !== undefined ||
          (this.holds.get(id) ?? 0) > now() ||
          !(await this.ready(spec))
        ) {
          this.clocks.delete(id);
          continue;
        }
        const clients = await this.clients(spec).catch(() => undefined);
        if (clients === undefined) continue;
        const step = decide(this.clocks.get(id), clients, now(), policy.afterMs);
        this.clocks.set(id, step.clock);
        if (step.suspend) {
          await this.suspend(spec, now() - step.clock.lastActiveAt).catch((err: Error) =>
            this.host.log.warn(
              { serviceId: id, err: err.message },
              'could not suspend the service',
            ),
          );
        }
      }
    } finally {
      this.ticking = false;
    }
  }

  /** Suspends `spec`'s service (see the top of this file). */
  private suspend(seen: ServiceSpec, idleMs: number): Promise<void> {
    const id = seen.serviceId;
    const ctx = this.host.ctx();
    return ctx.locks.run(id, async () => {
      const spec = this.specs.get(id) ?? seen;
      if (
        this.asleep.has(id) ||
        this.whyAwake(spec) !== undefined ||
        (this.holds.get(id) ?? 0) > Date.now() ||
        !(await this.ready(spec))
      ) {
        return;
      }
      const net = ctx.networks.get(id);
      if (!net) return;
      // A waker of its last wake still splicing: it gives the address up.
      await this.draining.get(id)?.close();
      this.draining.delete(id);
      const waker = this.waker(id, spec.port, net);
      await waker.arm();
      const since = Date.now();
      const node = primaryNode(spec).index;
      await writeIdleRecord(ctx.layout, id, { since, port: spec.port, node });
      this.asleep.set(id, { since, port: spec.port, waker });
      await ctx.networks.park(id, [spec.port]);
      // A client that came just before the switch: it stays awake.
      if ((await this.clients(spec).catch(() => 1)) > 0) {
        await this.release(id, 'a client connected while it was being suspended');
        this.clocks.set(id, { lastActiveAt: Date.now() });
        return;
      }
      const admin = adminOf(ctx, id, primaryNode(spec));
      await withAdmin(admin, 'postgres', (s) => s.query('CHECKPOINT')).catch(() => {});
      try {
        await this.converge(spec, 'stopping');
      } catch (err) {
        await this.release(id, 'its stop failed');
        throw err;
      }
      this.clocks.delete(id);
      this.host.log.info({ serviceId: id, idleMs }, 'suspended an idle service');
      this.host.note(id, {
        severity: 'LOG',
        message: `basin: suspended after ${duration(idleMs)} without a client connection: PostgreSQL stopped, its memory freed; the next connection wakes it`,
      });
    });
  }

  /** Starts a sleeping service (its waker's first client, or `why`); resolves once it accepts connections. */
  private wake(id: string, why = 'a client connected'): Promise<void> {
    const ctx = this.host.ctx();
    return ctx.locks.run(id, async () => {
      const a = this.asleep.get(id);
      if (!a) return; // awake already (a wake or a release before this one)
      const spec = await this.specOf(id);
      const began = Date.now();
      this.waking.add(id);
      try {
        await this.converge(spec, 'starting');
      } catch (err) {
        this.host.note(id, {
          severity: 'ERROR',
          message: `basin: could not wake the service (${why}): ${(err as Error).message}; the next connection tries again`,
        });
        throw err;
      } finally {
        this.waking.delete(id);
      }
      await ctx.networks.park(id, []);
      await removeIdleRecord(ctx.layout, id);
      this.asleep.delete(id);
      this.clocks.set(id, { lastActiveAt: Date.now() });
      a.waker.awake();
      this.drain(id, a.waker);
      const tookMs = Date.now() - began;
      this.host.log.info({ serviceId: id, why, tookMs }, 'woke a suspended service');
      this.host.note(id, {
        severity: 'LOG',
        message: `basin: woke after ${duration(began - a.since)} suspended (${why}); PostgreSQL accepted connections ${duration(tookMs)} later`,
      });
    });
  }

  /** The waker keeps splicing what was translated to it before the switch, then stops listening. */
  private drain(id: string, waker: Waker): void {
    this.draining.set(id, waker);
    setTimeout(() => {
      if (this.draining.get(id) === waker) this.draining.delete(id);
      void waker.close();
    }, DRAIN_MS).unref();
  }

  /** applyNow until done (it stops a sleeping node, and starts a waking one). */
  private async converge(spec: ServiceSpec, what: string): Promise<void> {
    const deadline = Date.now() + STEP_DEADLINE_MS;
    let last = '';
    for (;;) {
      let p: Progress;
      try {
        p = await this.host.applyNow(spec);
      } catch (err) {
        last = (err as Error).message;
        if (Date.now() > deadline) throw err;
        await sleep(200);
        continue;
      }
      if (p.done) return;
      last = p.reason;
      if (Date.now() > deadline) {
        throw new Error(
          `${what} PostgreSQL took longer than ${duration(STEP_DEADLINE_MS)}: ${last}`,
        );
      }
      await sleep(Math.min(p.retryAfterMs, 1_000));
    }
  }

  /** The spec of `id`: seen by the reconciler (after a restart, its first round may still be due). */
  private async specOf(id: string): Promise<ServiceSpec> {
    const deadline = Date.now() + SPEC_WAIT_MS;
    for (;;) {
      const spec = this.specs.get(id);
      if (spec) return spec;
      if (Date.now() > deadline) throw new Error('Basin does not know the service yet');
      await sleep(100);
    }
  }

  /** Whether its primary accepts connections. */
  private async ready(spec: ServiceSpec): Promise<boolean> {
    const { layout } = this.host.ctx();
    const pm = await postmasterStatus(
      layout.pgdata({ id: spec.serviceId, node: primaryNode(spec).index }),
    );
    return pm.up && pm.state === 'ready';
  }

  /** Its clients that are not Basin's, from pg_stat_activity. */
  private async clients(spec: ServiceSpec): Promise<number> {
    const admin = adminOf(this.host.ctx(), spec.serviceId, primaryNode(spec));
    const { rows } = await withAdmin(admin, 'postgres', (s) => s.query<{ n: number }>(CLIENTS_SQL));
    return rows[0]?.n ?? 0;
  }

  /** A waker for `id`'s port, admitting the clients its spec's rules do (the public CIDRs until it is known). */
  private waker(id: string, port: number, net: { hostAddress: string; address: string }): Waker {
    const { publicCidrs } = this.host.ctx();
    return new Waker({
      serviceId: id,
      listen: { host: net.hostAddress, port },
      server: { host: net.address, port },
      admits: (address) => {
        const spec = this.specs.get(id);
        return admits(spec ? admittedCidrs(spec, publicCidrs) : publicCidrs, address);
      },
      wake: () => this.wake(id),
      log: this.host.log,
    });
  }
}
