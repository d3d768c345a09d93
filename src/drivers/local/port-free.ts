// Whether a TCP port is free, before a server is started on it.

import { createServer } from 'node:net';

/**
 * Whether nothing listens on `port` on any IPv4 address. A server that can
 * bind one address of several starts anyway, and would leave clients of the
 * others unserved: checked before it is started.
 */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host: '0.0.0.0', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}
