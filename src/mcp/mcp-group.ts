// `basin mcp`: a Model Context Protocol server over standard input and
// output, for an agent (Claude Desktop, Claude Code, Cursor…) to drive
// Basin's services with the login the rest of the CLI uses (`basin login`,
// or BASIN_URL and BASIN_API_KEY). Tools are in tools.ts; standard output
// carries only the protocol, notes go to standard error. The server itself
// is run-mcp.ts.

import type { CliGroup } from '../cli/command.js';
import { PROJECT_OPTION } from '../cli/service-format.js';
import { parseListen } from './listen.js';

export const mcpGroup: CliGroup = {
  name: 'mcp',
  summary: 'Serve the Model Context Protocol on stdio: tools for an AI agent.',
  standalone: true,
  commands: [
    {
      kind: 'api',
      name: 'mcp',
      args: [],
      options: {
        ...PROJECT_OPTION,
        'read-only': { help: 'offer only the tools that change nothing; SQL is read-only' },
        http: {
          value: 'host:port',
          help: "serve Streamable HTTP on /mcp there instead of stdio (requests bear the login's key)",
        },
        ca: {
          value: 'file',
          help: "the installation's CA certificate, for the SQL tool (default: as `basin service psql`)",
        },
      },
      usage: [
        ['mcp [--read-only] [--ca <file>]', 'serve MCP tools over standard input and output'],
      ],
      details: [
        'Serves the Model Context Protocol over standard input and output, as the',
        'login (`basin login`, or BASIN_URL and BASIN_API_KEY) allows: service_list,',
        'service_get, service_logs and db_execute_query; without --read-only also',
        'service_create, service_fork, service_start, service_stop, service_resize',
        'and service_delete. db_execute_query runs one statement in a read-only',
        'transaction (unless asked otherwise), at most 1000 rows and 60 s.',
        '--http serves the same tools over Streamable HTTP on http://<host:port>/mcp',
        "(stateless); each request must bear the login's key (Authorization: Bearer).",
      ].join('\n'),
      examples: ['basin mcp', 'basin mcp --read-only', 'basin mcp --http 127.0.0.1:8765'],
      check: (opt) => {
        const http = opt('http');
        const listen = http === undefined ? undefined : parseListen(http);
        return typeof listen === 'string' ? listen : undefined;
      },
      async run(c) {
        // Loaded here, not with the group: the MCP SDK (zod, ajv) and `pg`
        // are for this command alone (docs/architecture.md §6).
        const { runMcp } = await import('./run-mcp.js');
        await runMcp(c);
      },
    },
  ],
};
