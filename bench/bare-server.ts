// Bench child: the baseline. A bare node:http server that answers every
// request with one fixed JSON body, with the headers Fastify sends, and does
// nothing else: no routing, no auth, no storage, no serialization.
//
// IPC: waits for { type: 'body', body }, then answers { type: 'ready', port }.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exitWithParent, failChild } from './children.js';

function serve(text: string): void {
  const body = Buffer.from(text, 'utf8');
  const headers = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(body.length),
  };
  const server = createServer((_req, res) => {
    res.writeHead(200, headers);
    res.end(body);
  });
  // Fastify's default, so idle connections live as long on both servers.
  server.keepAliveTimeout = 72_000;
  exitWithParent(
    () => new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections()),
  );
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.send?.({ type: 'ready', port });
  });
}

process.once('message', (m: { type?: string; body?: unknown }) => {
  try {
    if (m?.type !== 'body' || typeof m.body !== 'string')
      throw new Error('expected a body message');
    serve(m.body);
  } catch (err) {
    failChild('bare-server', err);
  }
});
