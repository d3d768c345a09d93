// Bench child: the floor of any Fastify application. Fastify with no logger,
// no hooks, no schema, no plugin, and one route, Basin's pattern for a
// service, answering one pre-serialized JSON body: what Basin costs beyond
// it is Basin's own work (authentication, the read view, rate limits, the
// access log), what it costs beyond the bare node:http server is Fastify's.
//
// IPC: waits for { type: 'body', body }, then answers { type: 'ready', port }.

import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { exitWithParent, failChild } from './children.js';

async function serve(body: string): Promise<void> {
  const app = Fastify({ logger: false });
  app.get('/v1/projects/:project_id/services/:service_id', (_req, reply) => {
    reply.type('application/json; charset=utf-8').send(body);
  });
  exitWithParent(() => app.close());
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  process.send?.({ type: 'ready', port });
}

process.once('message', (m: { type?: string; body?: unknown }) => {
  if (m?.type !== 'body' || typeof m.body !== 'string') {
    failChild('fastify-floor', new Error('expected a body message'));
    return;
  }
  serve(m.body).catch((err: unknown) => failChild('fastify-floor', err));
});
