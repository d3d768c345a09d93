// An installation of several hosts on this one machine for a benchmark: the
// cluster tests' namespace topology (test/cluster/cluster.ts: a switch, a
// namespace per host, a PostgreSQL store, `dist/main.js --host-listen`, a
// `basin host run` agent per host), made exactly as the tests make it. That
// maker ties its clean-up to a node:test context; a benchmark runs outside
// node:test, so it gets a context of its own here that keeps the clean-ups
// and runs them, in the order they were registered (as node:test runs
// `after` hooks), when the benchmark is done, whatever its outcome, or
// when the run is interrupted (children.ts onStop).

import type { TestContext } from 'node:test';
import { type Cluster, cluster, type ClusterOptions } from '../test/cluster/cluster.js';
import { onStop } from './children.js';

export interface BenchCluster {
  c: Cluster;
  /** Tears everything down (processes, namespaces, store, users); `failed` prints the agents' last lines. */
  close(failed: boolean): Promise<void>;
}

export async function benchCluster(o: ClusterOptions): Promise<BenchCluster> {
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
  // An interrupted run (Ctrl-C) tears it down too.
  const forget = onStop(() => close(true));
  try {
    return { c: await cluster(ctx as unknown as TestContext, o), close };
  } catch (err) {
    await close(true);
    throw err;
  }
}
