// Draining a host (docs/decisions.md, "Draining a host"), on the namespace
// topology: h1 is the repository host, h2 and h3 database hosts. A service
// without HA replicas, with a row written just before the drain (not yet
// archived by itself), moves off its host on `basin host drain`: its logs
// announce the stop, it is READY on the other host with every row, its
// endpoint names that host, the drained host holds nothing of it and shows
// DRAINED, and no new service is placed there until `--undo`. Then the
// repository host goes down and comes back: the services write on, and
// their archive catches up. Last, services on a host that is lost are
// deleted without waiting for it; back, it removes its copy.

import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pitrWindowStart } from '../harness/basin-api.js';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'ld';
/** The topology's subnet, 10.231.18.0/24: its own, as the tests run in parallel. */
const NET = 18;

interface Listed {
  name: string;
  state: string;
}

test(
  'a drained host moves its service with a short announced stop, losing nothing; the repository host down stops no service and its archive catches up; a lost host does not hold up a delete',
  { timeout: 600_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 3,
      driver: 'hosts',
      args: ['--backup-schedule', '1d', '--pitr-window', '1d', '--host-lost-after', '5s'],
    });
    const { b, cli, address } = c;
    const hosts = async () => JSON.parse(await cli('host', 'list', '--json')) as Listed[];
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    await c.joinAgent(2);
    await c.joinAgent(3);
    await until(async () => {
      const listed = await hosts();
      return listed.length === 3 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));

    const created = await b.call('POST', b.servicePath(), { name: 'moving' });
    assert.equal(created.status, 202, created.text);
    const id = created.body.service_id as string;
    const ready = await b.waitForStatus(id, 'READY', 300_000);
    const sql = (host: string, q: string) =>
      psql(
        `host=${host} port=${ready.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=5`,
        created.body.initial_password as string,
        q,
      );
    const from = [2, 3].find((i) => address(i) === ready.endpoint.host) as number;
    const to = from === 2 ? 3 : 2;
    assert.ok(from, ready.endpoint.host);
    await sql(address(from), 'CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 500) g');
    // Its first backup (taken at READY) is what it is restored from.
    await b.waitFor(() => pitrWindowStart(b, id), 'its first backup', 180_000);
    // The last row, in a WAL segment nothing has archived yet: the stop does.
    await sql(address(from), 'INSERT INTO t VALUES (501)');

    const out = await cli('host', 'drain', `h${from}`);
    assert.match(out, /Draining h\d: 1 service\(s\) move/);
    await b.waitFor(
      async () => {
        const r = await b.call('GET', b.servicePath(id));
        return (r.body.status === 'READY' && r.body.endpoint.host === address(to)) || undefined;
      },
      'the service READY on the other host',
      300_000,
    );
    assert.equal(await sql(address(to), 'SELECT count(*), max(n) FROM t'), '501|501');
    await sql(address(to), 'INSERT INTO t VALUES (502)');
    const read = await b.call('GET', `${b.servicePath(id)}/logs`);
    const logs = read.text;
    // How long it was away: from the announcement to its restore (said, not asserted).
    const at = (re: RegExp) =>
      Date.parse(
        (read.body.entries as { timestamp: string; message: string }[]).find((e) =>
          re.test(e.message),
        )?.timestamp ?? '',
      );
    t.diagnostic(`moved in ${at(/restored on host/) - at(/is being drained/)} ms`);
    assert.match(logs, new RegExp(`host h${from} \\([0-9.]+\\) is being drained: this service moves to host h${to}`)); // prettier-ignore
    assert.match(logs, new RegExp(`restored on host h${to} .*moved from h${from}`));

    // The drained host holds nothing of it, and says it is DRAINED.
    const local = join(c.host(from).dataDir, 'local');
    await until(
      async () =>
        !existsSync(join(local, 'instances', id)) &&
        !c.users(from).some((u) => u.name === `basin-${id}`),
      120_000,
    );
    await assert.rejects(sql(address(from), 'SELECT 1'));
    await until(
      async () => (await hosts()).find((h) => h.name === `h${from}`)?.state === 'DRAINED',
    );

    // Nothing new goes there while drained; taken back, it takes services again.
    const next = await b.call('POST', b.servicePath(), { name: 'next' });
    assert.equal(next.status, 202, next.text);
    const placed = await b.waitForStatus(next.body.service_id, 'READY', 300_000);
    assert.equal(placed.endpoint.host, address(to));
    assert.match(await cli('host', 'drain', `h${from}`, '--undo'), /takes services again/);
    assert.equal((await hosts()).find((h) => h.name === `h${from}`)?.state, 'ONLINE');

    // The repository host down: services go on (writes succeed, WAL waits
    // in their pg_wal), and once it is back their archive catches up.
    const segment = await sql(address(to), 'SELECT pg_walfile_name(pg_current_wal_lsn())');
    c.killHost(1);
    await sql(address(to), 'INSERT INTO t SELECT g FROM generate_series(503, 1000) g');
    await sql(address(to), "CREATE TABLE filler AS SELECT repeat('x', 1000) AS x FROM generate_series(1, 20000)"); // prettier-ignore
    const archiver = "SELECT failed_count > 0, coalesce(last_archived_wal, '') >= '" + segment + "' FROM pg_stat_archiver"; // prettier-ignore
    await until(async () => (await sql(address(to), archiver)) === 't|f', 60_000);
    assert.equal((await b.call('GET', b.servicePath(id))).body.status, 'READY');
    c.linkUp(1);
    c.runAgent(1);
    await until(async () => (await sql(address(to), archiver)).endsWith('|t'), 120_000);

    // A service on a lost host is deleted without waiting for the host,
    // which removes its copy when it reports again.
    const doomedHost = address(to) === placed.endpoint.host ? to : from;
    c.killHost(doomedHost);
    await b.waitForStatus(id, 'UNSTABLE', 120_000);
    for (const s of [id, next.body.service_id as string]) {
      assert.equal((await b.call('DELETE', b.servicePath(s))).status, 202);
    }
    for (const s of [id, next.body.service_id as string]) await b.waitGone(s, 180_000);
    c.linkUp(doomedHost);
    c.runAgent(doomedHost);
    await until(
      async () => !existsSync(join(c.host(doomedHost).dataDir, 'local', 'instances', id)),
      120_000,
    );
  },
);
