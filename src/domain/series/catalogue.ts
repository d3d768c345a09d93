// The metric series Basin samples of every running node, and what each one
// accepts. Names the vendor's document lists keep its names (and its rule
// that those take no `fn`: they are answered with their default, LAST);
// Basin's own are `basin_…`. Gauges refuse RATE and INCREASE (a rate of a
// level means nothing); counters refuse the percentiles (the vendor keeps
// percentiles for sketches, and a percentile of a counter's running total
// means nothing either).

export const FNS = [
  'RATE',
  'INCREASE',
  'SUM',
  'AVG',
  'MIN',
  'MAX',
  'COUNT',
  'P50',
  'P90',
  'P99',
  'LAST',
] as const;
export type Fn = (typeof FNS)[number];

export type MetricKind = 'gauge' | 'counter';

export interface MetricDef {
  kind: MetricKind;
  /** The labels its series carry: a filter on any other key is refused. */
  labels: readonly string[];
  /** The fns a request may name; LAST is used when it names none. */
  accepts: readonly Fn[];
  description: string;
}

const NODE = ['node', 'role'] as const;
/** The vendor's rule for its system and connection metrics: no fn at all. */
const NONE: readonly Fn[] = [];
const GAUGE: readonly Fn[] = ['SUM', 'AVG', 'MIN', 'MAX', 'COUNT', 'P50', 'P90', 'P99', 'LAST'];
const COUNTER: readonly Fn[] = ['RATE', 'INCREASE', 'SUM', 'AVG', 'MIN', 'MAX', 'COUNT', 'LAST'];

export const METRICS = {
  timescale_cloud_system_cpu_usage_millicores: {
    kind: 'gauge',
    labels: NODE,
    accepts: NONE,
    description: 'CPU used by the node, thousandths of a core',
  },
  timescale_cloud_system_memory_usage_bytes: {
    kind: 'gauge',
    labels: NODE,
    accepts: NONE,
    description: "the node's proportional resident memory",
  },
  timescale_cloud_system_disk_usage_bytes: {
    kind: 'gauge',
    labels: NODE,
    accepts: NONE,
    description: "the service's data on disk",
  },
  timescale_cloud_database_num_connections: {
    kind: 'gauge',
    labels: NODE,
    accepts: NONE,
    description: 'client backends (pg_stat_activity)',
  },
  basin_database_xact_commit_total: {
    kind: 'counter',
    labels: NODE,
    accepts: COUNTER,
    description: 'transactions committed since the server started (pg_stat_database)',
  },
  basin_database_xact_rollback_total: {
    kind: 'counter',
    labels: NODE,
    accepts: COUNTER,
    description: 'transactions rolled back since the server started (pg_stat_database)',
  },
  basin_replication_lag_bytes: {
    kind: 'gauge',
    labels: NODE,
    accepts: GAUGE,
    description: 'WAL the replica has yet to replay, as the primary sees it',
  },
  basin_replication_lag_seconds: {
    kind: 'gauge',
    labels: NODE,
    accepts: GAUGE,
    description: "the replica's replay lag (pg_stat_replication.replay_lag)",
  },
  basin_pooler_client_connections: {
    kind: 'gauge',
    labels: NODE,
    accepts: GAUGE,
    description:
      "clients logged in to the service's pooler, served or waiting (PgBouncer's SHOW POOLS)",
  },
  basin_pooler_server_connections: {
    kind: 'gauge',
    labels: NODE,
    accepts: GAUGE,
    description: "server connections the service's pooler holds to its primary, in use or idle",
  },
} as const satisfies Record<string, MetricDef>;

export type MetricName = keyof typeof METRICS;

export function isMetricName(name: string): name is MetricName {
  return Object.hasOwn(METRICS, name);
}

/** One value of one series, as a driver samples it. */
export interface SeriesSample {
  name: MetricName;
  labels: Readonly<Record<string, string>>;
  value: number;
}
