// How `basin service …` prints: `--output json` (or the global --json) the
// API's own bodies, indented; `--output table` (the default) columns for a
// list and one field a line for a single service. Empty cells are `-`.

import type { LogEntry, Service } from '../client/index.js';
import type { BaseContext, CliOption } from './command.js';
import { table } from './table.js';

export const OUTPUTS = ['table', 'json'] as const;

export const OUTPUT_OPTION: Record<string, CliOption> = {
  output: { value: 'format', help: 'table (the default) or json' },
};
export const PROJECT_OPTION: Record<string, CliOption> = {
  project: { value: 'project_id', help: 'the project (default: the one `basin login` chose)' },
};

export const checkOutput = (opt: (name: string) => string | undefined) => {
  const output = opt('output');
  return output === undefined || (OUTPUTS as readonly string[]).includes(output)
    ? undefined
    : `--output must be table or json; got ${output}.`;
};

export function wantsJson(c: BaseContext): boolean {
  return c.json || c.opt('output') === 'json';
}

/** `1000m/4GB`, or `shared` for a service without a dedicated allocation. */
export function size(s: Service): string {
  const spec = s.resources?.[0]?.spec;
  if (spec?.cpu_millis === undefined || spec.memory_gbs === undefined) return 'shared';
  return `${spec.cpu_millis}m/${spec.memory_gbs}GB`;
}

const endpoint = (e: { host: string; port: number } | undefined) =>
  e ? `${e.host}:${e.port}` : '-';

export function serviceTable(services: readonly Service[]): string {
  return table(
    ['ID', 'NAME', 'STATUS', 'TYPE', 'REGION', 'SIZE', 'ENDPOINT'],
    services.map((s) => [
      s.service_id ?? '-',
      s.name ?? '-',
      s.status ?? '-',
      s.service_type ?? '-',
      s.region_code ?? '-',
      size(s),
      endpoint(s.endpoint),
    ]),
  );
}

/** One service, a field a line. */
export function serviceFields(s: Service): string {
  const rows: [string, string | undefined][] = [
    ['ID', s.service_id],
    ['NAME', s.name],
    ['STATUS', s.status],
    ['TYPE', s.service_type],
    ['REGION', s.region_code],
    ['SIZE', size(s)],
    ['ENDPOINT', endpoint(s.endpoint)],
    ['POOLER', s.connection_pooler?.endpoint && endpoint(s.connection_pooler.endpoint)],
    ['VPC', s.vpc_endpoint && `${s.vpc_endpoint.vpc_id} (${endpoint(s.vpc_endpoint)})`],
    [
      'HA REPLICAS',
      s.ha_replicas &&
        `${s.ha_replicas.replica_count} (${s.ha_replicas.sync_replica_count} synchronous)`,
    ],
    ['ENVIRONMENT', s.metadata?.environment],
    ['FORKED FROM', s.forked_from?.service_id],
    [
      'METRICS',
      s.metrics &&
        `${s.metrics.milli_cpu}m CPU, ${s.metrics.memory_mb} MB memory, ${s.metrics.storage_mb} MB storage`,
    ],
    ['REPLICA SETS', s.read_replica_sets?.map((r) => r.id).join(', ') || undefined],
    ['CREATED', s.created],
    ['PASSWORD', s.initial_password],
  ];
  const shown = rows.filter(([key, v]) => v !== undefined || key !== 'PASSWORD');
  const width = Math.max(...shown.map(([k]) => k.length));
  return shown.map(([k, v]) => `${k.padEnd(width)}  ${v ?? '-'}\n`).join('');
}

/** Log entries, one a line: time, severity, message (newest first, as the API answers). */
export function logLines(entries: readonly LogEntry[]): string {
  return entries.map((e) => `${e.timestamp}  ${e.severity.padEnd(7)}  ${e.message}\n`).join('');
}

/** Prints one service as asked. */
export function printService(c: BaseContext, s: Service): void {
  if (wantsJson(c)) c.print(s);
  else c.out(serviceFields(s));
}
