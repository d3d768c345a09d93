// An installation of several hosts on this one machine for a benchmark: the
// cluster tests' namespace topology (test/cluster/cluster.ts), made exactly
// as the tests make it, outside node:test (test/cluster/standalone.ts), torn
// down when the benchmark is done, whatever its outcome, or when the run is
// interrupted (children.ts onStop).

import type { ClusterOptions } from '../test/cluster/cluster.js';
import { type StandaloneCluster, standaloneCluster } from '../test/cluster/standalone.js';
import { onStop } from './children.js';

export type BenchCluster = StandaloneCluster;

export function benchCluster(o: ClusterOptions): Promise<BenchCluster> {
  return standaloneCluster(o, onStop);
}
