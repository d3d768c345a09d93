import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countPools } from './pooler-sample.js';

const row = (database: string, o: Record<string, string>) => ({
  database,
  user: 'tsdbadmin',
  cl_active: '0',
  cl_waiting: '0',
  cl_active_cancel_req: '0',
  cl_waiting_cancel_req: '0',
  sv_active: '0',
  sv_active_cancel: '0',
  sv_being_canceled: '0',
  sv_idle: '0',
  sv_used: '0',
  sv_tested: '0',
  sv_login: '0',
  maxwait: '0',
  maxwait_us: '0',
  pool_mode: 'session',
  ...o,
});

test("SHOW POOLS summed over the service's pools, the console's own left out", () => {
  assert.deepEqual(
    countPools([
      row('pgbouncer', { user: 'pgbouncer', cl_active: '1', pool_mode: 'statement' }),
      row('tsdb', { cl_active: '3', cl_waiting: '2', sv_active: '3', sv_idle: '1' }),
      row('tsdb_transaction', {
        cl_active: '7',
        cl_active_cancel_req: '4',
        sv_used: '1',
        sv_login: '1',
        pool_mode: 'transaction',
      }),
    ]),
    { clients: 12, servers: 6 },
  );
  // No pool yet (nobody asked for a database): zero, not a gap.
  assert.deepEqual(countPools([row('pgbouncer', { cl_active: '1' })]), { clients: 0, servers: 0 });
  // What a fake pooler may send is no number: counted as none.
  assert.deepEqual(
    countPools([row('tsdb', { cl_active: '-5', sv_idle: 'x', sv_active: '1e400' })]),
    {
      clients: 0,
      servers: 0,
    },
  );
});
