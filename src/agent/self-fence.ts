// A database host cut off from the control plane stops serving what may be
// restored elsewhere (docs/decisions.md, "A lost host's service restored
// elsewhere": fencing the old node). The control plane declares a host
// LOST after --host-lost-after without a heartbeat, and may then restore
// its services without HA replicas on another host from the repository
// host. So such a host, alive but unable to reach the control plane (a
// partition, a control plane down), must have stopped them by then:
// counting from its last answered heartbeat, after half of that time (the
// control plane says how long in every answer, `fence_after_ms`, and only
// when a repository host makes restores possible), the agent kills every
// process of those services and keeps its local driver from acting on its
// own (an idle service's wake, a restart) until the control plane answers
// again. Then the heartbeat's list says what is still placed here (the
// control plane starts it again: its reconciler finds it down) and what
// is not (removed: stale-services.ts).
//
// Nodes under Patroni are not touched: Patroni's leader lock fences them
// (a primary that cannot renew it demotes itself).
//
// The time is kept in the agent's data directory, so that an agent
// restarted while cut off still fences what kept running without it,
// counting from its start.

import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Layout } from '../drivers/local/layout.js';
import type { Logger } from '../lib/logger.js';
import { killServiceProcesses, localServices } from './stale-services.js';

export interface SelfFenceOptions {
  dataDir: string;
  /** The uids this host gives its services: no other uid is ever killed. */
  uidRange: { min: number; max: number };
  log: Logger;
  /** Monotonic milliseconds (tests give their own). */
  now?: () => number;
}

export class SelfFence {
  private readonly layout: Layout;
  private readonly file: string;
  private readonly now: () => number;
  private lastAnswer: number;
  private fenceAfterMs: number | undefined;
  private fenced = false;

  constructor(private readonly o: SelfFenceOptions) {
    this.layout = new Layout(o.dataDir);
    this.file = join(o.dataDir, 'fence-after-ms');
    this.now = o.now ?? (() => performance.now());
    this.lastAnswer = this.now();
    this.fenceAfterMs = readMs(this.file);
  }

  /** Whether the local driver may act on its own: not while fenced. */
  mayAct(): boolean {
    return !this.fenced;
  }

  /** The control plane answered a heartbeat: with how long a host cut off waits before it fences (none: never). */
  answered(fenceAfterMs: number | undefined): void {
    this.lastAnswer = this.now();
    if (fenceAfterMs !== this.fenceAfterMs) {
      this.fenceAfterMs = fenceAfterMs;
      writeMs(this.file, fenceAfterMs);
    }
    if (this.fenced) {
      this.fenced = false;
      this.o.log.info({}, 'the control plane answers again: this host acts again as it is told');
    }
  }

  /**
   * At every heartbeat, answered or not: fences once the control plane has
   * been silent for its time. Returns the services stopped (none when it
   * fenced before).
   */
  async check(): Promise<string[]> {
    const after = this.fenceAfterMs;
    if (this.fenced || after === undefined || this.now() - this.lastAnswer < after) return [];
    this.fenced = true;
    const stopped: string[] = [];
    for (const id of localServices(this.layout)) {
      if (existsSync(join(this.layout.instanceDir(id), 'patroni'))) continue;
      if ((await killServiceProcesses(id, this.o.uidRange)) > 0) stopped.push(id);
    }
    this.o.log.warn(
      { silentMs: Math.round(this.now() - this.lastAnswer), stopped },
      "the control plane has not answered for half the time after which it may restore this host's services elsewhere: they are stopped here until it answers",
    );
    return stopped;
  }
}

function readMs(file: string): number | undefined {
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function writeMs(file: string, ms: number | undefined): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, ms === undefined ? '' : `${ms}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}
