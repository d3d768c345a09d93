// `basin mcp` itself: the tools (tools.ts) served on standard input and
// output, or over Streamable HTTP with --http (http.ts). mcp-group.ts loads
// this module only when the command runs.

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { type ApiContext, CliFailure } from '../cli/command.js';
import { caCertificate, LOCAL_CA } from '../cli/service-psql.js';
import { serveHttp } from './http.js';
import { parseListen } from './listen.js';
import { registerTools, type ToolContext } from './tools.js';

export async function runMcp(c: ApiContext): Promise<void> {
  const readOnly = c.flag('read-only');
  const ca = caCertificate(c);
  if (ca === undefined) {
    c.note(
      `basin mcp: no CA certificate: db_execute_query will not verify servers. Give --ca <file> (the installation's <data dir>/${LOCAL_CA.join('/')}).\n`,
    );
  }
  const tools: ToolContext = {
    api: c.api,
    projectId: c.projectId,
    ca,
    readOnly,
    passwords: new Map(),
  };
  const http = c.opt('http');
  if (http !== undefined) {
    const listen = parseListen(http);
    if (typeof listen === 'string') throw new CliFailure(listen);
    return serveHttp(listen, c.login.apiKey, tools, c.note);
  }
  const server = new McpServer({ name: 'basin', version: '0.1.0' });
  registerTools(server, tools);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((done) => {
    transport.onclose = done;
    process.stdin.once('end', done);
  });
  await server.connect(transport);
  await closed;
  await server.close();
}
