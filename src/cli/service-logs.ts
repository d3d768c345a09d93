// `basin service logs`: a service's log entries, newest first, read page by
// page through the client's paging (a page may be short, even empty, and
// still not the last).

import type { LogEntry, LogQuery } from '../client/index.js';
import type { ApiCommand } from './command.js';
import {
  checkOutput,
  logLines,
  OUTPUT_OPTION,
  PROJECT_OPTION,
  wantsJson,
} from './service-format.js';

const DEFAULT_LIMIT = 100;

export const serviceLogsCommand: ApiCommand = {
  kind: 'api',
  name: 'logs',
  args: ['service_id'],
  options: {
    ...PROJECT_OPTION,
    ...OUTPUT_OPTION,
    severity: {
      value: 'level',
      multiple: true,
      help: 'only entries of this severity (ERROR, WARNING, LOG…); repeat for several',
    },
    search: { value: 'text', multiple: true, help: 'only entries containing it; repeat: all must' },
    since: { value: 'time', help: 'only entries after this RFC 3339 time' },
    until: { value: 'time', help: 'only entries before this RFC 3339 time' },
    node: { value: 'n', help: 'the node: 0 the primary (default), 1… HA replicas' },
    source: {
      value: 'source',
      help: "basin: only Basin's own entries (restarts, failures, failovers); database: only the server's",
    },
    limit: { value: 'n', help: `at most this many entries (default ${DEFAULT_LIMIT}; 0: all)` },
  },
  usage: [
    [
      'logs <service_id> [--severity <level>]… [--search <text>]… [--limit <n>]',
      'show log entries, newest first',
    ],
  ],
  details: [
    "Shows a service's log entries, newest first: the database's, and Basin's own",
    '(`basin: …`) that say why a service is UNSTABLE. Filters combine: any of the',
    "severities, all of the search terms. --source basin shows Basin's entries only:",
    'a database role can log any text, `basin: …` too, but never an entry of that source.',
  ].join('\n'),
  examples: [
    'basin service logs d1k5vk7hf2',
    'basin service logs d1k5vk7hf2 --severity ERROR --severity FATAL --search relation',
    'basin service logs d1k5vk7hf2 --source basin',
  ],
  check: (opt) => {
    const limit = opt('limit');
    if (limit !== undefined && !/^\d+$/.test(limit))
      return `--limit must be a whole number; got ${limit}.`;
    const node = opt('node');
    if (node !== undefined && !/^\d+$/.test(node)) return `--node must be a number; got ${node}.`;
    const source = opt('source');
    if (source !== undefined && source !== 'basin' && source !== 'database')
      return `--source must be basin or database; got ${source}.`;
    return checkOutput(opt);
  },
  async run(c) {
    const limit = Number(c.opt('limit') ?? DEFAULT_LIMIT);
    const query: LogQuery = {
      ...(c.opts('severity').length > 0 ? { severities: c.opts('severity') } : {}),
      ...(c.opts('search').length > 0 ? { search: c.opts('search') } : {}),
      ...(c.opt('since') === undefined ? {} : { since: c.opt('since') as string }),
      ...(c.opt('until') === undefined ? {} : { until: c.opt('until') as string }),
      ...(c.opt('node') === undefined ? {} : { node: c.opt('node') as string }),
      ...(c.opt('source') === undefined ? {} : { source: c.opt('source') as string }),
    };
    const entries: LogEntry[] = [];
    const service = { project_id: c.projectId, service_id: c.args[0] as string };
    for await (const entry of c.api.logs(service, query)) {
      entries.push(entry);
      if (limit > 0 && entries.length >= limit) break;
    }
    if (wantsJson(c)) c.print(entries);
    else c.out(logLines(entries));
  },
};
