// What the admin role sees, through Basin as shipped (`node dist/main.js`,
// the local driver, real PostgreSQL): tsdbadmin is a member of pg_monitor, so
// on a service with an HA replica it reads its standby's sync_state and lag
// in pg_stat_replication (NULL for it before), and the sessions of its own
// cluster; it holds none of the predefined roles that reach the host's files
// or programs, and no file function beyond listing its own directories.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';

test(
  'tsdbadmin reads its own standby’s sync_state and lag, and nothing outside its cluster',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    const b = await inst.start();
    const created = await b.call('POST', b.servicePath(), {
      name: 'watched',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      replica_count: 1,
    });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    const ready = await b.waitForStatus(id, 'READY', 180_000);
    const admin = conninfo(ready.endpoint.port);
    const sql = (q: string) => psql(admin, password, q);

    // The standby streams; tsdbadmin sees how (it was NULL for it before).
    const replication = await b.waitFor(async () => {
      const row = await sql(
        "SELECT sync_state, state, write_lsn IS NOT NULL FROM pg_stat_replication WHERE application_name = 'node1'",
      );
      return row === 'async|streaming|t' ? row : undefined;
    }, "node1's replication state, as tsdbadmin reads it");
    assert.equal(replication, 'async|streaming|t');
    await sql('CREATE TABLE t (i int); INSERT INTO t VALUES (1)');
    assert.equal(
      await sql(
        "SELECT replay_lsn IS NOT NULL, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) >= 0 FROM pg_stat_replication WHERE application_name = 'node1'",
      ),
      't|t',
      'the lag, from the LSNs',
    );
    // Sessions of other roles in its own cluster: the walsender's, at least.
    assert.equal(
      await sql(
        "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'walsender' AND state IS NOT NULL",
      ),
      't',
    );

    // pg_monitor and what it holds; none of the roles that reach the host.
    assert.equal(
      await sql(
        "SELECT string_agg(r, ',' ORDER BY r) FROM unnest(ARRAY['pg_monitor','pg_read_all_settings','pg_read_all_stats','pg_stat_scan_tables','pg_read_server_files','pg_write_server_files','pg_execute_server_program','pg_signal_backend']) r WHERE pg_has_role('tsdbadmin', r, 'MEMBER')",
      ),
      'pg_monitor,pg_read_all_settings,pg_read_all_stats,pg_stat_scan_tables',
    );
    // File functions: listing its own cluster's directories, never reading files.
    assert.equal(
      await sql(
        "SELECT string_agg(f, ',' ORDER BY f) FROM unnest(ARRAY['pg_ls_waldir()','pg_ls_logdir()','pg_ls_tmpdir()','pg_ls_dir(text)','pg_stat_file(text)','pg_read_file(text)','pg_read_binary_file(text)']) f WHERE has_function_privilege('tsdbadmin', f, 'EXECUTE')",
      ),
      'pg_ls_logdir(),pg_ls_tmpdir(),pg_ls_waldir()',
    );
    assert.match(await sql('SELECT count(*) > 0 FROM pg_ls_waldir()'), /^t$/);
    await assert.rejects(sql("SELECT pg_stat_file('/etc/passwd')"), /permission denied/);
  },
);
