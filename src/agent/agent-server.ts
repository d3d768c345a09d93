// The host agent's own listener: mutual TLS, and only the control plane may
// call it. The handshake requires a certificate from the installation's CA;
// a host's certificate is from that CA too, so the subject must also be the
// control plane's (CONTROL_PLANE_CN): one host cannot drive another.

import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { CONTROL_PLANE_CN } from '../domain/hosts.js';
import type { AgentIdentity } from './agent-files.js';
import type { TermFence } from './term-fence.js';

export type Route = (req: IncomingMessage) => Promise<{ status: number; body: unknown }>;

export interface AgentServer {
  port: number;
  close(): Promise<void>;
}

export async function serveAgent(
  id: AgentIdentity,
  listen: { host: string; port: number },
  routes: Record<string, Route>,
  fence: TermFence,
): Promise<AgentServer> {
  const server: Server = createServer(
    { cert: id.cert, key: id.key, ca: id.ca, requestCert: true, rejectUnauthorized: true },
    (req, res) => void handle(req, res, routes, fence),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  routes: Record<string, Route>,
  fence: TermFence,
): Promise<void> {
  const send = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const peer = (req.socket as TLSSocket).getPeerCertificate();
  if (peer.subject?.CN !== CONTROL_PLANE_CN) {
    return send(403, {
      code: 'FORBIDDEN',
      message: 'Only the control plane may call a host agent.',
    });
  }
  const route = routes[`${req.method} ${(req.url ?? '').split('?')[0]}`];
  if (!route)
    return send(404, { code: 'NOT_FOUND', message: `No route ${req.method} ${req.url}.` });
  try {
    // A deposed leader's call is refused before it runs (term-fence.ts).
    const admitted = await fence.admit(req);
    if (!admitted.ok) return send(409, { code: 'FENCED', message: admitted.message });
    const { status, body } = await route(req);
    send(status, body);
  } catch (err) {
    send(500, { code: 'INTERNAL', message: (err as Error).message });
  }
}
