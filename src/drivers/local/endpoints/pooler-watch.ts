// Every second, what each connection pooler of the installation logged
// since the last look (pooler.log, root's): its failed logins counted per
// client address, and an address over the limit refused by that pooler for
// a while (pooler-guard.ts has the rule, pooler.ts applies it). Every
// service's and read replica set's pooler is found by its directory, so
// poolers a restarted Basin adopts are watched without being told; what
// they logged before Basin first looked is not counted.

import { open, readdir } from 'node:fs/promises';
import { applyBlocks, readBlocks } from './pooler.js';
import {
  type Blocks,
  FailedLogins,
  type LoginLimits,
  POOLER_LOGIN_LIMITS,
  sameAddresses,
} from './pooler-guard.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<
  DriverContext,
  | 'cgroups'
  | 'layout'
  | 'listenAddresses'
  | 'locks'
  | 'log'
  | 'networks'
  | 'oom'
  | 'privateTmp'
  | 'publicCidrs'
  | 'spawned'
  | 'users'
>;

/** How often the logs are read. */
const LOOK_MS = 1_000;
/** At most this much of one log is read a look (a flood is read over several). */
const READ_MAX = 256 * 1024;
/** A line longer than this is no PgBouncer line: dropped. */
const LINE_MAX = 4096;

/** Where the reading of one pooler's log stands. */
interface Tail {
  offset: number;
  /** The start of a line whose end was not written yet. */
  partial: string;
}

export class PoolerWatch {
  private readonly tails = new Map<string, Tail>();
  private readonly logins = new Map<string, FailedLogins>();
  /** The blocks each pooler should have, ahead of its files while they are being written. */
  private readonly wanted = new Map<string, Blocks>();
  private readonly applying = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private looking = false;

  constructor(
    private readonly ctx: () => Ctx,
    private readonly limits: LoginLimits = POOLER_LOGIN_LIMITS,
    /** Whether this process may still act (LocalDriverOptions.mayAct): a deposed leader blocks nobody. */
    private readonly mayAct: () => boolean = () => true,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.look(), LOOK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One look at every pooler's log (tests call it directly). */
  async look(now = Date.now()): Promise<void> {
    if (this.looking || !this.mayAct()) return;
    this.looking = true;
    try {
      const { layout } = this.ctx();
      const ids = (await readdir(layout.instancesDir).catch(() => [])).filter((id) =>
        /^[a-z0-9]{1,32}$/.test(id),
      );
      for (const id of this.tails.keys()) if (!ids.includes(id)) this.forget(id);
      for (const id of ids) {
        const lines = await this.newLines(id, layout.pooler(id).log);
        if (lines === undefined) this.forget(id);
        else await this.guard(id, lines, now);
      }
    } catch (err) {
      this.ctx().log.error({ err }, "reading the connection poolers' logs failed");
    } finally {
      this.looking = false;
    }
  }

  private async guard(id: string, lines: string[], now: number): Promise<void> {
    const ctx = this.ctx();
    const files = ctx.layout.pooler(id);
    let logins = this.logins.get(id);
    if (!logins) this.logins.set(id, (logins = new FailedLogins(this.limits)));
    const current = this.wanted.get(id) ?? (await readBlocks(files, now));
    const next = logins.note(lines, current, now);
    this.wanted.set(id, next);
    for (const [addr, until] of Object.entries(next)) {
      if (current[addr] === undefined) {
        ctx.log.warn(
          { id, address: addr, until: new Date(until).toISOString(), limits: this.limits },
          'a client address made too many failed logins at the connection pooler; it is refused there for a while',
        );
      }
    }
    // What the files say, expired blocks included: those go now.
    if (sameAddresses(await readBlocks(files, 0), next) || this.applying.has(id)) return;
    // Under the pooler's lock (converges write the same files), without
    // holding up the other poolers' looks while a converge runs.
    this.applying.add(id);
    void ctx.locks
      .run(id, () => applyBlocks(ctx, id, this.wanted.get(id) ?? next))
      .catch((err: unknown) => ctx.log.error({ err, id }, "updating a pooler's blocks failed"))
      .finally(() => this.applying.delete(id));
  }

  /**
   * The complete lines added to `file` since the last look; none at the
   * first look (what came before is not counted); undefined without a log.
   */
  private async newLines(id: string, file: string): Promise<string[] | undefined> {
    let fh;
    try {
      fh = await open(file, 'r');
    } catch {
      return undefined;
    }
    try {
      const size = (await fh.stat()).size;
      const tail = this.tails.get(id);
      if (!tail) {
        this.tails.set(id, { offset: size, partial: '' });
        return [];
      }
      if (size < tail.offset) {
        // Emptied (trimLog): it starts again from the beginning.
        tail.offset = 0;
        tail.partial = '';
      }
      const len = Math.min(size - tail.offset, READ_MAX);
      if (len <= 0) return [];
      const buf = Buffer.alloc(len);
      const { bytesRead } = await fh.read(buf, 0, len, tail.offset);
      tail.offset += bytesRead;
      const lines = (tail.partial + buf.toString('utf8', 0, bytesRead)).split('\n');
      tail.partial = lines.pop() ?? '';
      if (tail.partial.length > LINE_MAX) tail.partial = '';
      return lines.filter((l) => l.length <= LINE_MAX);
    } finally {
      await fh.close();
    }
  }

  private forget(id: string): void {
    this.tails.delete(id);
    this.logins.delete(id);
    this.wanted.delete(id);
  }
}
