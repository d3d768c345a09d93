import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ServiceSpec } from '../../driver.js';
import {
  RESTART_SETTINGS,
  checkCidr,
  pgHba,
  pgIdent,
  postgresqlSettings,
  renderConf,
  sizeProfile,
  splitSettings,
  wantedExtensions,
} from './conf.js';

const spec = (over: Partial<ServiceSpec> = {}): ServiceSpec => ({
  serviceId: 'abcdefghij',
  projectId: 'p000000000',
  type: 'TIMESERIESDB',
  vector: false,
  size: { shared: false, cpuMillis: 2000, memoryGbs: 8 },
  environment: 'DEV',
  running: true,
  port: 40001,
  passwordVerifier: 'SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5',
  pooler: { enabled: false, port: null },
  allowedCidrs: [],
  ha: { replicaCount: 0, syncReplicaCount: 0 },
  nodes: [{ index: 0, role: 'primary', port: 40001 }],
  source: { kind: 'empty' },
  createdAt: '2025-01-01T00:00:00Z',
  ...over,
});
const paths = {
  socketDir: '/d/local/s/abcdefghij-0',
  backupConf: '/d/local/backup/abcdefghij/pgbackrest.conf',
  pgbackrest: 'pgbackrest',
  forkSourceConf: '/d/local/backup/abcdefghij/source.conf',
  forkSourcePg: '/d/local/backup/abcdefghij/source-pg',
};
const options = { listenAddresses: '*', publicCidrs: ['0.0.0.0/0', '::/0'] };

describe('sizeProfile', () => {
  test('shared gets the small fixed profile', () => {
    const p = sizeProfile({ shared: true, cpuMillis: 0, memoryGbs: 0 });
    assert.equal(p.sharedBuffersMb, 32);
    assert.equal(p.maxConnections, 50);
    assert.equal(p.maxParallelWorkersPerGather, 0);
  });

  test('dedicated sizes scale memory and workers', () => {
    assert.deepEqual(sizeProfile({ shared: false, cpuMillis: 500, memoryGbs: 2 }), {
      sharedBuffersMb: 512,
      effectiveCacheSizeMb: 1536,
      maintenanceWorkMemMb: 128,
      workMemKb: 5242,
      maxConnections: 100,
      maxParallelWorkers: 1,
      maxParallelWorkersPerGather: 0,
      maxParallelMaintenanceWorkers: 0,
      timescaleBackgroundWorkers: 4,
    });
    const big = sizeProfile({ shared: false, cpuMillis: 32000, memoryGbs: 128 });
    assert.equal(big.sharedBuffersMb, 32768);
    assert.equal(big.effectiveCacheSizeMb, 98304);
    assert.equal(big.maintenanceWorkMemMb, 2048);
    assert.equal(big.maxConnections, 500);
    assert.equal(big.maxParallelWorkers, 32);
    assert.equal(big.maxParallelWorkersPerGather, 4);
    assert.equal(big.timescaleBackgroundWorkers, 16);
  });

  test('a size larger than the host is sized as the host', () => {
    const p = sizeProfile({ shared: false, cpuMillis: 32000, memoryGbs: 128 }, 8192);
    assert.equal(p.sharedBuffersMb, 2048);
    assert.equal(p.effectiveCacheSizeMb, 6144);
    assert.equal(p.maxConnections, 500);
  });

  test('every catalogue size grows monotonically', () => {
    let prev = sizeProfile({ shared: true, cpuMillis: 0, memoryGbs: 0 });
    for (const gb of [2, 4, 8, 16, 32, 64, 128]) {
      const p = sizeProfile({ shared: false, cpuMillis: gb * 250, memoryGbs: gb });
      assert.ok(p.sharedBuffersMb > prev.sharedBuffersMb);
      assert.ok(p.maxConnections >= prev.maxConnections);
      assert.ok(p.workMemKb >= 4096);
      prev = p;
    }
  });
});

describe('postgresqlSettings', () => {
  test('TIMESERIESDB preloads timescaledb without telemetry, auth_delay and basin_readonly', () => {
    const s = postgresqlSettings(spec(), paths, options);
    assert.equal(s.shared_preload_libraries, 'timescaledb,auth_delay,basin_readonly');
    assert.equal(s['auth_delay.milliseconds'], '1000');
    assert.equal(s['timescaledb.telemetry_level'], 'off');
    assert.equal(s.shared_buffers, '2048MB');
    assert.equal(s.port, '40001');
    assert.equal(s.unix_socket_directories, paths.socketDir);
    // WAL goes to the service's own stanza, through pgBackRest's queue.
    assert.equal(s.archive_mode, 'on');
    assert.equal(s.wal_compression, 'lz4');
    assert.equal(s.backend_flush_after, '256kB');
    assert.equal(
      s.archive_command,
      "'pgbackrest' '--config=/d/local/backup/abcdefghij/pgbackrest.conf' --stanza=abcdefghij archive-push %p",
    );
    assert.equal(s.archive_library, undefined);
    assert.equal(s.ssl, 'on');
    assert.equal(s.log_destination, 'jsonlog');
    assert.equal(s.logging_collector, 'on');
    assert.equal(s.log_directory, 'log');
    // parallel (2) + timescaledb (4 + launcher) + 2, at least 8
    assert.equal(s.max_worker_processes, '9');
  });

  test('POSTGRES and VECTOR preload auth_delay and basin_readonly alone', () => {
    for (const type of ['POSTGRES', 'VECTOR'] as const) {
      const s = postgresqlSettings(spec({ type }), paths, options);
      assert.equal(s.shared_preload_libraries, 'auth_delay,basin_readonly');
      assert.equal(s['auth_delay.milliseconds'], '1000');
      assert.equal(s['timescaledb.telemetry_level'], undefined);
      assert.equal(s.max_worker_processes, '8');
    }
  });

  test('a resize changes restart settings; a new password changes none', () => {
    const base = splitSettings(postgresqlSettings(spec(), paths, options));
    const bigger = splitSettings(
      postgresqlSettings(
        spec({ size: { shared: false, cpuMillis: 4000, memoryGbs: 16 } }),
        paths,
        options,
      ),
    );
    assert.notDeepEqual(base.restart, bigger.restart);
    const pw = splitSettings(postgresqlSettings(spec({ passwordVerifier: 'x' }), paths, options));
    assert.deepEqual(pw, base);
    for (const k of Object.keys(base.restart)) assert.ok(RESTART_SETTINGS.has(k));
    assert.equal(base.reload.work_mem, '10485kB');
  });

  test('a fork: no hot standby, ever; while recovering, how it recovers', () => {
    const fork = spec({
      source: {
        kind: 'fork',
        parentServiceId: 'parent0001',
        strategy: 'PITR',
        targetTime: '2030-01-01T00:00:00.000Z',
        backupLabel: '20300101-000000F',
      },
    });
    assert.equal(postgresqlSettings(spec(), paths, options).hot_standby, undefined);
    const open = postgresqlSettings(fork, paths, options);
    assert.equal(open.hot_standby, 'off');
    assert.equal(open.restore_command, undefined);
    const pitr = postgresqlSettings(fork, paths, options, {
      kind: 'repo',
      stanza: 'parent0001',
      target: { time: '2030-01-01T00:00:00.000Z' },
    });
    assert.equal(
      pitr.restore_command,
      `'pgbackrest' '--config=/d/local/backup/abcdefghij/source.conf' --stanza=parent0001 archive-get %f "%p"`,
    );
    assert.equal(pitr.recovery_target_time, '2030-01-01 00:00:00.000+00');
    assert.equal(pitr.recovery_target_action, 'promote');
    const snapshot = postgresqlSettings(fork, paths, options, {
      kind: 'repo',
      stanza: 'parent0001',
      target: 'immediate',
    });
    assert.equal(snapshot.recovery_target, 'immediate');
    const end = postgresqlSettings(fork, paths, options, {
      kind: 'repo',
      stanza: 'parent0001',
      target: 'end',
    });
    assert.equal(end.recovery_target, undefined);
    assert.equal(end.recovery_target_time, undefined);
    // With an identifier of its own: each segment fetched gets it, unless it is not the parent's.
    const own = postgresqlSettings(fork, paths, options, {
      kind: 'repo',
      stanza: 'parent0001',
      target: 'immediate',
      systemIds: { parent: '1', fork: '2' },
    });
    assert.equal(
      own.restore_command,
      `p="$PWD/%p" && cd '/d/local/backup/abcdefghij/source-pg' && ` +
        `'pgbackrest' '--config=/d/local/backup/abcdefghij/source.conf' --stanza=parent0001 archive-get %f "$p" && ` +
        `case %f in *.history) ;; *) cmp -s -n 8 -i 24:0 "$p" parent-id && ` +
        `dd if=fork-id of="$p" bs=8 seek=3 count=1 conv=notrunc status=none ;; esac`,
    );
    assert.ok(
      !own.restore_command?.includes('\\'),
      'no backslash: postgresql.conf would take it for an escape',
    );
    const copy = postgresqlSettings(fork, paths, options, { kind: 'copy' });
    assert.deepEqual([copy.restore_command, copy.recovery_target], ['false', 'immediate']);
    // Its data made durable at start by one syncfs, not an fsync per file.
    for (const recovering of [copy, pitr, snapshot, end, own]) {
      assert.equal(recovering.recovery_init_sync_method, 'syncfs');
    }
    assert.equal(open.recovery_init_sync_method, undefined);
    // Opening the fork drops them without a restart.
    assert.deepEqual(splitSettings(pitr).restart, splitSettings(open).restart);
  });

  test('renderConf quotes every value', () => {
    assert.equal(
      renderConf({ a: "it's", b: '1' }).split('\n').slice(1).join('\n'),
      "a = 'it''s'\nb = '1'\n",
    );
  });
});

describe('pgHba', () => {
  const rules = (text: string) =>
    text
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.trim().split(/\s+/).join(' '));

  test('a service in a VPC admits its VPC only, not the public CIDRs', () => {
    const r = rules(pgHba({ allowedCidrs: ['10.1.0.0/16'] }, options.publicCidrs));
    assert.deepEqual(
      r.filter((l) => l.endsWith('scram-sha-256')),
      ['hostssl all all 10.1.0.0/16 scram-sha-256'],
    );
    assert.ok(r.includes('hostnossl all all 0.0.0.0/0 reject'), 'TLS still required');
  });

  test('admin over the socket only, TLS required, public CIDRs by SCRAM', () => {
    assert.deepEqual(
      rules(pgHba({ allowedCidrs: [] }, [...options.publicCidrs, '0.0.0.0/0'])), // once each
      [
        'local all postgres peer map=basin',
        'local all all reject',
        'hostnossl all all 0.0.0.0/0 reject',
        'hostnossl all all ::/0 reject',
        'hostssl all postgres 0.0.0.0/0 reject',
        'hostssl all postgres ::/0 reject',
        'hostssl all all 0.0.0.0/0 scram-sha-256',
        'hostssl all all ::/0 scram-sha-256',
      ],
    );
  });

  test('a private installation admits only its CIDRs', () => {
    const r = rules(pgHba({ allowedCidrs: [] }, ['192.168.1.0/24']));
    assert.deepEqual(
      r.filter((l) => l.endsWith('scram-sha-256')),
      ['hostssl all all 192.168.1.0/24 scram-sha-256'],
    );
  });

  test('locked (a fork before it opens): nobody but Basin over the socket', () => {
    assert.deepEqual(
      rules(pgHba({ allowedCidrs: ['10.1.0.0/16'] }, options.publicCidrs, true)).filter(
        (l) => !l.endsWith('reject'),
      ),
      ['local all postgres peer map=basin'],
    );
  });

  test('anything but a CIDR is refused', () => {
    for (const bad of ['10.0.0.0', '10.0.0.0/33', 'all', '10.0.0.0/8 trust', '::/129']) {
      assert.throws(() => checkCidr(bad), /not a CIDR/);
    }
    assert.equal(checkCidr('fd00::/8'), 'fd00::/8');
  });
});

test('pgIdent maps the admin OS users to postgres', () => {
  assert.match(pgIdent(['root', 'postgres']), /^basin\s+root\s+postgres$/m);
  assert.match(pgIdent(['root', 'postgres']), /^basin\s+postgres\s+postgres$/m);
  assert.throws(() => pgIdent(['a b']));
});

test('wantedExtensions follows the type and the vector flag', () => {
  assert.deepEqual(wantedExtensions({ type: 'TIMESERIESDB', vector: false }), ['timescaledb']);
  assert.deepEqual(wantedExtensions({ type: 'TIMESERIESDB', vector: true }), [
    'timescaledb',
    'vector',
  ]);
  assert.deepEqual(wantedExtensions({ type: 'VECTOR', vector: false }), ['vector']);
  assert.deepEqual(wantedExtensions({ type: 'POSTGRES', vector: false }), []);
});

describe('replication settings', () => {
  test('a standby streams from its primary, follows the newest timeline; node 0 keeps the service id as cluster_name', () => {
    const s = postgresqlSettings(spec(), paths, options, undefined, {
      index: 2,
      port: 40003,
      standby: { conninfo: "host='127.0.0.1'", slot: 'node2' },
    });
    assert.equal(s.port, '40003');
    assert.equal(s.cluster_name, 'abcdefghij-node2');
    assert.equal(s.primary_conninfo, "host='127.0.0.1'");
    assert.equal(s.primary_slot_name, 'node2');
    assert.equal(s.recovery_target_timeline, 'latest');
    const p = postgresqlSettings(spec(), paths, options, undefined, {
      index: 0,
      port: 40002,
      synchronousStandbys: 'ANY 1 ("node1")',
    });
    assert.equal(p.cluster_name, 'abcdefghij');
    assert.equal(p.synchronous_standby_names, 'ANY 1 ("node1")');
    assert.equal(p.primary_conninfo, undefined);
  });

  test('the replication role streams (and rewinds) from loopback only when the service has standbys, never while locked', () => {
    const rows = (replication: boolean, locked = false) =>
      pgHba(spec(), ['0.0.0.0/0'], locked, replication)
        .split('\n')
        .filter((l) => l.includes('replication'));
    assert.equal(rows(false).length, 0);
    assert.deepEqual(
      rows(true).map((l) => l.split(/\s+/).slice(1, 4).join(' ')),
      [
        'replication basin_replication 127.0.0.1/32',
        'replication basin_replication ::1/128',
        'postgres basin_replication 127.0.0.1/32',
        'postgres basin_replication ::1/128',
      ],
    );
    assert.ok(rows(true).every((l) => /\sscram-sha-256$/.test(l)));
    assert.equal(rows(true, true).length, 0);
  });
});

test('storage: WAL kept for a quarter of the allowance at most, read-only sessions over it', () => {
  const MB = 1024 * 1024;
  const at = (allowance: number, readOnly = false) =>
    postgresqlSettings(spec(), paths, { ...options, storage: { allowance, readOnly } });
  const small = at(200 * MB);
  assert.equal(small.max_wal_size, '50MB');
  assert.equal(small.min_wal_size, '32MB');
  assert.equal(small.default_transaction_read_only, undefined);
  assert.equal(at(50 * MB).max_wal_size, '32MB'); // two segments, PostgreSQL's floor
  const big = at(50 * 1024 * MB);
  assert.equal(big.max_wal_size, '1024MB'); // PostgreSQL's default
  assert.equal(big.min_wal_size, '80MB');
  assert.equal(at(200 * MB, true).default_transaction_read_only, 'on');
  // None of them needs a restart: a level applies with a reload.
  assert.deepEqual(splitSettings(at(200 * MB, true)).restart, splitSettings(small).restart);
  // Without an allowance (a replica set's floor), PostgreSQL's defaults.
  assert.equal(postgresqlSettings(spec(), paths, options).max_wal_size, undefined);
});
