// The metrics listener (`--metrics-listen host:port`, off by default): a
// plain HTTP server of its own that answers GET /metrics and nothing else.
// It is not on the API's port: the series span every project, so they are
// for the operator who chose where this listens, never for a tenant's
// credential (docs/decisions.md, Prometheus metrics).

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BasinMetrics } from './basin-metrics.js';

export interface MetricsListener {
  /** The bound address (with port 0 the system chose it). */
  address: AddressInfo;
  close(): Promise<void>;
}

export async function listenMetrics(
  metrics: BasinMetrics,
  host: string,
  port: number,
): Promise<MetricsListener> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const answer = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ code: status === 404 ? 'NOT_FOUND' : 'METHOD_NOT_ALLOWED', message }),
      );
    };
    if (path !== '/metrics') return answer(404, 'only /metrics is served here');
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, 'use GET /metrics');
    metrics.render().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            code: 'UNAVAILABLE',
            message: `metrics could not be collected: ${(err as Error).message}`,
          }),
        );
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: server.address() as AddressInfo,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
