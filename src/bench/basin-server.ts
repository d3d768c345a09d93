// Bench child: a Basin (sim driver, no delay, logger off) on a port of its
// own, with one service created and READY. Tells the parent, over IPC:
// { type: 'ready', port, projectId, serviceId }.
//
// Environment: BENCH_DATA_DIR (an empty directory) and BENCH_API_KEY.

import type { AddressInfo } from 'node:net';
import { createBasin } from '../basin.js';
import { parseConfig } from '../config.js';
import { exitWithParent, failChild } from './children.js';

async function main(): Promise<void> {
  const apiKey = need('BENCH_API_KEY');
  const config = parseConfig([], {
    BASIN_DATA_DIR: need('BENCH_DATA_DIR'),
    BASIN_DRIVER: 'sim',
    BASIN_SIM_DELAY_MS: '0',
    BASIN_BOOTSTRAP_API_KEY: apiKey,
    BASIN_HOST: '127.0.0.1',
    BASIN_PORT: '0',
  });
  const basin = await createBasin(config);
  exitWithParent(() => basin.close());

  const projectId = basin.bootstrapped?.project.id;
  if (!projectId) throw new Error('the data directory was not empty');
  await basin.app.listen({ host: config.host, port: config.port });
  const { port } = basin.app.server.address() as AddressInfo;

  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
  const created = await basin.app.inject({
    method: 'POST',
    url: `/v1/projects/${projectId}/services`,
    headers,
    payload: JSON.stringify({ name: 'bench' }),
  });
  if (created.statusCode !== 202) {
    throw new Error(`creating a service answered ${created.statusCode}: ${created.body}`);
  }
  const serviceId = (created.json() as { service_id: string }).service_id;

  const deadline = Date.now() + 20_000;
  for (;;) {
    const got = await basin.app.inject({
      method: 'GET',
      url: `/v1/projects/${projectId}/services/${serviceId}`,
      headers,
    });
    const status = (got.json() as { status?: string }).status;
    if (got.statusCode === 200 && status === 'READY') break;
    if (Date.now() > deadline) throw new Error(`the service is still ${status} after 20 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
  process.send?.({ type: 'ready', port, projectId, serviceId });
}

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

main().catch((err: unknown) => failChild('basin-server', err));
