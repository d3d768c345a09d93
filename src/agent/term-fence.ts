// The leader's term as a fencing token on a host (docs/decisions.md,
// "Several processes: leadership and fencing"). The control plane's leader
// sends the term it leads as with every call (`basin-term`); the agent
// keeps the highest it has seen, in a file so that a restart keeps it
// too, and refuses a call of a lower term: a deposed leader on another
// machine (which its successor cannot kill) can no longer act on this host
// once the new one has spoken to it, and a new leader speaks to every host
// as it starts. Calls without a term (a follower reading logs) only read.

import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { LEADER_TERM_HEADER as TERM_HEADER } from '../domain/hosts.js';
import { writeAtomically } from './agent-files.js';

export class TermFence {
  private highest: number;
  private writes: Promise<void> = Promise.resolve();

  constructor(private readonly dataDir: string) {
    const file = this.file();
    this.highest = existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) || 0 : 0;
  }

  /**
   * Whether a call of `req`'s term (none: any) may run; a higher term is
   * recorded (on disk first) before its call runs.
   */
  async admit(req: IncomingMessage): Promise<{ ok: true } | { ok: false; message: string }> {
    const raw = req.headers[TERM_HEADER];
    if (raw === undefined) return { ok: true };
    const term = Number(raw);
    if (!Number.isSafeInteger(term) || term < 1) {
      return { ok: false, message: `The ${TERM_HEADER} header is not a term: ${String(raw)}.` };
    }
    if (term < this.highest) {
      return {
        ok: false,
        message: `Term ${term} no longer leads: this host has heard from term ${this.highest}.`,
      };
    }
    if (term > this.highest) {
      this.highest = term;
      const write = this.writes.then(() => writeAtomically(this.file(), `${term}\n`));
      this.writes = write.catch(() => undefined);
      await write;
    }
    return { ok: true };
  }

  private file(): string {
    return join(this.dataDir, 'leader-term');
  }
}
