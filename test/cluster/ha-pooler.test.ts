// The connection pooler of an HA service across hosts (docs/decisions.md,
// "HA across hosts": the pooler), on the namespace topology: three hosts,
// a service with two standbys, one synchronous (ha-service.ts). Enabled,
// each host of a node runs a PgBouncer on the pooler's port whose server is
// that host's endpoint (HAProxy, which follows Patroni's leader): psql with
// verify-full through the pooler on two hosts writes rows there and reads
// them back through the other, in both pools (session, transaction); the
// API reports the pooler at the leader's host, as the service's endpoint.
// A wrong password is refused by the pooler. A pooler killed with kill -9
// is said in the service's logs and started again. A resize that takes a restart
// makes a switchover (the rolling restart of ha-resize.test.ts) while a
// transaction-mode client writes through a standby's host's pooler, and
// reconnects when its connection ends: it commits again after the
// switchover, through the same pooler, to the new primary, and every
// acknowledged commit is there. A new password reaches the poolers (the
// old one refused there). Disabled: the pooler's port refuses on every
// host. Then a read replica set's pooler across hosts (a service without
// HA replicas, its set of one node on another host): read through it with
// verify-full at the set's host, a write refused, a wrong password
// refused; disabled, its port refuses.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { pgClient, psql, psqlRefused } from '../e2e/clients.js';
import { until } from './cluster.js';
import { haService } from './ha-service.js';

const PREFIX = 'hpl';
/** The topology's subnet, 10.231.28.0/24: its own, as the tests run in parallel. */
const NET = 28;

const step = (what: string) => console.log(`ha-pooler: ${new Date().toISOString()} ${what}`);

test(
  "an HA service's pooler across hosts: on every node's host, verify-full, following Patroni's leader through a switchover; wrong password refused; disabled, its port refuses",
  { timeout: 900_000 },
  async (t) => {
    const s = await haService(t, { prefix: PREFIX, net: NET });
    t.after(async () => {
      if ((t as { passed?: boolean }).passed === false) await s.diagnose();
    });
    const { c, id } = s;
    const b = c.b;
    step('READY with two standbys, one synchronous');

    const enable = await b.call('POST', `${b.servicePath(id)}/enablePooler`);
    assert.equal(enable.status, 200, enable.text);
    await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await s.logs()));
    step('pooler enabled: READY');
    const svc = (await b.call('GET', b.servicePath(id))).body;
    const poolerPort = svc.connection_pooler?.endpoint?.port as number;
    assert.ok(Number.isInteger(poolerPort), JSON.stringify(svc));
    assert.notEqual(poolerPort, s.port);
    // Reported as the service's endpoint is: at the leader's host.
    assert.equal(svc.connection_pooler.endpoint.host, svc.endpoint.host);
    const before = await s.primary();
    assert.ok(before, 'a primary');
    assert.equal(svc.endpoint.host, before.host);

    // Through the pooler of two hosts: the primary's and a standby's.
    const standby = s.nodes.find((n) => n.name !== before.name) as (typeof s.nodes)[number];
    const at = (host: string, database = 'tsdb') =>
      s.conn({ host, port: poolerPort }).replace('dbname=tsdb', `dbname=${database}`);
    await psql(at(before.host), s.password, 'create table p (i int primary key, via text)');
    await psql(at(before.host), s.password, "insert into p values (1, 'primary host, session')");
    await psql(
      at(standby.host, 'tsdb_transaction'),
      s.password,
      "insert into p values (2, 'standby host, transaction')",
    );
    assert.equal(
      await psql(at(standby.host), s.password, "select string_agg(via, ',' order by i) from p"),
      'primary host, session,standby host, transaction',
    );
    assert.equal(
      await psql(at(before.host, 'tsdb_transaction'), s.password, 'select count(*) from p'),
      '2',
    );
    // The pooler reaches the primary, whichever host it is on.
    assert.equal(await psql(at(standby.host), s.password, 'select pg_is_in_recovery()'), 'f');
    // A wrong password: refused by the pooler, on either host.
    for (const host of [before.host, standby.host]) {
      assert.match(
        await psqlRefused(at(host), 'not-the-password'),
        /SASL authentication failed|password authentication failed/,
      );
    }
    step('written and read through two hosts’ poolers');

    // A pooler killed with kill -9: its host's node reports it, the
    // service's logs say so, and the reconciler's apply starts it again.
    const poolerState = join(
      c.host(standby.hostIndex).dataDir,
      'local',
      'instances',
      `${id}n${standby.name.replace(/^node/, '')}`,
      'pooler',
      'pooler.json',
    );
    const pidsOf = () => (JSON.parse(readFileSync(poolerState, 'utf8')) as { pids: number[] }).pids;
    const killed = pidsOf();
    for (const pid of killed) process.kill(pid, 'SIGKILL');
    await until(
      async () =>
        (await s.logs()).includes(
          `basin: the connection pooler does not run on the host of ${standby.name}`,
        ),
      60_000,
    ).catch(async () => assert.fail(await s.logs()));
    await until(
      async () =>
        pidsOf().every((p) => !killed.includes(p)) &&
        (await psql(at(standby.host), s.password, 'select count(*) from p').catch(() => '')) ===
          '2',
      60_000,
    );
    await b.waitForStatus(id, 'READY', 60_000);
    step('a pooler killed: said, and started again');

    // A transaction-mode writer through the standby's host's pooler,
    // reconnecting when its connection ends, each commit acknowledged kept.
    const ca = readFileSync(s.ca, 'utf8');
    const acked: number[] = [];
    let writing = true;
    let failures = 0;
    const writer = (async () => {
      let client: pg.Client | undefined;
      for (let i = 100; writing; i++) {
        try {
          client ??= await pgClient(poolerPort, s.password, { ca }, { host: standby.host, database: 'tsdb_transaction' }); // prettier-ignore
          await client.query("insert into p values ($1, 'writer')", [i]);
          acked.push(i);
        } catch {
          failures++;
          await client?.end().catch(() => undefined);
          client = undefined;
          await sleep(100);
        }
      }
      await client?.end().catch(() => undefined);
    })();
    await until(async () => acked.length >= 10, 60_000);

    // A resize that takes a restart: the standbys, then a switchover.
    const resize = await b.call('POST', `${b.servicePath(id)}/resize`, {
      cpu_millis: '1000',
      memory_gbs: '4',
    });
    assert.equal(resize.status, 202, resize.text);
    await until(async () => /basin: switchover: /.test(await s.logs()), 240_000).catch(async () =>
      assert.fail(await s.logs()),
    );
    await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await s.logs()));
    const after = await s.primary();
    assert.ok(after, 'a primary after the resize');
    assert.notEqual(after.name, before.name, 'the primary did not change');
    step(`switchover ${before.name} → ${after.name}: READY`);
    const count = acked.length;
    await until(async () => acked.length >= count + 10, 60_000);
    writing = false;
    await writer;
    const stored = new Set(
      (await psql(s.conn(after), s.password, "select i from p where via = 'writer'"))
        .split('\n')
        .map(Number),
    );
    const lost = acked.filter((i) => !stored.has(i));
    assert.deepEqual(lost, [], `acknowledged commits missing (${acked.length} acknowledged)`);
    console.log(
      `ha-pooler: ${acked.length} commits through the pooler, ${failures} failed attempts across the switchover (load: ${readFileSync('/proc/loadavg', 'utf8').trim()})`,
    );
    // The API follows the leader; the pooler there serves too.
    await until(
      async () =>
        (await b.call('GET', b.servicePath(id))).body.connection_pooler?.endpoint?.host ===
        after.host,
      30_000,
    );
    assert.equal(await psql(at(after.host), s.password, 'select pg_is_in_recovery()'), 'f');

    // A new password reaches every host's pooler; the old one is refused there.
    const newPassword = 'a-new-long-password-for-the-pooler';
    const pw = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
      password: newPassword,
    });
    assert.equal(pw.status, 204, pw.text);
    await b.waitForStatus(id, 'READY', 120_000);
    for (const n of s.nodes) {
      await until(
        async () => (await psql(at(n.host), newPassword, 'select 1').catch(() => '')) === '1',
        60_000,
      );
      assert.match(
        await psqlRefused(at(n.host), s.password),
        /SASL authentication failed|password authentication failed/,
      );
    }
    step('a new password through every host’s pooler');

    // Disabled: the pooler's port refuses on every host; the endpoint serves.
    const disable = await b.call('POST', `${b.servicePath(id)}/disablePooler`);
    assert.equal(disable.status, 200, disable.text);
    await b.waitForStatus(id, 'READY', 120_000);
    assert.equal((await b.call('GET', b.servicePath(id))).body.connection_pooler, undefined);
    for (const n of s.nodes) {
      assert.match(await psqlRefused(at(n.host), newPassword), /refused|could not connect|closed/i);
    }
    assert.equal(
      await psql(s.conn(s.endpointAt(1)), newPassword, 'select count(*) > 10 from p'),
      't',
    );
    step('pooler disabled: its port refuses');

    // A read replica set's pooler across hosts: a service without HA
    // replicas and a set of one node, on another host than the service's.
    const plain = await b.call('POST', b.servicePath(), { name: 'plain' });
    assert.equal(plain.status, 202, plain.text);
    const plainId = plain.body.service_id as string;
    const plainPassword = plain.body.initial_password as string;
    const plainSvc = await b.waitForStatus(plainId, 'READY', 300_000);
    await psql(
      s.conn(plainSvc.endpoint),
      plainPassword,
      "create table r (v text); insert into r values ('a'), ('b')",
    );
    const made = await b.call('POST', `${b.servicePath(plainId)}/replicaSets`, {
      name: 'readers',
      nodes: 1,
      cpu_millis: 500,
      memory_gbs: 2,
    });
    assert.equal(made.status, 202, made.text);
    const rsId = made.body.id as string;
    const rsPath = `${b.servicePath(plainId)}/replicaSets/${rsId}`;
    type Listed = {
      id: string;
      status: string;
      endpoint: { host: string; port: number };
      connection_pooler?: { endpoint: { host: string; port: number } };
    };
    const listed = async () =>
      ((await b.call('GET', `${b.servicePath(plainId)}/replicaSets`)).body as Listed[]).find(
        (r) => r.id === rsId,
      );
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 300_000);
    const rsOn = await b.call('POST', `${rsPath}/enablePooler`);
    assert.equal(rsOn.status, 200, rsOn.text);
    let rs: Listed | undefined;
    await b.waitFor(
      async () => {
        rs = await listed();
        return rs?.status === 'active' && rs.connection_pooler !== undefined;
      },
      "the set's pooler",
      300_000,
    );
    const rsPooler = (rs as Listed).connection_pooler?.endpoint as { host: string; port: number };
    // At the set's node's host (its endpoint's), not the service's.
    assert.equal(rsPooler.host, (rs as Listed).endpoint.host);
    assert.notEqual(rsPooler.host, plainSvc.endpoint.host);
    let read = '';
    await until(async () => {
      read = await psql(s.conn(rsPooler), plainPassword, 'select string_agg(v, \',\' order by v) from r').catch((e: Error) => e.message); // prettier-ignore
      return read === 'a,b';
    }, 120_000).catch(() => assert.fail(`read through the set's pooler: ${read}`));
    await assert.rejects(
      psql(s.conn(rsPooler), plainPassword, "insert into r values ('c')"),
      /read-only/,
    );
    assert.match(
      await psqlRefused(s.conn(rsPooler), 'not-the-password'),
      /SASL authentication failed|password authentication failed/,
    );
    const rsOff = await b.call('POST', `${rsPath}/disablePooler`);
    assert.equal(rsOff.status, 200, rsOff.text);
    await b.waitFor(
      async () => {
        const now = await listed();
        return now?.status === 'active' && now.connection_pooler === undefined;
      },
      "the set's pooler disabled",
      120_000,
    );
    await until(
      async () =>
        /refused|could not connect|closed/i.test(
          await psqlRefused(s.conn(rsPooler), plainPassword).catch(() => ''),
        ),
      60_000,
    );
    step("a read replica set's pooler on its node's host: read, write refused, disabled");
    await b.stop();
  },
);
