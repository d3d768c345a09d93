// Whether a TCP port is free, before a server is started on it. On the
// host this is lib/port-probe.ts's probe, the one Basin also uses before it
// hands a port out: a server that can bind one address of several (IPv4,
// IPv6) starts anyway and would leave clients of the others unserved, so
// every address family is checked.

import { portIsFree } from '../../../lib/port-probe.js';
import { DriverError } from '../../driver.js';
import { listensIn } from '../network/namespace.js';
import type { ServiceNetworks } from '../network/service-networks.js';

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
