// Whether a TCP port is free, before a server is started on it.

import { createServer } from 'node:net';
import { DriverError } from '../../driver.js';
import { listensIn } from '../network/namespace.js';
import type { ServiceNetworks } from '../network/service-networks.js';

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

/**
 * Whether nothing listens on `port` where `id`'s servers listen: in its
 * network namespace (where only its own processes can hold it), or on the
 * host without namespaces.
 */
export async function portFree(
  networks: ServiceNetworks,
  id: string,
  port: number,
): Promise<boolean> {
  const net = networks.get(id);
  if (!net) return portIsFree(port);
  try {
    return !(await listensIn(net.name, port));
  } catch (err) {
    throw new DriverError(
      `Could not look at the ports of ${net.name}: ${(err as Error).message}`,
      true,
    );
  }
}
