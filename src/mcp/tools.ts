// The MCP server's tools: Basin's service verbs, named as the vendor's own
// MCP server names them (service_list, service_get, …, db_execute_query;
// the metrics series tools, which the vendor registers only behind an
// experimental flag, by the operations' names),
// each one call of the typed client (basin/client), plus the bounded SQL
// tool (sql.ts). Inputs and outputs are declared with zod, as the SDK
// expects; every answer is the API's own JSON. create and fork return the
// new service's initial password once, as the API does, and the server keeps
// it in memory for db_execute_query.

import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { BasinError, type BasinClient, type Service } from '../client/index.js';
import { boundsOf, ROW_CAP, TIMEOUT_MS } from './sql-bounds.js';
import { runSql } from './sql.js';

export interface ToolContext {
  api: BasinClient;
  projectId: string;
  /** The installation's CA certificate file, for verify-full; undefined: not verified. */
  ca: string | undefined;
  readOnly: boolean;
  /** Passwords of services created or forked by this server, for db_execute_query. */
  passwords: Map<string, string>;
}

/** The names of the tools that change something: --read-only leaves them out. */
export const WRITE_TOOLS = [
  'service_create',
  'service_fork',
  'service_start',
  'service_stop',
  'service_resize',
  'service_delete',
];

const serviceId = z.string().min(1).describe('the service id');
const wait = z
  .boolean()
  .optional()
  .describe('wait until the service is READY (DELETED for a delete) before answering');
const serviceOut = { service: z.looseObject({ service_id: z.string(), status: z.string() }) };
const size = {
  cpu_millis: z.string().optional().describe('milli-cores as a string (e.g. "1000"), or "shared"'),
  memory_gbs: z.string().optional().describe('gigabytes as a string (e.g. "4"), or "shared"'),
};

export function registerTools(server: McpServer, t: ToolContext): void {
  const passwords = t.passwords;
  const path = (id: string) => ({ params: { path: { project_id: t.projectId, service_id: id } } });
  const one = '/v1/projects/{project_id}/services/{service_id}' as const;
  const waited = async (svc: Service, ask: boolean | undefined) =>
    ask ? t.api.waitFor(svc, 'READY', { timeoutMs: 10 * 60_000 }) : svc;

  server.registerTool(
    'service_list',
    {
      annotations: { readOnlyHint: true },
      description: 'List the services of the project.',
      inputSchema: {},
      outputSchema: { services: z.array(serviceOut.service) },
    },
    guarded(async () => {
      const services = await t.api.GET('/v1/projects/{project_id}/services', {
        params: { path: { project_id: t.projectId } },
      });
      return { services };
    }),
  );

  server.registerTool(
    'service_get',
    {
      annotations: { readOnlyHint: true },
      description:
        'Get one service: status, endpoint, size, and its current metrics (memory_mb, milli_cpu, storage_mb).',
      inputSchema: { service_id: serviceId },
      outputSchema: serviceOut,
    },
    guarded(async ({ service_id }) => ({ service: await t.api.GET(one, path(service_id)) })),
  );

  server.registerTool(
    'service_logs',
    {
      annotations: { readOnlyHint: true },
      description: "A service's log entries, newest first.",
      inputSchema: {
        service_id: serviceId,
        limit: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .optional()
          .describe('at most this many (default 100)'),
        severity: z
          .string()
          .optional()
          .describe('only entries of this severity (ERROR, WARNING, LOG…)'),
        search: z.string().optional().describe('only entries containing this text'),
      },
      outputSchema: { entries: z.array(z.looseObject({})) },
    },
    guarded(async ({ service_id, limit, severity, search }) => {
      const entries = [];
      for await (const e of t.api.logs(
        { project_id: t.projectId, service_id },
        {
          ...(severity === undefined ? {} : { severity: [severity] }),
          ...(search === undefined ? {} : { search: [search] }),
        },
      )) {
        entries.push(e);
        if (entries.length >= (limit ?? 100)) break;
      }
      return { entries };
    }),
  );

  server.registerTool(
    'service_metrics_available_series',
    {
      annotations: { readOnlyHint: true },
      description:
        "The names of a service's metric series (CPU, memory, storage, connections, transactions, replication lag): ask service_metrics_series for one of them.",
      inputSchema: { service_id: serviceId },
      outputSchema: { series: z.array(z.string()) },
    },
    guarded(async ({ service_id }) => ({
      series: await t.api.GET(
        '/v1/projects/{project_id}/services/{service_id}/metrics/available-series',
        path(service_id),
      ),
    })),
  );

  server.registerTool(
    'service_metrics_series',
    {
      annotations: { readOnlyHint: true },
      description: [
        "One metric series of a service over a time window, in buckets: each bucket's value reduced by fn",
        '(LAST by default; RATE and INCREASE for counters such as transactions), null where no sample fell.',
        'Samples are kept 24 hours at their interval and 7 days as 5-minute summaries.',
      ].join(' '),
      inputSchema: {
        service_id: serviceId,
        name: z.string().min(1).describe('a name from service_metrics_available_series'),
        from: z.string().describe('start of the window (RFC 3339)'),
        to: z.string().describe('end of the window (RFC 3339)'),
        bucket_seconds: z.number().int().min(60).optional().describe('bucket size, at least 60'),
        fn: z
          .enum([
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
          ])
          .optional(),
        filters: z
          .array(z.object({ key: z.string(), value: z.string() }))
          .optional()
          .describe('label matches, e.g. {key: "role", value: "primary"}'),
      },
      outputSchema: {
        series: z.array(
          z.looseObject({
            labels: z.record(z.string(), z.string()),
            data: z.array(z.object({ time: z.string(), value: z.number().nullable() })),
          }),
        ),
      },
    },
    guarded(async ({ service_id, ...body }) => ({
      series: await t.api.POST('/v1/projects/{project_id}/services/{service_id}/metrics/series', {
        ...path(service_id),
        body,
      }),
    })),
  );

  server.registerTool(
    'db_execute_query',
    {
      annotations: { readOnlyHint: t.readOnly, destructiveHint: !t.readOnly },
      description: [
        'Run one SQL statement on a service as tsdbadmin, over TLS verified against the installation CA.',
        `Read-only transaction unless read_only is false${t.readOnly ? ' (not allowed: this server is read-only)' : ''};`,
        `at most max_rows rows come back (default ${ROW_CAP.default}, at most ${ROW_CAP.max});`,
        `statement_timeout timeout_ms (default ${TIMEOUT_MS.default}, at most ${TIMEOUT_MS.max}).`,
        'The password: the one given, else the initial password of a service created or forked in this session.',
      ].join(' '),
      inputSchema: {
        service_id: serviceId,
        query: z.string().min(1).describe('exactly one SQL statement'),
        password: z.string().optional().describe("tsdbadmin's password"),
        max_rows: z.number().int().min(1).optional(),
        timeout_ms: z.number().int().min(1).optional(),
        read_only: z.boolean().optional().describe('false to allow writes (committed)'),
      },
      outputSchema: {
        command: z.string(),
        row_count: z.number().nullable(),
        columns: z.array(z.string()),
        rows: z.array(z.record(z.string(), z.unknown())),
        truncated: z.boolean(),
        read_only: z.boolean(),
      },
    },
    guarded(async (a) => {
      if (t.readOnly && a.read_only === false) {
        throw new ToolFailure(
          'This MCP server is read-only (basin mcp --read-only): writes are refused.',
        );
      }
      const svc = await t.api.GET(one, path(a.service_id));
      if (!svc.endpoint)
        throw new ToolFailure(`Service ${a.service_id} has no endpoint yet (${svc.status}).`);
      const password = a.password ?? passwords.get(a.service_id);
      if (password === undefined) {
        throw new ToolFailure(
          `No password for ${a.service_id}: give password (the service was not created in this session).`,
        );
      }
      const result = await runSql(
        { host: svc.endpoint.host, port: svc.endpoint.port, password, ca: t.ca },
        a.query,
        boundsOf(a, t.readOnly),
      );
      return { ...result };
    }),
  );

  if (t.readOnly) return;

  server.registerTool(
    'service_create',
    {
      annotations: { destructiveHint: false, idempotentHint: false },
      description:
        'Create a service. The answer holds its initial_password, shown once; db_execute_query remembers it for this session.',
      inputSchema: {
        name: z.string().min(1).max(128),
        ...size,
        addons: z.array(z.enum(['time-series', 'ai'])).optional(),
        environment_tag: z.enum(['DEV', 'PROD']).optional(),
        wait,
      },
      outputSchema: serviceOut,
    },
    guarded(async ({ wait: w, ...body }) => {
      const created = await t.api.POST('/v1/projects/{project_id}/services', {
        params: { path: { project_id: t.projectId } },
        body,
      });
      if (created.service_id && created.initial_password)
        passwords.set(created.service_id, created.initial_password);
      const svc = await waited(created, w);
      return { service: { ...svc, initial_password: created.initial_password } };
    }),
  );

  server.registerTool(
    'service_fork',
    {
      annotations: { destructiveHint: false, idempotentHint: false },
      description:
        'Fork a READY service into a new one (NOW, LAST_SNAPSHOT, or PITR at target_time).',
      inputSchema: {
        service_id: serviceId,
        fork_strategy: z.enum(['NOW', 'LAST_SNAPSHOT', 'PITR']).default('NOW'),
        target_time: z.string().optional().describe('RFC 3339; required for PITR'),
        name: z.string().optional(),
        ...size,
        wait,
      },
      outputSchema: serviceOut,
    },
    guarded(async ({ service_id, wait: w, ...body }) => {
      const fork = await t.api.POST(`${one}/forkService`, { ...path(service_id), body });
      if (fork.service_id && fork.initial_password)
        passwords.set(fork.service_id, fork.initial_password);
      const svc = await waited(fork, w);
      return { service: { ...svc, initial_password: fork.initial_password } };
    }),
  );

  for (const action of ['start', 'stop'] as const) {
    server.registerTool(
      `service_${action}`,
      {
        description: `${action === 'start' ? 'Start a stopped' : 'Stop a running'} service.`,
        annotations: { destructiveHint: action === 'stop', idempotentHint: true },
        inputSchema: { service_id: serviceId },
        outputSchema: serviceOut,
      },
      guarded(async ({ service_id }) => ({
        service: await t.api.POST(`${one}/${action}` as `${typeof one}/start`, path(service_id)),
      })),
    );
  }

  server.registerTool(
    'service_resize',
    {
      annotations: { destructiveHint: true, idempotentHint: true },
      description: 'Change the CPU and memory of a READY service (a size of the catalogue).',
      inputSchema: {
        service_id: serviceId,
        cpu_millis: z.string().describe('milli-cores as a string, or "shared"'),
        memory_gbs: z.string().describe('gigabytes as a string, or "shared"'),
        wait,
      },
      outputSchema: serviceOut,
    },
    guarded(async ({ service_id, wait: w, ...body }) => ({
      service: await waited(await t.api.POST(`${one}/resize`, { ...path(service_id), body }), w),
    })),
  );

  server.registerTool(
    'service_delete',
    {
      annotations: { destructiveHint: true, idempotentHint: true },
      description: 'Delete a service and its read replica sets (forks stay).',
      inputSchema: { service_id: serviceId, wait },
      outputSchema: serviceOut,
    },
    guarded(async ({ service_id, wait: w }) => {
      await t.api.DELETE(one, path(service_id));
      if (w) await t.api.waitFor({ project_id: t.projectId, service_id }, 'DELETED');
      passwords.delete(service_id);
      return { service: { service_id, status: w ? 'DELETED' : 'DELETING' } };
    }),
  );
}

/** A failure the caller can act on, said as the tool's answer. */
class ToolFailure extends Error {}

/**
 * A tool's handler: its result as structured content (and the same JSON as
 * text, for clients that read only text); the API's errors, a refused
 * connection or a failed statement as an error result with its message,
 * which the agent reads and acts on, not as a protocol error.
 */
function guarded<A>(fn: (args: A) => Promise<Record<string, unknown>>) {
  return async (args: A) => {
    try {
      const out = await fn(args);
      return {
        content: [{ type: 'text' as const, text: JSON.stringify(out) }],
        structuredContent: out,
      };
    } catch (err) {
      const message =
        err instanceof BasinError
          ? `${err.code}: ${err.message}`
          : err instanceof Error
            ? err.message
            : String(err);
      return { content: [{ type: 'text' as const, text: message }], isError: true };
    }
  };
}
