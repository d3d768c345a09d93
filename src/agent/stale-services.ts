// A host's services that the control plane no longer places here
// (docs/decisions.md, "Several hosts": losing a host). A host that was
// lost, and whose services were meanwhile placed elsewhere (restored from
// the repository host), or removed while it could not be told, still has
// their nodes; they must never serve again. So the agent, at start and at
// every heartbeat the control plane answers with the list of what it
// places here, first kills every process of such a service's OS user
// (before anything else: at start, before the local driver starts), then
// removes the service through the local driver, as a delete would.
//
// Frontends (a host's HAProxy's, of HA services and sets across hosts) are
// not placements: the heartbeat names them and the control plane answers
// with those whose service or set is gone from its store (gone).
//
// A service being created here is placed (in the store) before the control
// plane's first call for it reaches this host; a heartbeat answered from a
// list read before that placement was sent before that call arrived. So a
// service with a driver call after the heartbeat was sent is left alone
// until a later heartbeat: it is never removed on a stale list.

import { readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Driver } from '../drivers/driver.js';
import { run } from '../drivers/local/host/exec.js';
import { readPasswd } from '../drivers/local/host/os-user.js';
import { serviceUserName } from '../drivers/local/host/service-users.js';
import { Layout } from '../drivers/local/layout.js';
import { frontendIds } from '../drivers/local/endpoints/haproxy.js';
import type { Logger } from '../lib/logger.js';

const ID = /^[a-z0-9]{1,32}$/;

export interface StaleServicesOptions {
  dataDir: string;
  /** The uids this host gives its services: no other uid is ever killed. */
  uidRange: { min: number; max: number };
  log: Logger;
}

export class StaleServices {
  private readonly layout: Layout;
  /** When the control plane last called the driver about each service (epoch ms). */
  private readonly calledAt = new Map<string, number>();
  /** Services being removed: one removal each at a time. */
  private readonly removing = new Set<string>();
  private driver: Driver | null = null;
  private closed = false;

  constructor(private readonly o: StaleServicesOptions) {
    this.layout = new Layout(o.dataDir);
  }

  /** The local driver, once started: it removes what was killed. */
  useDriver(driver: Driver): void {
    this.driver = driver;
  }

  /** The agent stops: removals in progress end (the next start takes them up again). */
  close(): void {
    this.closed = true;
  }

  /** A driver call of the control plane's about `serviceId` arrived now. */
  called(serviceId: string): void {
    this.calledAt.set(serviceId, Date.now());
  }

  /**
   * The control plane's answer to a heartbeat sent at `sentAt`: the
   * services it places here. Every other service found here (and not
   * called about since) has its processes killed now, then is removed in
   * the background once the driver runs. Returns the ids fenced.
   */
  async placed(serviceIds: readonly string[], sentAt: number): Promise<string[]> {
    const here = new Set(serviceIds);
    const stale = this.local().filter(
      (id) => !here.has(id) && (this.calledAt.get(id) ?? 0) < sentAt,
    );
    for (const id of stale) {
      if (this.removing.has(id)) continue;
      this.removing.add(id);
      const killed = await this.kill(id);
      this.o.log.warn(
        { serviceId: id, killed },
        'a service the control plane no longer places on this host: its processes killed, it is removed',
      );
      void this.remove(id);
    }
    return stale;
  }

  /**
   * The control plane's answer to a heartbeat sent at `sentAt`: the
   * frontends of this host's (localEndpoints) whose service or set it no
   * longer knows. Each one not called about since is removed as a delete
   * would (deleteService: the frontend, and anything else of it here).
   * Returns the ids removed.
   */
  async gone(ids: readonly string[], sentAt: number): Promise<string[]> {
    const here = new Set(await localEndpoints(this.layout));
    const gone = ids.filter(
      (id) => ID.test(id) && here.has(id) && (this.calledAt.get(id) ?? 0) < sentAt,
    );
    for (const id of gone) {
      if (this.removing.has(id)) continue;
      this.removing.add(id);
      this.o.log.warn(
        { serviceId: id },
        'a frontend of a service or set deleted while this host could not be told: it is removed',
      );
      void this.remove(id);
    }
    return gone;
  }

  /** The services with data here. */
  private local(): string[] {
    return localServices(this.layout);
  }

  private kill(id: string): Promise<number> {
    return killServiceProcesses(id, this.o.uidRange);
  }

  /** The local driver's delete, step by step, once it runs; tried again until done. */
  private async remove(id: string): Promise<void> {
    let said: string | undefined;
    try {
      for (let attempt = 0; attempt < 600 && !this.closed; attempt++) {
        if (!this.driver) {
          await sleepMs(500);
          continue;
        }
        try {
          const progress = await this.driver.deleteService(id);
          if (progress.done) {
            this.o.log.info({ serviceId: id }, 'removed a service no longer placed here');
            return;
          }
          if (progress.reason !== said) {
            said = progress.reason;
            this.o.log.info(
              { serviceId: id, step: said },
              'removing a service no longer placed here',
            );
          }
          await sleepMs(Math.max(50, progress.retryAfterMs));
        } catch (err) {
          this.o.log.warn({ serviceId: id, err: (err as Error).message }, 'removing it failed');
          await sleepMs(1000);
        }
      }
    } finally {
      this.removing.delete(id);
    }
  }
}

/**
 * The services and sets this host's HAProxy has a frontend of. Every
 * database host holds one for each HA service and each read replica set
 * across hosts, a node of it there or not, so the placements cannot say
 * which are stale: the heartbeat names them, and the control plane
 * answers with those it no longer knows (deleted while this host could
 * not be told: gone).
 */
export async function localEndpoints(layout: Layout): Promise<string[]> {
  return (await frontendIds(layout)).filter((id) => ID.test(id));
}

/** The services (and Patroni nodes) with data on this host: the local driver's instance directories. */
export function localServices(layout: Layout): string[] {
  try {
    return readdirSync(layout.instancesDir).filter((n) => ID.test(n));
  } catch {
    return [];
  }
}

/** Kills every process of a service's OS user (one of this host's uids); how many rounds found some. */
export async function killServiceProcesses(
  id: string,
  uidRange: { min: number; max: number },
): Promise<number> {
  const user = readPasswd().find((p) => p.name === serviceUserName(id));
  if (!user || user.uid < uidRange.min || user.uid > uidRange.max) return 0;
  // Again until none is left (a process may start one meanwhile; the
  // killed linger a moment as zombies, which pkill still finds).
  let rounds = 0;
  for (; rounds < 50; rounds++) {
    try {
      await run('pkill', ['-KILL', '-U', String(user.uid)]);
    } catch {
      break; // none left (pkill exits 1)
    }
    await sleepMs(100);
  }
  return rounds;
}

// Not unref'd: at the agent's start, before its listener, a pause here is
// all that keeps the process alive.
const sleepMs = (ms: number) => sleep(ms);
