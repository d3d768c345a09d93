import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import type { ServiceSpec } from '../../driver.js';
import {
  etcdHostsFor,
  type PatroniInputs,
  patroniConfig,
  renderPatroniConfig,
} from './patroni-config.js';
import { parseCluster, parseWalSenders } from './client.js';

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
  ha: { replicaCount: 2, syncReplicaCount: 1 },
  nodes: [
    { index: 0, role: 'primary', port: 40002 },
    { index: 1, role: 'standby', port: 40003 },
    { index: 2, role: 'standby', port: 40004 },
  ],
  source: { kind: 'empty' },
  createdAt: '2025-01-01T00:00:00Z',
  ...over,
});

const members = [0, 1, 2].map((i) => ({
  index: i,
  address: `10.9.0.${11 + i}`,
  port: 40002 + i,
  apiPort: 8008,
}));

const inputs = (over: Partial<PatroniInputs> = {}): PatroniInputs => ({
  spec: spec(),
  self: members[1] as PatroniInputs['self'],
  members,
  paths: {
    socketDir: '/d/n1/sock',
    backupConf: '/d/backup/pgbackrest.conf',
    pgbackrest: 'pgbackrest',
    forkSourceConf: '/d/backup/source.conf',
    forkSourcePg: '/d/backup/source-pg',
    pgdata: '/d/n1/data/pgdata',
    pgBin: '/usr/lib/postgresql/15/bin',
    seed: "/d/n1/data/it's seed",
    pgpass: '/d/n1/data/pgpass',
    serverTls: { cert: '/d/n1/tls/server.crt', key: '/d/n1/tls/server.key', ca: '/d/ca.crt' },
  },
  conf: { publicCidrs: ['0.0.0.0/0'] },
  adminOsUsers: ['root', 'svc_abc'],
  etcd: {
    endpoints: ['10.9.0.1:2379', '10.9.0.2:2379'],
    tls: { cert: '/d/etcd/c.crt', key: '/d/etcd/c.key', ca: '/d/etcd/ca.crt' },
  },
  restApi: {
    tls: { cert: '/d/api/c.crt', key: '/d/api/c.key', ca: '/d/api/ca.crt' },
    password: 'api-secret',
    allowlist: ['10.9.0.1'],
  },
  replicationSecret: 'repl-secret',
  ...over,
});

type Conf = {
  scope: string;
  namespace: string;
  name: string;
  restapi: Record<string, unknown>;
  etcd3: Record<string, unknown>;
  bootstrap: {
    method: string;
    basin_template: { command: string; no_params: boolean };
    dcs: Record<string, unknown> & {
      postgresql: {
        parameters: Record<string, string>;
        use_pg_rewind: boolean;
        use_slots: boolean;
      };
    };
  };
  postgresql: {
    listen: string;
    parameters: Record<string, string>;
    pg_hba: string[];
    pg_ident: string[];
    authentication: Record<string, Record<string, string>>;
    create_replica_methods: string[];
  };
};

test('the node names its service as scope under /basin/, and the etcd members over TLS', () => {
  const c = patroniConfig(inputs()) as Conf;
  assert.equal(c.scope, 'abcdefghij');
  assert.equal(c.namespace, '/basin/');
  assert.equal(c.name, 'node1');
  assert.deepEqual(c.etcd3, {
    hosts: ['10.9.0.1:2379', '10.9.0.2:2379'],
    use_proxies: true,
    protocol: 'https',
    cacert: '/d/etcd/ca.crt',
    cert: '/d/etcd/c.crt',
    key: '/d/etcd/c.key',
  });
  const withUser = patroniConfig(
    inputs({
      etcd: {
        endpoints: ['10.9.0.1:2379'],
        tls: { cert: '/c', key: '/k', ca: '/ca' },
        auth: { username: 'abcdefghij', password: 'etcd-secret' },
      },
    }),
  ) as Conf;
  assert.equal(withUser.etcd3.username, 'abcdefghij');
  assert.equal(withUser.etcd3.password, 'etcd-secret');
});

test("a node's Patroni talks to every etcd member but its own host's (stale reads when cut off with it)", () => {
  // node1's host is 10.9.0.12.
  const c = patroniConfig(
    inputs({
      etcd: {
        endpoints: ['10.9.0.11:2379', '10.9.0.12:2379', '10.9.0.13:2379'],
        tls: { cert: '/c', key: '/k', ca: '/ca' },
      },
    }),
  ) as Conf;
  assert.deepEqual(c.etcd3.hosts, ['10.9.0.11:2379', '10.9.0.13:2379']);
  assert.equal(c.etcd3.use_proxies, true);
  assert.deepEqual(etcdHostsFor('10.9.0.12', ['10.9.0.12:2379']), ['10.9.0.12:2379']);
  assert.deepEqual(etcdHostsFor('10.9.0.1', ['10.9.0.11:2379', '10.9.0.12:2379']), [
    '10.9.0.11:2379',
    '10.9.0.12:2379',
  ]);
});

test('the REST API listens on the node address, requires a client certificate and a password', () => {
  const c = patroniConfig(inputs()) as Conf;
  assert.equal(c.restapi.listen, '10.9.0.12:8008');
  assert.equal(c.restapi.verify_client, 'required');
  assert.equal(c.restapi.cafile, '/d/api/ca.crt');
  assert.deepEqual(c.restapi.authentication, { username: 'basin', password: 'api-secret' });
  assert.deepEqual(c.restapi.allowlist, ['10.9.0.1']);
});

test('synchronous replicas: synchronous_mode, strict, with their count', () => {
  const dcs = (patroniConfig(inputs()) as Conf).bootstrap.dcs;
  assert.equal(dcs.synchronous_mode, true);
  assert.equal(dcs.synchronous_mode_strict, true);
  assert.equal(dcs.synchronous_node_count, 1);
  assert.deepEqual(dcs.postgresql.use_pg_rewind, true);
  assert.deepEqual(dcs.postgresql.use_slots, true);
  // More synchronous replicas than standbys asks for all of them.
  const two = patroniConfig(
    inputs({ spec: spec({ ha: { replicaCount: 2, syncReplicaCount: 5 } }) }),
  );
  assert.equal((two as Conf).bootstrap.dcs.synchronous_node_count, 2);
  const none = patroniConfig(
    inputs({ spec: spec({ ha: { replicaCount: 2, syncReplicaCount: 0 } }) }),
  );
  assert.equal((none as Conf).bootstrap.dcs.synchronous_mode, false);
  assert.equal((none as Conf).bootstrap.dcs.synchronous_mode_strict, false);
});

test('failsafe mode is on, with or without synchronous replicas: etcd down alone demotes no primary that reaches every member', () => {
  for (const sync of [0, 1]) {
    const c = patroniConfig(
      inputs({ spec: spec({ ha: { replicaCount: 2, syncReplicaCount: sync } }) }),
    ) as Conf;
    assert.equal(c.bootstrap.dcs.failsafe_mode, true);
    // Dynamic configuration only: Patroni 3.0 reads it from the DCS, never from the YAML's top level.
    assert.equal((c as unknown as Record<string, unknown>).failsafe_mode, undefined);
  }
  // The rendered YAML carries it (what Patroni reads at bootstrap).
  assert.match(renderPatroniConfig(inputs()), /^ {4}failsafe_mode: true$/m);
});

test("a primary's stop timeout (across hosts) is dynamic configuration; without one, Patroni's default (wait) holds", () => {
  const timing = { ttl: 15, loopWait: 2, retryTimeout: 5, primaryStopTimeout: 1 };
  const c = patroniConfig(inputs({ timing })) as Conf;
  assert.equal(c.bootstrap.dcs.primary_stop_timeout, 1);
  assert.equal(c.bootstrap.dcs.loop_wait, 2);
  assert.equal((c as unknown as Record<string, unknown>).primary_stop_timeout, undefined);
  assert.match(renderPatroniConfig(inputs({ timing })), /^ {4}primary_stop_timeout: 1$/m);
  // One machine (no timing given) and a timing without it: not set at all.
  for (const i of [inputs(), inputs({ timing: { ttl: 15, loopWait: 2, retryTimeout: 5 } })]) {
    assert.equal('primary_stop_timeout' in (patroniConfig(i) as Conf).bootstrap.dcs, false);
  }
});

test("PostgreSQL's parameters are Basin's, less what Patroni owns, with the node's certificate", () => {
  const c = patroniConfig(inputs()) as Conf;
  const p = c.postgresql.parameters;
  assert.equal(p.shared_buffers, '2048MB');
  assert.equal(p.ssl, 'on');
  assert.equal(p.ssl_cert_file, '/d/n1/tls/server.crt');
  assert.equal(p.log_destination, 'jsonlog');
  // A standby whose primary went away tries again every second, not every 5 s.
  assert.equal(p.wal_retrieve_retry_interval, '1s');
  // Patroni sets cluster_name to its scope whatever it is given.
  for (const k of [
    'listen_addresses',
    'port',
    'cluster_name',
    'synchronous_standby_names',
    'primary_conninfo',
  ]) {
    assert.equal(p[k], undefined, k);
  }
  assert.equal(c.postgresql.listen, '10.9.0.12:40003');
  // The settings every member must share are in the DCS.
  assert.equal(c.bootstrap.dcs.postgresql.parameters.max_connections, p.max_connections);
});

test('replication and pg_rewind as the replication role over verified TLS; replication only from the nodes of the service', () => {
  const c = patroniConfig(inputs()) as Conf;
  const { replication, rewind, superuser } = c.postgresql.authentication;
  assert.deepEqual(replication, {
    username: 'basin_replication',
    password: 'repl-secret',
    sslmode: 'verify-full',
    sslrootcert: '/d/ca.crt',
  });
  assert.deepEqual(rewind, replication);
  assert.deepEqual(superuser, { username: 'postgres' });
  const repl = c.postgresql.pg_hba.filter((l) => /\breplication\b|basin_replication/.test(l));
  const sources = [...new Set(repl.map((l) => l.split(/\s+/)[3]))].sort();
  assert.deepEqual(sources, ['10.9.0.11/32', '10.9.0.12/32', '10.9.0.13/32']);
  assert.ok(
    c.postgresql.pg_hba.some((l) => /^hostnossl\s+all\s+all\s+0\.0\.0\.0\/0\s+reject$/.test(l)),
  );
  assert.ok(c.postgresql.pg_ident.includes('basin  svc_abc  postgres'));
});

test('across hosts: it listens in its namespace, is reached at its host, and admits replication from the hosts and itself', () => {
  const c = patroniConfig(inputs({ listen: '198.18.0.3' })) as Conf & {
    restapi: { listen: string; connect_address: string };
    postgresql: { connect_address: string };
  };
  assert.equal(c.postgresql.listen, '198.18.0.3:40003');
  assert.equal(c.postgresql.connect_address, '10.9.0.12:40003');
  assert.equal(c.restapi.listen, '198.18.0.3:8008');
  assert.equal(c.restapi.connect_address, '10.9.0.12:8008');
  assert.equal(c.postgresql.parameters.listen_addresses, undefined);
  const replication = c.postgresql.pg_hba
    .filter((l) => /\sreplication\s/.test(l))
    .map((l) => l.split(/\s+/)[3]);
  assert.deepEqual(replication, ['10.9.0.11/32', '10.9.0.12/32', '10.9.0.13/32', '198.18.0.3/32']);
});

test("a read replica set's hosts (readers) are admitted for replication besides the members", () => {
  const c = patroniConfig(inputs({ listen: '198.18.0.3', readers: ['10.9.0.14'] })) as Conf;
  const replication = c.postgresql.pg_hba
    .filter((l) => /\sreplication\s/.test(l))
    .map((l) => l.split(/\s+/)[3]);
  assert.deepEqual(replication, [
    '10.9.0.11/32',
    '10.9.0.12/32',
    '10.9.0.13/32',
    '198.18.0.3/32',
    '10.9.0.14/32',
  ]);
});

test('without archiving, archive_mode is off and no archive command is set', () => {
  const on = patroniConfig(inputs()) as Conf;
  assert.equal(on.postgresql.parameters.archive_mode, 'on');
  const off = patroniConfig(inputs({ archiving: false })) as Conf;
  assert.equal(off.postgresql.parameters.archive_mode, 'off');
  assert.equal(off.postgresql.parameters.archive_command, undefined);
});

test("the first node starts from the template's clone; replicas are copied by basebackup", () => {
  const c = patroniConfig(inputs()) as Conf;
  assert.equal(c.bootstrap.method, 'basin_template');
  assert.equal(c.bootstrap.basin_template.no_params, true);
  assert.equal(
    c.bootstrap.basin_template.command,
    `mv -T -- '/d/n1/data/it'"'"'s seed' '/d/n1/data/pgdata'`,
  );
  assert.deepEqual(c.postgresql.create_replica_methods, ['basebackup']);
});

test('the rendered YAML reads back as the configuration', () => {
  const text = renderPatroniConfig(inputs());
  assert.match(text, /^# Written by Basin/);
  // YAML 1.1, as Patroni's PyYAML reads it: `on` would be a boolean there, unquoted.
  assert.deepEqual(parse(text, { version: '1.1' }), patroniConfig(inputs()));
  assert.match(text, /^ {4}ssl: "on"$/m);
});

test("GET /cluster's body is read for roles, timelines and lag, and nothing else", () => {
  const s = parseCluster({
    members: [
      {
        name: 'node0',
        role: 'leader',
        state: 'running',
        host: '10.0.0.1',
        port: 5432,
        timeline: 2,
      },
      { name: 'node1', role: 'sync_standby', state: 'streaming', timeline: 2, lag: 0 },
      { name: 'node2', role: 'replica', state: 'streaming', timeline: 2, lag: 'unknown' },
      { name: 7, role: 'replica' },
      { name: 'x', role: 'emperor' },
    ],
  });
  assert.equal(s.leader, 'node0');
  assert.equal(s.paused, false);
  assert.deepEqual(
    s.members.map((m) => [m.name, m.role, m.timeline, m.lagBytes]),
    [
      ['node0', 'leader', 2, undefined],
      ['node1', 'sync_standby', 2, 0],
      ['node2', 'replica', 2, undefined],
    ],
  );
  assert.deepEqual(parseCluster('nonsense'), { members: [], paused: false });
});

test("GET /patroni's body on a running primary gives its WAL senders; on anything else nothing", () => {
  // As Patroni 3.0.2 answers on a leader (api.py get_postgresql_status).
  const leader = {
    state: 'running',
    role: 'master',
    xlog: { location: 67108864 },
    timeline: 2,
    replication: [
      { usename: 'basin_replication', application_name: 'node1', client_addr: '10.0.0.2', state: 'streaming', sync_state: 'sync', sync_priority: 1 }, // prettier-ignore
      { usename: 'basin_replication', application_name: 'node2', client_addr: '10.0.0.3', state: 'catchup', sync_state: 'async', sync_priority: 0 }, // prettier-ignore
      { application_name: 7 },
    ],
  };
  assert.deepEqual(parseWalSenders(leader), [
    { name: 'node1', state: 'streaming', syncState: 'sync' },
    { name: 'node2', state: 'catchup', syncState: 'async' },
  ]);
  // A primary nobody streams from: no `replication` key at all.
  const { replication: _, ...alone } = leader;
  assert.deepEqual(parseWalSenders(alone), []);
  assert.deepEqual(parseWalSenders({ ...leader, role: 'primary' })?.length, 2);
  // A replica, a primary Patroni could not query (no xlog), a stopped one: unknown.
  assert.equal(parseWalSenders({ ...leader, role: 'replica' }), undefined);
  assert.equal(parseWalSenders({ state: 'running', role: 'master' }), undefined);
  assert.equal(parseWalSenders({ ...leader, state: 'stopped' }), undefined);
  assert.equal(parseWalSenders('nonsense'), undefined);
  assert.equal(parseWalSenders(null), undefined);
});
