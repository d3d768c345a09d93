// Bench child: a Basin with the local driver (real PostgreSQL clusters, logger
// off) on a port of its own. Tells the parent, over IPC:
// { type: 'ready', port, projectId, dataDir } as soon as it listens; the
// PostgreSQL template is still being built in the background then.
// On { type: 'pending?' } it answers { type: 'pending', pending } with the
// operations still queued (to explain a service that does not get READY).
// On the way out it stops the clusters it started (they are detached, so
// that in production they outlive Basin).
//
// Environment: BENCH_DATA_DIR (an empty directory), BENCH_API_KEY and
// BENCH_PORT_RANGE (database ports, <min>-<max>).

import { realpathSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createBasin } from '../basin.js';
import { parseConfig } from '../config.js';
import { exitWithParent, failChild } from './children.js';
import { stopProcessesUnder } from './local-basin.js';

async function main(): Promise<void> {
  const dataDir = realpathSync(need('BENCH_DATA_DIR'));
  const config = parseConfig([], {
    BASIN_DATA_DIR: dataDir,
    BASIN_DRIVER: 'local',
    BASIN_BOOTSTRAP_API_KEY: need('BENCH_API_KEY'),
    BASIN_HOST: '127.0.0.1',
    BASIN_PORT: '0',
    BASIN_PORT_RANGE: need('BENCH_PORT_RANGE'),
    BASIN_RECONCILE_INTERVAL_MS: '1000',
  });
  const basin = await createBasin(config);
  exitWithParent(async () => {
    await basin.close();
    await stopProcessesUnder(dataDir);
  });

  const projectId = basin.bootstrapped?.project.id;
  if (!projectId) throw new Error('the data directory was not empty');
  await basin.app.listen({ host: config.host, port: config.port });
  const { port } = basin.app.server.address() as AddressInfo;

  process.on('message', (m: { type?: string }) => {
    if (m?.type !== 'pending?') return;
    void basin.store.operations.listPending().then(
      (pending) => process.send?.({ type: 'pending', pending }),
      () => {},
    );
  });
  process.send?.({ type: 'ready', port, projectId, dataDir });
}

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

main().catch((err: unknown) => failChild('local-server', err));
