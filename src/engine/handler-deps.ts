// What the engine's handlers, and the watchers beside them (backups,
// failover, storage, the driver's notes), are handed: a module of its own so
// that they import it without importing the handlers, which import them.

import type { BackupPolicy } from '../domain/backups.js';
import type { Driver } from '../drivers/driver.js';
import type { Clock } from '../lib/clock.js';
import type { Store } from '../store/store.js';
import type { NetworkProvisioner } from './network-provisioner.js';

export interface HandlerDeps {
  store: Store;
  driver: Driver;
  provisioner: NetworkProvisioner;
  clock: Clock;
  /** How often services are backed up and how far back (DEFAULT_BACKUP_POLICY when absent). */
  backups?: BackupPolicy;
}
