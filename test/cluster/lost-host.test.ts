// A lost host's service restored on another host (docs/decisions.md, "A
// lost host's service restored elsewhere"), on the namespace topology: h1
// is the repository host, h2-h4 database hosts. A service without HA
// replicas has rows archived; its whole host is killed (every process, then
// its link). The service becomes UNSTABLE with a log entry naming the host;
// its owner's start restores it on another host from its stanza, with every
// archived row and its own system identifier, and its endpoint names the
// new host. The lost host, back, serves nothing of it: its agent removes
// its copy (data, OS user) before its local driver starts.

import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pitrWindowStart } from '../harness/basin-api.js';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'lh';
/** The topology's subnet, 10.231.17.0/24: its own, as the tests run in parallel. */
const NET = 17;

test(
  "a lost host's service is restored on another host on its owner's start, with every archived row, and the host back serves nothing of it",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 4,
      driver: 'hosts',
      args: ['--backup-schedule', '1d', '--pitr-window', '1d', '--host-lost-after', '5s'],
    });
    const { b, cli, address } = c;
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    for (const i of [2, 3, 4]) await c.joinAgent(i);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 4 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));

    const created = await b.call('POST', b.servicePath(), { name: 'lost' });
    assert.equal(created.status, 202, created.text);
    const id = created.body.service_id as string;
    const password = created.body.initial_password as string;
    const ready = await b.waitForStatus(id, 'READY', 300_000);
    const sql = (host: string, q: string) =>
      psql(
        `host=${host} port=${ready.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=5`,
        password,
        q,
      );
    const first = ready.endpoint.host as string;
    const lost = [2, 3, 4].find((i) => address(i) === first) as number;
    assert.ok(lost, `the endpoint ${first} is one of the database hosts`);

    // Rows, archived: the segment their last one is in is filled (a
    // customer cannot switch WAL) and pushed to the repository host. The
    // service's first backup is there too (taken at READY).
    await sql(first, 'CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 500) g');
    const systemId = await sql(first, 'SELECT system_identifier FROM pg_control_system()');
    const segment = await sql(first, 'SELECT pg_walfile_name(pg_current_wal_lsn())');
    await sql(
      first,
      "CREATE TABLE filler AS SELECT repeat('x', 1000) AS x FROM generate_series(1, 20000)",
    );
    await until(
      async () =>
        (await sql(first, "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")) >=
        segment,
      120_000,
    );
    await b.waitFor(() => pitrWindowStart(b, id), 'its first backup', 180_000);

    // The whole host lost: UNSTABLE, and the logs name the host.
    c.killHost(lost);
    await b.waitForStatus(id, 'UNSTABLE', 120_000);
    await b.waitFor(
      async () => {
        const r = await b.call('GET', `${b.servicePath(id)}/logs`);
        return r.text.includes(`host h${lost} (${first}) has not reported`) || undefined;
      },
      'the log entry naming the lost host',
      60_000,
    );

    // Its owner's start restores it elsewhere, from the repository host.
    const started = await b.call('POST', `${b.servicePath(id)}/start`);
    assert.equal(started.status, 202, started.text);
    const again = await b.waitForStatus(id, 'READY', 300_000);
    const moved = again.endpoint.host as string;
    assert.notEqual(moved, first, 'the endpoint names another host');
    assert.ok(
      [2, 3, 4].some((i) => i !== lost && address(i) === moved),
      moved,
    );
    assert.equal(await sql(moved, 'SELECT count(*) FROM t'), '500');
    assert.equal(await sql(moved, 'SELECT system_identifier FROM pg_control_system()'), systemId);
    await sql(moved, 'INSERT INTO t VALUES (501)');
    assert.equal(await sql(moved, 'SELECT max(n) FROM t'), '501');
    const read = await b.call('GET', `${b.servicePath(id)}/logs`);
    if (read.status !== 200) {
      await sleep(1000); // Basin's log lines come a moment after its answer
      assert.fail(`${read.text}\n${b.output().slice(-6000)}`);
    }
    const logs = read.text;
    // Its server's own lines, read on its new host, beside Basin's.
    assert.match(logs, /"source":"database"/);
    assert.match(
      logs,
      new RegExp(
        `host h${lost} \\(${first.replaceAll('.', '\\.')}\\) is lost: this service is restored on host`,
      ),
    );

    // The lost host back: its copy is removed before its driver starts,
    // and nothing answers for the service at its address.
    c.linkUp(lost);
    const back = c.runAgent(lost);
    const local = join(c.host(lost).dataDir, 'local');
    await until(
      async () =>
        !existsSync(join(local, 'instances', id)) &&
        !c.users(lost).some((u) => u.name === `basin-${id}`),
      120_000,
    );
    assert.match(back.output(), /no longer places on this host/);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.every((h) => h.state === 'ONLINE');
    }, 60_000);
    await assert.rejects(sql(first, 'SELECT 1'));
    assert.equal(await sql(moved, 'SELECT count(*) FROM t'), '501');

    assert.equal((await b.call('DELETE', b.servicePath(id))).status, 202);
    await b.waitGone(id, 180_000);
  },
);
