// Read replica sets across hosts (docs/decisions.md, "Read replica sets
// across hosts"), on the namespace topology: h1 is the repository host, h2,
// h3 and h4 database hosts, each in a zone of its own. A service without
// HA replicas, with rows; a set of two nodes on it: its nodes are placed
// on the two hosts its service is not on (the placements table), each a
// hot standby streaming from the primary's host over TLS; the primary's
// pg_hba admits replication from those two hosts' addresses only; psql
// with verify-full through the set's endpoint on every database host reads
// the rows, a row written on the primary then appears there, a write
// there is refused (read-only). Deleted: its nodes, OS users, files, slots
// on the primary, endpoint and rows are gone.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { psql, psqlRefused } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'rrs';
/** The topology's subnet, 10.231.30.0/24: its own, as the tests run in parallel. */
const NET = 30;

test(
  'a read replica set of a service on one host: its nodes on the other hosts, streaming over TLS, read through every host with verify-full, read-only, deleted whole',
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 4,
      driver: 'hosts',
      args: ['--backup-schedule', '1d', '--reconcile-interval-ms', '1000'],
    });
    const { b, cli, address } = c;
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    for (const i of [2, 3, 4]) await c.joinAgent(i, { zone: `z${i}` });
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 4 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);
    const hostOf = (addr: string) => [2, 3, 4].find((i) => address(i) === addr) as number;

    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const conn = (host: string, port: number) =>
      `host=${host} port=${port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;

    const created = await b.call('POST', b.servicePath(), { name: 'primary' });
    assert.equal(created.status, 202, created.text);
    const id = created.body.service_id as string;
    const password = created.body.initial_password as string;
    const svc = await b.waitForStatus(id, 'READY', 300_000);
    const primary = conn(svc.endpoint.host, svc.endpoint.port);
    await psql(primary, password, "CREATE TABLE r (v text); INSERT INTO r VALUES ('a'), ('b')");
    const primaryHost = hostOf(svc.endpoint.host);
    assert.ok(primaryHost, `the service is on a database host: ${svc.endpoint.host}`);

    const made = await b.call('POST', `${b.servicePath(id)}/replicaSets`, {
      name: 'readers',
      nodes: 2,
      cpu_millis: 500,
      memory_gbs: 2,
    });
    assert.equal(made.status, 202, made.text);
    const rsId = made.body.id as string;
    const listed = async () => {
      const res = await b.call('GET', `${b.servicePath(id)}/replicaSets`);
      assert.equal(res.status, 200, res.text);
      return (res.body as { id: string; status: string; endpoint: { host: string; port: number } }[]).find((r) => r.id === rsId); // prettier-ignore
    };
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 300_000);
    const rs = (await listed()) as { endpoint: { host: string; port: number } };

    // Its nodes: one on each host the service is not on.
    const placed = await c.store.sql(
      'SELECT resource_id, host_id FROM placements ORDER BY resource_id',
      [],
      'basin',
    );
    const rows = placed.rows as { resource_id: string; host_id: string }[];
    const serviceRow = rows.find((r) => r.resource_id === id);
    const setRows = rows.filter((r) => r.resource_id.startsWith(`${rsId}:`));
    assert.deepEqual(
      setRows.map((r) => r.resource_id),
      [`${rsId}:node0`, `${rsId}:node1`],
    );
    assert.ok(serviceRow);
    assert.ok(
      setRows.every((r) => r.host_id !== serviceRow.host_id),
      JSON.stringify(rows),
    );
    assert.equal(new Set(setRows.map((r) => r.host_id)).size, 2, 'spread over the two others');
    const setHosts = [2, 3, 4].filter((i) => i !== primaryHost);
    assert.equal(hostOf(rs.endpoint.host) !== primaryHost, true, rs.endpoint.host);

    // Each of those hosts runs one node, a resource of its own (`<set>n<i>`),
    // streaming from the primary's host address with verify-full.
    for (const i of setHosts) {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      const mine = readdirSync(instances).filter((d) => d.startsWith(`${rsId}n`));
      assert.equal(mine.length, 1, `host ${i}: ${mine.join(', ')}`);
      const layout = new Layout(c.host(i).dataDir);
      const conf = readFileSync(
        join(layout.pgdata({ id: mine[0] as string, node: 0 }), 'basin.conf'),
        'utf8',
      );
      assert.match(conf, new RegExp(`primary_conninfo = '.*host=''${address(primaryHost)}''`));
      assert.match(conf, /sslmode=''verify-full''/);
      assert.ok(c.users(i).some((u) => u.name === `basin-${mine[0]}`));
    }
    // The primary's pg_hba admits replication from those two hosts only.
    const primaryLayout = new Layout(c.host(primaryHost).dataDir);
    const hba = readFileSync(join(primaryLayout.pgdata({ id, node: 0 }), 'pg_hba.conf'), 'utf8');
    const replicationFrom = hba
      .split('\n')
      .filter((l) => /^hostssl\s+replication\s+basin_replication\s/.test(l))
      .map((l) => l.split(/\s+/)[3]);
    for (const i of setHosts) assert.ok(replicationFrom.includes(`${address(i)}/32`), hba);
    assert.ok(!replicationFrom.includes(`${address(primaryHost)}/32`), hba);
    assert.ok(!replicationFrom.includes(`${address(1)}/32`), hba);

    // Through the set's endpoint on every database host, with verify-full:
    // the rows, on a standby.
    for (const i of [2, 3, 4]) {
      const at = conn(address(i), rs.endpoint.port);
      assert.equal(await psql(at, password, "SELECT string_agg(v, ',' ORDER BY v) FROM r"), 'a,b');
      assert.equal(await psql(at, password, 'SELECT pg_is_in_recovery()'), 't');
    }
    // Both nodes answer (leastconn over two): each names its own address.
    const seen = new Set<string>();
    await until(async () => {
      seen.add(await psql(conn(rs.endpoint.host, rs.endpoint.port), password, 'SELECT inet_server_addr()')); // prettier-ignore
      return seen.size === 2;
    }, 60_000);

    // A row written on the primary appears on the set.
    await psql(primary, password, "INSERT INTO r VALUES ('c')");
    await until(
      async () =>
        (await psql(conn(rs.endpoint.host, rs.endpoint.port), password, 'SELECT count(*) FROM r')) === '3', // prettier-ignore
      60_000,
    );
    // A write through the set is refused: its nodes are standbys.
    await assert.rejects(
      psql(conn(rs.endpoint.host, rs.endpoint.port), password, "INSERT INTO r VALUES ('x')"),
      /read-only transaction/,
    );
    assert.equal(
      await psql(primary, password, `SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'rs\\_${rsId}\\_%' AND active`), // prettier-ignore
      '2',
    );

    // Deleted: its nodes, users, files, slots, endpoint and rows go.
    const del = await b.call('DELETE', `${b.servicePath(id)}/replicaSets/${rsId}`);
    assert.equal(del.status, 202, del.text);
    await b.waitFor(async () => (await listed()) === undefined, 'the set to go', 180_000);
    const after = await c.store.sql(
      'SELECT resource_id FROM placements WHERE resource_id LIKE $1',
      [`${rsId}%`],
      'basin',
    );
    assert.equal(after.rows.length, 0);
    for (const i of [2, 3, 4]) {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      const left = existsSync(instances)
        ? readdirSync(instances).filter((d) => d.startsWith(rsId))
        : [];
      assert.deepEqual(left, [], `host ${i} keeps ${left.join(', ')}`);
      assert.ok(!c.users(i).some((u) => u.name.startsWith(`basin-${rsId}`)), `host ${i}`);
      await psqlRefused(conn(address(i), rs.endpoint.port), password);
    }
    assert.equal(
      await psql(primary, password, `SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'rs\\_${rsId}\\_%'`), // prettier-ignore
      '0',
    );
    const hbaAfter = readFileSync(join(primaryLayout.pgdata({ id, node: 0 }), 'pg_hba.conf'), 'utf8'); // prettier-ignore
    for (const i of setHosts) assert.ok(!hbaAfter.includes(`${address(i)}/32`), hbaAfter);
    assert.equal(await psql(primary, password, 'SELECT count(*) FROM r'), '3');
    await b.stop();
  },
);

test(
  "a read replica set of an HA service across hosts: its node on the host the service is not on, streaming through that host's endpoint; the leader's host killed, the set follows the new primary",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: 'rrh',
      net: 31,
      hosts: 3,
      driver: 'hosts',
      args: ['--host-lost-after', '5s', '--reconcile-interval-ms', '1000'],
    });
    const { b, cli, address } = c;
    for (const i of [1, 2, 3]) await c.joinAgent(i, { zone: `z${i}`, heartbeatMs: 500 });
    await until(async () => {
      const e = JSON.parse(await cli('host', 'etcd', '--json')) as {
        quorum: boolean;
        members: { healthy: boolean }[];
      };
      return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
    }, 300_000);
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const conn = (host: string, port: number) =>
      `host=${host} port=${port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;

    // An HA service of two nodes: on two of the three hosts.
    const created = await b.call('POST', b.servicePath(), { name: 'ha', replica_count: 1 });
    assert.equal(created.status, 202, created.text);
    const id = created.body.service_id as string;
    const password = created.body.initial_password as string;
    const svc = await b.waitForStatus(id, 'READY', 600_000);
    const port = svc.endpoint.port as number;
    await psql(conn(svc.endpoint.host, port), password, "CREATE TABLE r (v text); INSERT INTO r VALUES ('a')"); // prettier-ignore

    const made = await b.call('POST', `${b.servicePath(id)}/replicaSets`, {
      name: 'readers',
      nodes: 1,
      cpu_millis: 500,
      memory_gbs: 2,
    });
    assert.equal(made.status, 202, made.text);
    const rsId = made.body.id as string;
    const listed = async () => {
      const res = await b.call('GET', `${b.servicePath(id)}/replicaSets`);
      assert.equal(res.status, 200, res.text);
      return (res.body as { id: string; status: string; endpoint: { port: number } }[]).find((r) => r.id === rsId); // prettier-ignore
    };
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 300_000);
    const rsPort = (await listed())?.endpoint.port as number;

    // Its node is on the host none of the service's nodes is on.
    const placed = await c.store.sql(
      'SELECT resource_id, host_id FROM placements ORDER BY resource_id',
      [],
      'basin',
    );
    const rows = placed.rows as { resource_id: string; host_id: string }[];
    const serviceHosts = rows.filter((r) => r.resource_id === id || r.resource_id.startsWith(`${id}:node`)).map((r) => r.host_id); // prettier-ignore
    const setRow = rows.find((r) => r.resource_id === `${rsId}:node0`);
    assert.equal(serviceHosts.length, 2);
    assert.ok(setRow && !serviceHosts.includes(setRow.host_id), JSON.stringify(rows));
    const hosts = JSON.parse(await cli('host', 'list', '--json')) as {
      id: string;
      address: string;
    }[];
    const setAddress = hosts.find((h) => h.id === setRow.host_id)?.address as string;
    const setHost = [1, 2, 3].find((i) => address(i) === setAddress) as number;
    assert.ok(setHost);

    // Read through the set's endpoint with verify-full; a new row arrives.
    const reader = conn(address(setHost), rsPort);
    assert.equal(await psql(reader, password, 'SELECT pg_is_in_recovery()'), 't');
    await psql(conn(address(setHost), port), password, "INSERT INTO r VALUES ('b')");
    await until(async () => (await psql(reader, password, 'SELECT count(*) FROM r')) === '2', 60_000); // prettier-ignore
    await assert.rejects(
      psql(reader, password, "INSERT INTO r VALUES ('x')"),
      /read-only transaction/,
    );

    // The leader's host killed: Patroni promotes the other node, and the
    // set, streaming through its own host's endpoint, follows it.
    // The service's endpoint names its leader's host (Patroni's, as last read).
    const now = (await b.call('GET', b.servicePath(id))).body as { endpoint: { host: string } };
    const leading = [1, 2, 3].find((i) => address(i) === now.endpoint.host) as number;
    assert.ok(leading && leading !== setHost, now.endpoint.host);
    c.killHost(leading);
    const survivor = [1, 2, 3].find((i) => i !== setHost && i !== leading) as number;
    await until(async () => {
      try {
        await psql(conn(address(setHost), port), password, "INSERT INTO r VALUES ('c')");
        return true;
      } catch {
        return false;
      }
    }, 180_000);
    // The survivor's own endpoint leads to the new primary too, once its
    // HAProxy's check has seen it (it may close a connection until then).
    await until(
      async () =>
        (await psql(conn(address(survivor), port), password, 'SELECT pg_is_in_recovery()').catch(
          () => '',
        )) === 'f',
      60_000,
    );
    await until(async () => {
      try {
        return (await psql(reader, password, "SELECT count(*) FROM r WHERE v = 'c'")) === '1';
      } catch {
        return false;
      }
    }, 120_000);
    assert.equal(await psql(reader, password, 'SELECT pg_is_in_recovery()'), 't');

    // Deleted while the old leader's host is lost: its node, user and rows go.
    const del = await b.call('DELETE', `${b.servicePath(id)}/replicaSets/${rsId}`);
    assert.equal(del.status, 202, del.text);
    await b.waitFor(async () => (await listed()) === undefined, 'the set to go', 180_000);
    const instances = join(c.host(setHost).dataDir, 'local', 'instances');
    assert.deepEqual(
      readdirSync(instances).filter((d) => d.startsWith(rsId)),
      [],
    );
    assert.ok(!c.users(setHost).some((u) => u.name.startsWith(`basin-${rsId}`)));
    await psqlRefused(reader, password);
    await b.stop();
  },
);
