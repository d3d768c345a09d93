// One sampling of a service's nodes for the metric series (domain/series/),
// called by Basin's collector on its timer, never on a request. Each running
// node is asked, over Basin's administrative connection (admin.ts, bounded),
// for its client connections and its transaction counters; the primary also
// for each standby's replay lag. CPU and memory are the process sampler's
// last sample of the primary (metrics-sampler.ts), storage the storage
// watch's. A node that is down or does not answer is left out: its series
// get a gap, which the API shows as empty buckets.
//
// The pooler, where it runs, is read too (pooler-sample.ts): its clients and
// server connections, under the primary's labels (it serves the primary).
// A read replica set is sampled the same way (its nodes are all replicas).
//
// Everything a node reports is its tenant's to forge (tsdbadmin can reset
// or inflate its own counters): it lands only in that service's series.

import { nodeName } from '../../../domain/service-nodes.js';
import type { SeriesSample } from '../../../domain/series/catalogue.js';
import { type AdminTarget, withAdmin } from '../node/admin.js';
import { postmasterStatus } from '../node/postmaster.js';
import type { ProcessUsage } from './metrics-sampler.js';
import type { PoolerCounts } from './pooler-sample.js';

const MB = 1024 * 1024;

interface NodeRow {
  standby: boolean;
  connections: string;
  commits: string | null;
  rollbacks: string | null;
}

interface LagRow {
  name: string;
  lag_bytes: string | null;
  lag_seconds: number | null;
}

/** A node of the service, as the driver's service side names it (this side decides nothing). */
export interface SampledNode {
  index: number;
  admin: AdminTarget;
}

/** A service's running pooler: the node it serves (the recorded primary) and how to read it. */
export interface SampledPooler {
  node: number;
  read: () => Promise<PoolerCounts | undefined>;
}

export async function sampleServiceSeries(
  nodes: readonly SampledNode[],
  primaryUsage: ProcessUsage | undefined,
  storageBytes: number | undefined,
  pooler?: SampledPooler,
  /**
   * A read replica set's nodes (all replicas): its usage (the sampler's
   * node of the set) and pooler go under the first node that answered,
   * not under a primary it does not have.
   */
  replicaSet = false,
): Promise<SeriesSample[]> {
  const out: SeriesSample[] = [];
  // Read beside the nodes: it waits on another process.
  const pooled = pooler?.read().catch(() => undefined);
  const lags = new Map<string, LagRow>();
  const roles = new Map<number, 'primary' | 'replica'>();
  for (const n of nodes) {
    const pm = await postmasterStatus(n.admin.pgdata);
    if (!pm.up || (pm.state !== 'ready' && pm.state !== 'standby')) continue;
    try {
      await withAdmin(n.admin, 'postgres', async (c) => {
        const { rows } = await c.query<NodeRow>(
          `SELECT pg_is_in_recovery() AS standby,
                  (SELECT count(*) FROM pg_stat_activity
                    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())::text AS connections,
                  (SELECT sum(xact_commit) FROM pg_stat_database)::text AS commits,
                  (SELECT sum(xact_rollback) FROM pg_stat_database)::text AS rollbacks`,
        );
        const r = rows[0];
        if (r === undefined) return;
        const labels = { node: String(n.index), role: r.standby ? 'replica' : 'primary' };
        roles.set(n.index, r.standby ? 'replica' : 'primary');
        out.push({
          name: 'timescale_cloud_database_num_connections',
          labels,
          value: Number(r.connections),
        });
        if (r.commits !== null)
          out.push({ name: 'basin_database_xact_commit_total', labels, value: Number(r.commits) });
        if (r.rollbacks !== null)
          out.push({
            name: 'basin_database_xact_rollback_total',
            labels,
            value: Number(r.rollbacks),
          });
        if (!r.standby && nodes.length > 1) {
          const lag = await c.query<LagRow>(
            `SELECT application_name AS name,
                    pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint::text AS lag_bytes,
                    extract(epoch FROM replay_lag)::float8 AS lag_seconds
               FROM pg_stat_replication`,
          );
          for (const l of lag.rows) lags.set(l.name, l);
        }
      });
    } catch {
      // Down, slow or hostile: this node is skipped this time.
    }
  }
  for (const n of nodes) {
    const l = lags.get(nodeName(n.index));
    if (l === undefined || roles.get(n.index) === 'primary') continue;
    const labels = { node: String(n.index), role: 'replica' };
    if (l.lag_bytes !== null)
      out.push({ name: 'basin_replication_lag_bytes', labels, value: Number(l.lag_bytes) });
    // NULL when the standby has caught up and nothing was written since: no lag.
    out.push({ name: 'basin_replication_lag_seconds', labels, value: l.lag_seconds ?? 0 });
  }
  const primary = replicaSet
    ? nodes.find((n) => roles.has(n.index))
    : nodes.find((n) => roles.get(n.index) === 'primary');
  const role = replicaSet ? 'replica' : 'primary';
  if (primary !== undefined) {
    const labels = { node: String(primary.index), role };
    if (primaryUsage !== undefined) {
      out.push({
        name: 'timescale_cloud_system_cpu_usage_millicores',
        labels,
        value: primaryUsage.milliCpu,
      });
      out.push({
        name: 'timescale_cloud_system_memory_usage_bytes',
        labels,
        value: primaryUsage.memoryMb * MB,
      });
    }
    if (storageBytes !== undefined)
      out.push({ name: 'timescale_cloud_system_disk_usage_bytes', labels, value: storageBytes });
  }
  const counts = await pooled;
  if (pooler !== undefined && counts !== undefined) {
    const labels = { node: String(primary?.index ?? pooler.node), role };
    out.push({ name: 'basin_pooler_client_connections', labels, value: counts.clients });
    out.push({ name: 'basin_pooler_server_connections', labels, value: counts.servers });
  }
  return out;
}
