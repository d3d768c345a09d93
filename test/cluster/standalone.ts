// The cluster tests' topology (cluster.ts) outside node:test: for a
// benchmark (bench/bench-cluster.ts) and for a person trying several hosts
// on one machine (try-hosts.ts). cluster.ts ties its clean-ups to a
// node:test context; here a context of its own keeps them and runs them,
// in the order they were registered (as node:test runs `after` hooks),
// on close, whatever the outcome, or when the process is stopped (the
// caller's `onStop`).

import type { TestContext } from 'node:test';
import { type Cluster, cluster, type ClusterOptions } from './cluster.js';

export interface StandaloneCluster {
  c: Cluster;
  /** Tears everything down (processes, namespaces, store, users); `failed` prints the agents' last lines. */
  close(failed: boolean): Promise<void>;
}

/**
 * The topology of `o`, torn down by `close`; `onStop` registers that
 * tear-down for an interrupted run (Ctrl-C) and returns its forget.
 */
export async function standaloneCluster(
  o: ClusterOptions,
  onStop: (fn: () => Promise<void>) => () => void,
): Promise<StandaloneCluster> {
  const hooks: (() => unknown)[] = [];
  const ctx = {
    passed: true,
    after(fn: () => unknown) {
      hooks.push(fn);
    },
    afterEach() {
      // No subtests here.
    },
  };
  const close = async (failed: boolean) => {
    forget();
    ctx.passed = !failed;
    for (const hook of hooks.splice(0)) {
      try {
        await hook();
      } catch (err) {
        console.error(`clean-up: ${(err as Error).message}`);
      }
    }
  };
  const forget = onStop(() => close(true));
  try {
    return { c: await cluster(ctx as unknown as TestContext, o), close };
  } catch (err) {
    await close(true);
    throw err;
  }
}
