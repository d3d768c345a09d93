import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { startScratchPostgres } from './scratch-postgres.js';
import { MetricsSampler } from '../../src/drivers/local/metrics/metrics-sampler.js';
import { processTree, readProcessTable } from '../../src/drivers/local/metrics/proc.js';

test(
  'a real PostgreSQL: memory of the whole tree, CPU of exited backends',
  { timeout: 60_000 },
  async (t) => {
    const server = await startScratchPostgres();
    try {
      // postmaster, logger, checkpointer, background writer, walwriter, launchers…
      const tree = processTree(await readProcessTable(), server.pid);
      assert.ok(tree.length >= 5, `${tree.length} processes`);

      const sampler = new MetricsSampler({ intervalMs: 60_000 });
      sampler.track('pg', { pgdata: server.pgdata, pid: server.pid });
      await sampler.sampleNow();
      const first = sampler.latest('pg')!;
      assert.ok(first.memoryMb > 0, `${first.memoryMb} MB`);

      // A backend burns CPU and exits before the next sample: the postmaster reaped it.
      const client = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres' });
      await client.connect();
      await client.query('SELECT count(*) FROM generate_series(1, 3000000)');
      await client.end();
      await sampler.sampleNow();
      const second = sampler.latest('pg')!;
      assert.ok(second.milliCpu > 0, `${second.milliCpu} mCPU`);
      assert.ok(second.memoryMb > 0);
      t.diagnostic(`${tree.length} processes; first ${JSON.stringify(first)}`);
      t.diagnostic(`after a query: ${JSON.stringify(second)}`);
    } finally {
      await server.stop();
    }
  },
);
