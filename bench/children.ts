// Child processes of the bench: the baselines (scripts of the bench, started
// with an IPC channel and awaited for one message), always stopped, whether
// the bench ends, fails or is interrupted. The Basin servers are the
// harness's (installations.ts).

import { type ChildProcess, fork } from 'node:child_process';

/** Running children, each with a promise of its exit. */
const live = new Map<ChildProcess, Promise<void>>();

export interface Child {
  process: ChildProcess;
  pid: number;
  /** The next IPC message of the given type, or a rejection if the child exits first. */
  message<T>(type: string, timeoutMs?: number): Promise<T>;
  send(message: unknown): void;
  stop(): Promise<void>;
}

/**
 * Starts `script` (a TypeScript file next to this one, run by the harness's
 * own node flags, i.e. tsx) with IPC.
 */
export function startChild(script: string, env: Record<string, string> = {}): Child {
  const child = fork(new URL(script, import.meta.url), [], {
    env: { ...process.env, ...env },
    execArgv: process.execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = track(child);
  if (child.pid === undefined) throw new Error(`could not start ${script}`);

  return {
    process: child,
    pid: child.pid,
    send(message) {
      child.send(message as object);
    },
    message<T>(type: string, timeoutMs = 30_000) {
      return new Promise<T>((resolve, reject) => {
        const onMessage = (m: { type?: string } & Record<string, unknown>) => {
          if (m?.type === 'error') done(new Error(`${script}: ${String(m.message)}`));
          else if (m?.type === type) done(undefined, m as T);
        };
        const onExit = (code: number | null, signal: string | null) =>
          done(new Error(`${script} exited (${signal ?? code}) before sending ${type}`));
        const timer = setTimeout(
          () => done(new Error(`${script} sent no ${type} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        const done = (err?: Error, value?: T) => {
          clearTimeout(timer);
          child.off('message', onMessage);
          child.off('exit', onExit);
          if (err) reject(err);
          else resolve(value as T);
        };
        child.on('message', onMessage);
        child.once('exit', onExit);
      });
    },
    stop: () => stopChild(child, exited),
  };
}

/** Keeps `child` among the children stopped on the way out; resolves when it exits. */
function track(child: ChildProcess): Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  live.set(child, exited);
  void exited.then(() => live.delete(child));
  return exited;
}

/** What a benchmark left to tear down (a topology of hosts), run on the way out too. */
const teardowns = new Set<() => Promise<void>>();

/** Keeps `fn` to run with stopAllChildren (an interrupted run too) until the returned forget. */
export function onStop(fn: () => Promise<void>): () => void {
  teardowns.add(fn);
  return () => teardowns.delete(fn);
}

/** Stops every child still running and runs what is left to tear down (on the way out, also after an error). */
export async function stopAllChildren(): Promise<void> {
  await Promise.all([...live].map(([child, exited]) => stopChild(child, exited)));
  for (const fn of [...teardowns]) {
    teardowns.delete(fn);
    await fn().catch((err: Error) => console.error(`tear-down: ${err.message}`));
  }
}

/** SIGTERM, then SIGKILL if the child has not exited `graceMs` later. */
async function stopChild(
  child: ChildProcess,
  exited: Promise<void>,
  graceMs = 5_000,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(killer);
}

/** Synchronous last resort, for process 'exit': SIGKILL whatever is left. */
export function killAllChildrenNow(): void {
  for (const child of live.keys()) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** In a child: exit when told to, or when the parent goes away (IPC disconnects). */
export function exitWithParent(cleanup: () => Promise<void> | void): void {
  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    const force = setTimeout(() => process.exit(1), 5_000);
    force.unref();
    Promise.resolve()
      .then(cleanup)
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  process.on('disconnect', close);
}

/** In a child: report a fatal error to the parent and exit 1. */
export function failChild(name: string, err: unknown): void {
  const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
  process.stderr.write(`${name}: ${message}\n`);
  if (process.send) process.send({ type: 'error', message }, undefined, {}, () => process.exit(1));
  else process.exit(1);
}
