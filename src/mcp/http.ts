// `basin mcp --http host:port`: the same tools over Streamable HTTP, for a
// client that cannot spawn a process. Stateless: each POST gets a server and
// a transport of its own (the passwords of services it created are shared,
// in memory). A request must carry the login's own Basin key as its bearer:
// the listener adds no authority (anyone reaching it must already hold the
// key), so another user of the machine cannot drive Basin through it.

import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { registerTools, type ToolContext } from './tools.js';

export async function serveHttp(
  listen: { host: string; port: number },
  apiKey: string,
  tools: ToolContext,
  note: (text: string) => void,
): Promise<void> {
  const expected = Buffer.from(`Bearer ${apiKey}`);
  const authorized = (req: IncomingMessage) => {
    const given = Buffer.from(req.headers.authorization ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const http = createServer((req, res) => void handle(req, res));
  async function handle(req: IncomingMessage, res: ServerResponse) {
    const refuse = (status: number, code: string, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code, message }));
    };
    if (req.url !== '/mcp') return refuse(404, 'NOT_FOUND', 'The MCP endpoint is /mcp.');
    if (!authorized(req)) {
      return refuse(
        401,
        'UNAUTHORIZED',
        "Give the Basin key of the login as 'Authorization: Bearer <key>'.",
      );
    }
    if (req.method !== 'POST') {
      return refuse(405, 'METHOD_NOT_ALLOWED', 'This server is stateless: POST only.');
    }
    const server = new McpServer({ name: 'basin', version: '0.1.0' });
    registerTools(server, tools);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void transport.close().then(() => server.close()));
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res);
    } catch (err) {
      if (!res.headersSent) refuse(400, 'INVALID_REQUEST', (err as Error).message);
    }
  }
  await new Promise<void>((ok, fail) => {
    http.once('error', fail);
    http.listen(listen.port, listen.host, ok);
  });
  const a = http.address();
  note(
    `basin mcp: serving on http://${typeof a === 'object' && a ? `${a.address}:${a.port}` : ''}/mcp\n`,
  );
  await new Promise<void>((done) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, done);
  });
  await new Promise((done) => http.close(done));
}
