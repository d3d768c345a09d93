import assert from 'node:assert/strict';
import { test } from 'node:test';
import { scramVerifier } from '../../../lib/secrets.js';
import { pgHba } from './conf.js';
import {
  authFile,
  listenAddr,
  pgbouncerIni,
  poolerHba,
  perProcess,
  poolerProcessCount,
  poolSizes,
  replicaSetPoolSizes,
  restartPart,
  withBlocks,
} from './pooler-conf.js';

const SHARED = { shared: true, cpuMillis: 0, memoryGbs: 0 };
const paths = {
  authFile: '/d/p/users.txt',
  hbaFile: '/d/p/hba.conf',
  certFile: '/d/pgdata/server.crt',
  keyFile: '/d/pgdata/server.key',
};

test('pool sizes: a quarter of max_connections each, five times as many clients', () => {
  assert.deepEqual(poolSizes({ size: SHARED }), { session: 12, transaction: 12, maxClients: 250 });
  const big = { shared: false, cpuMillis: 4000, memoryGbs: 16 };
  assert.deepEqual(poolSizes({ size: big }), { session: 100, transaction: 100, maxClients: 2000 });
});

test("a replica set's pools: its nodes' max_connections (at least the primary's), times its nodes", () => {
  const big = { shared: false, cpuMillis: 4000, memoryGbs: 16 };
  assert.deepEqual(replicaSetPoolSizes({ size: SHARED, primary: { size: SHARED }, nodes: 2 }), {
    session: 24,
    transaction: 24,
    maxClients: 500,
  });
  // Nodes smaller than their primary run with its max_connections (400 here).
  assert.deepEqual(replicaSetPoolSizes({ size: SHARED, primary: { size: big }, nodes: 3 }), {
    session: 300,
    transaction: 300,
    maxClients: 6000,
  });
});

const sharedPools = poolSizes({ size: SHARED });
const socket = { socketDir: '/d/s/abc-0', port: 5500 };

test('pgbouncer.ini: two pools on the same database, TLS required, hba auth', () => {
  const ini = pgbouncerIni({ port: 6600, sizes: sharedPools, server: socket }, paths, '*');
  assert.match(
    ini,
    /^tsdb = host=\/d\/s\/abc-0 port=5500 dbname=tsdb pool_mode=session pool_size=12$/m,
  );
  assert.match(
    ini,
    /^tsdb_transaction = host=\/d\/s\/abc-0 port=5500 dbname=tsdb pool_mode=transaction pool_size=12$/m,
  );
  assert.match(ini, /^listen_port = 6600$/m);
  assert.match(ini, /^client_tls_sslmode = require$/m);
  assert.match(ini, /^auth_type = hba$/m);
  assert.match(ini, /^client_tls_key_file = \/d\/pgdata\/server.key$/m);
  assert.match(ini, /^server_tls_sslmode = disable$/m);
  assert.equal(
    restartPart(ini).split('\n').length,
    8,
    'listen_addr, listen_port, unix_socket_dir, four client TLS settings and the server one',
  );
  assert.throws(() => pgbouncerIni({ port: null, sizes: sharedPools, server: socket }, paths, '*'));
  assert.throws(() =>
    pgbouncerIni(
      { port: 6600, sizes: sharedPools, server: { ...socket, socketDir: '/d s' } },
      paths,
      '*',
    ),
  );
  assert.equal(listenAddr(' 127.0.0.1, ::1 '), '127.0.0.1,::1');
});

test("pgbouncer.ini of a replica set: its endpoint over TCP, the node's certificate checked against the CA", () => {
  const server = { host: '127.0.0.1', port: 5700, caFile: '/d/p/ca.crt' };
  const ini = pgbouncerIni({ port: 6600, sizes: sharedPools, server }, paths, '*');
  assert.match(
    ini,
    /^tsdb = host=127\.0\.0\.1 port=5700 dbname=tsdb pool_mode=session pool_size=12$/m,
  );
  assert.match(
    ini,
    /^tsdb_transaction = host=127\.0\.0\.1 port=5700 dbname=tsdb pool_mode=transaction pool_size=12$/m,
  );
  assert.match(ini, /^server_tls_sslmode = verify-ca$/m);
  assert.match(ini, /^server_tls_ca_file = \/d\/p\/ca.crt$/m);
  assert.match(ini, /^client_tls_sslmode = require$/m);
  assert.match(restartPart(ini), /^server_tls_ca_file = /m);
});

test("pgbouncer.ini of an HA service's node across hosts: its host's endpoint at the host's address, verify-full", () => {
  const server = { host: '10.0.0.11', port: 5700, caFile: '/d/p/ca.crt', verifyFull: true };
  const ini = pgbouncerIni({ port: 6600, sizes: sharedPools, server }, paths, '198.18.0.2');
  assert.match(ini, /^tsdb = host=10\.0\.0\.11 port=5700 dbname=tsdb pool_mode=session/m);
  assert.match(ini, /^server_tls_sslmode = verify-full$/m);
  assert.match(ini, /^server_tls_ca_file = \/d\/p\/ca.crt$/m);
  assert.match(ini, /^listen_addr = 198\.18\.0\.2$/m);
});

test('auth_file: the SCRAM verifier, never anything else', () => {
  const v = scramVerifier('a-password-123');
  assert.equal(authFile(v), `"tsdbadmin" "${v}"\n`);
  assert.doesNotMatch(authFile(v), /a-password-123/);
  assert.throws(() => authFile('md5abc'));
  assert.throws(() => authFile('plain" "text'));
  // Basin's stats user, with the verifier of its secret.
  const s = scramVerifier('the-stats-secret');
  assert.equal(authFile(v, s), `"tsdbadmin" "${v}"\n"basin_stats" "${s}"\n`);
  assert.throws(() => authFile(v, 'basin_stats" "x'));
});

test("Basin's stats user: a stats user, not an admin, admitted to the console only, before the blocks", () => {
  const ini = pgbouncerIni({ port: 6600, sizes: sharedPools, server: socket }, paths, '*');
  assert.match(ini, /^stats_users = tsdbadmin, basin_stats$/m);
  assert.doesNotMatch(ini, /admin_users/);
  const hba = poolerHba({ allowedCidrs: ['10.1.0.0/16'] }, [], ['10.9.9.9'], true);
  assert.deepEqual(hba.split('\n').slice(1, -1), [
    // On each process's own socket (how Basin reads each one's pools).
    'local pgbouncer basin_stats scram-sha-256',
    'hostssl pgbouncer basin_stats 0.0.0.0/0 scram-sha-256',
    'hostssl pgbouncer basin_stats ::/0 scram-sha-256',
    'host all all 10.9.9.9/32 reject',
    'hostssl all tsdbadmin 10.1.0.0/16 scram-sha-256',
  ]);
  // The guard's rewrites keep them first.
  const plain = poolerHba({ allowedCidrs: ['10.1.0.0/16'] }, [], [], true);
  assert.equal(withBlocks(plain, ['10.9.9.9']), hba);
  assert.equal(withBlocks(hba, []), plain);
});

test('the pooler admits what the server admits, over TLS, tsdbadmin only', () => {
  const open = poolerHba({ allowedCidrs: [] }, ['0.0.0.0/0', '::/0']);
  assert.deepEqual(open.split('\n').slice(1, -1), [
    'hostssl all tsdbadmin 0.0.0.0/0 scram-sha-256',
    'hostssl all tsdbadmin ::/0 scram-sha-256',
  ]);
  // In a VPC: the VPC's block only.
  const hba = poolerHba({ allowedCidrs: ['10.1.0.0/16'] }, ['0.0.0.0/0', '::/0']);
  assert.deepEqual(hba.split('\n').slice(1, -1), [
    'hostssl all tsdbadmin 10.1.0.0/16 scram-sha-256',
  ]);
  assert.throws(() => poolerHba({ allowedCidrs: ['10.1.0.0/16 trust'] }, []));
});

test('addresses blocked for their failed logins are refused first; the guard swaps them alone', () => {
  const hba = poolerHba(
    { allowedCidrs: ['10.1.0.0/16'] },
    [],
    ['10.1.2.3', '2001:db8::7', '10.1.0.9'],
  );
  assert.deepEqual(hba.split('\n').slice(1, -1), [
    'host all all 10.1.0.9/32 reject',
    'host all all 10.1.2.3/32 reject',
    'host all all 2001:db8::7/128 reject',
    'hostssl all tsdbadmin 10.1.0.0/16 scram-sha-256',
  ]);
  // The guard's rewrite is what a converge with the same blocks renders…
  const plain = poolerHba({ allowedCidrs: ['10.1.0.0/16'] }, []);
  assert.equal(withBlocks(plain, ['10.1.2.3', '2001:db8::7', '10.1.0.9']), hba);
  // …and leaves every other line as it was, whatever the spec says now.
  assert.equal(withBlocks(hba, []), plain);
  assert.equal(
    withBlocks(hba, ['10.9.9.9']),
    poolerHba({ allowedCidrs: ['10.1.0.0/16'] }, [], ['10.9.9.9']),
  );
});

test('pg_hba admits the pooler on the socket only while it is enabled, never for a locked fork', () => {
  const line = /^local\s+tsdb\s+tsdbadmin\s+scram-sha-256$/m;
  assert.doesNotMatch(pgHba({ allowedCidrs: [] }, ['0.0.0.0/0']), line);
  assert.doesNotMatch(pgHba({ allowedCidrs: [], pooler: { enabled: false } }, []), line);
  const on = pgHba({ allowedCidrs: [], pooler: { enabled: true } }, []);
  assert.match(on, line);
  assert.ok(on.indexOf('tsdbadmin') < on.indexOf('reject'), 'before the socket is refused to all');
  assert.doesNotMatch(pgHba({ allowedCidrs: [], pooler: { enabled: true } }, [], true), line);
});

test('processes: one a core the service may use, at most 4, one without peering', () => {
  assert.equal(poolerProcessCount(SHARED, 2, true), 2);
  assert.equal(poolerProcessCount(SHARED, 16, true), 4);
  assert.equal(poolerProcessCount(SHARED, 16, false), 1);
  assert.equal(poolerProcessCount({ shared: false, cpuMillis: 500 }, 8, true), 1);
  assert.equal(poolerProcessCount({ shared: false, cpuMillis: 2500 }, 8, true), 3);
  assert.equal(poolerProcessCount({ shared: false, cpuMillis: 8000 }, 2, true), 2);
  assert.equal(poolerProcessCount(SHARED, 0, true), 1);
  assert.equal(perProcess(12, 2), 6);
  assert.equal(perProcess(12, 5), 2);
  assert.equal(perProcess(2, 4), 1);
});

test('several processes: one port (so_reuseport), a socket and a peer id each, every peer listed, pools divided', () => {
  const socketDirs = ['/d/p/s0', '/d/p/s1'];
  const inis = socketDirs.map((_, index) =>
    pgbouncerIni({ port: 6600, sizes: sharedPools, server: socket }, paths, '*', {
      index,
      socketDirs,
    }),
  );
  for (const [i, ini] of inis.entries()) {
    assert.match(ini, /^listen_port = 6600$/m);
    assert.match(ini, /^so_reuseport = 1$/m);
    assert.match(ini, new RegExp(`^unix_socket_dir = /d/p/s${i}$`, 'm'));
    assert.match(ini, new RegExp(`^peer_id = ${i + 1}$`, 'm'));
    assert.match(
      ini,
      /\n\[peers\]\n1 = host=\/d\/p\/s0 port=6600\n2 = host=\/d\/p\/s1 port=6600\n$/,
    );
    // Both together take the server connections one process took.
    assert.match(ini, /pool_mode=session pool_size=6$/m);
    assert.match(ini, /pool_mode=transaction pool_size=6$/m);
    assert.match(ini, /^max_client_conn = 250$/m);
    // Each's socket and peers are part of what a restart applies.
    assert.match(restartPart(ini), /^peer_id = /m);
    assert.match(restartPart(ini), /^2 = host=/m);
  }
  // One process: no reuse, no peers; its socket for Basin's stats user.
  const one = pgbouncerIni({ port: 6600, sizes: sharedPools, server: socket }, paths, '*', {
    index: 0,
    socketDirs: ['/d/p/s0'],
  });
  assert.match(one, /^unix_socket_dir = \/d\/p\/s0$/m);
  assert.doesNotMatch(one, /so_reuseport|peer_id|\[peers\]/);
  assert.match(one, /pool_mode=transaction pool_size=12$/m);
  assert.throws(() =>
    pgbouncerIni({ port: 6600, sizes: sharedPools, server: socket }, paths, '*', {
      index: 0,
      socketDirs: ['/d/p s0'],
    }),
  );
});
