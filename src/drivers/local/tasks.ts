// Work the local driver runs in the background, one per key, while the
// engine's calls poll it (a fork's restore may take minutes; an operation's
// attempt must not). Kept in memory only: after a restart the work is
// started again from the files, which it always begins by cleaning up.

import { DriverError } from '../driver.js';

interface Task {
  controller: AbortController;
  startedAt: number;
  done: Promise<void>;
  error?: Error;
  finished: boolean;
}

export class Tasks {
  private readonly tasks = new Map<string, Task>();

  /** Runs `work` unless a task of `key` runs already; its failure is kept for `take`. */
  start(key: string, work: (signal: AbortSignal) => Promise<void>): void {
    if (this.tasks.get(key)?.finished === false) return;
    const controller = new AbortController();
    const task: Task = {
      controller,
      startedAt: Date.now(),
      finished: false,
      done: Promise.resolve(),
    };
    task.done = work(controller.signal)
      .catch((err: unknown) => {
        task.error =
          err instanceof DriverError
            ? err
            : new DriverError(err instanceof Error ? err.message : String(err), true);
      })
      .finally(() => (task.finished = true));
    this.tasks.set(key, task);
  }

  /** How long the task of `key` has run (ms); 0 when none runs. */
  runningFor(key: string): number {
    const task = this.tasks.get(key);
    return task && !task.finished ? Date.now() - task.startedAt : 0;
  }

  /** 'running', 'none', or how the last task of `key` ended (then forgotten). */
  take(key: string): 'running' | 'none' | { error?: Error } {
    const task = this.tasks.get(key);
    if (!task) return 'none';
    if (!task.finished) return 'running';
    this.tasks.delete(key);
    return task.error ? { error: task.error } : {};
  }

  /** Aborts the task of `key`, if one runs, and waits until it has ended. */
  async abort(key: string): Promise<void> {
    const task = this.tasks.get(key);
    if (!task) return;
    task.controller.abort();
    await task.done;
    this.tasks.delete(key);
  }
}

/** The key of a fork's restore among the driver's tasks. */
export const forkTask = (serviceId: string) => `restore:${serviceId}`;
