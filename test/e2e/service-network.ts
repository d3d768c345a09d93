// What the end-to-end tests read of a service's network namespace from the
// host (src/drivers/local/network/): its gateway, the address on the host
// side of its veth, from which this host's loopback clients (translated)
// and HAProxy arrive in the service's namespace.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Layout } from '../../src/drivers/local/layout.js';
import { vethName } from '../../src/drivers/local/network/addresses.js';

/** The gateway of service (or replica set) `id` of the installation on `dataDir`. */
export function gatewayOf(dataDir: string, id: string): string {
  const tag = readFileSync(new Layout(dataDir).installationFile, 'utf8').trim();
  const shown = JSON.parse(
    execFileSync('ip', ['-j', '-4', 'addr', 'show', 'dev', vethName(tag, id)], {
      encoding: 'utf8',
    }),
  ) as { addr_info: { local: string }[] }[];
  const local = shown[0]?.addr_info[0]?.local;
  if (local === undefined) throw new Error(`service ${id} has no gateway`);
  return local;
}
