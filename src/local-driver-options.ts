// The local driver's options from a configuration: one mapping for the two
// places that run it, the one-machine server (basin.ts) and a host's agent
// (agent/host-agent.ts), so that a flag means the same on both.

import type { Config } from './config.js';
import type { LocalDriverOptions } from './drivers/local/local-driver.js';
import type { Logger } from './lib/logger.js';

export function localDriverOptions(
  config: Config,
  parts: Pick<
    LocalDriverOptions,
    'allocateUid' | 'ca' | 'mayAct' | 'remoteIdentity' | 'patroniSecrets'
  > & {
    log: Logger;
    publicHost?: string;
  },
): LocalDriverOptions {
  return {
    dataDir: config.dataDir,
    publicHost: parts.publicHost ?? config.publicHost,
    serviceUidRange: config.serviceUidRange,
    ...(parts.allocateUid ? { allocateUid: parts.allocateUid } : {}),
    ...(parts.ca ? { ca: parts.ca } : {}),
    ...(parts.remoteIdentity ? { remoteIdentity: parts.remoteIdentity } : {}),
    ...(parts.patroniSecrets ? { patroniSecrets: parts.patroniSecrets } : {}),
    ...(parts.mayAct ? { mayAct: parts.mayAct } : {}),
    privateTmp: config.servicePrivateTmp,
    privateTmpMb: config.serviceTmpSizeMb,
    ...(config.sharedMemoryMb === null ? {} : { sharedMemoryMb: config.sharedMemoryMb }),
    restarts: config.restarts,
    serviceNetwork: config.serviceNetwork,
    repositoryServers: config.repositoryServers,
    ...(config.idleSuspend === null ? {} : { idleSuspend: config.idleSuspend }),
    storage: { allowance: config.storageAllowance, reserve: config.diskReserve },
    log: parts.log,
  };
}
