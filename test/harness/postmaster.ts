// What the tests' throwaway PostgreSQL clusters share (test/local/scratch-postgres.ts
// for log and metrics tests, test/store-postgres.ts for the store's): a free
// loopback port, the wait for a spawned postmaster to be ready, and its stop.

import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** A TCP port nobody listens on right now (the kernel picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/** Waits for postmaster.pid to say "ready" (its 8th line, PostgreSQL 10+). */
export async function waitPostmasterReady(
  pgdata: string,
  child: ChildProcess,
  stderr: () => string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`postgres exited during startup: ${stderr()}`);
    }
    try {
      const lines = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n');
      if (lines[7]?.trim() === 'ready') return;
    } catch {
      // not written yet
    }
    await sleep(50);
  }
  throw new Error(`postgres not ready after ${timeoutMs / 1000} s: ${stderr()}`);
}

/** A fast shutdown (SIGINT), the postmaster's process group killed if it takes over 20 s. */
export async function stopPostmaster(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  const timer = setTimeout(() => {
    // detached: the postmaster leads its own process group, backends included.
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }, 20_000);
  await exited;
  clearTimeout(timer);
}
