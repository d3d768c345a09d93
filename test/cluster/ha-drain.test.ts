// Draining a host that holds the primary of an HA service across hosts
// (docs/decisions.md, "Draining a host" and "HA across hosts"), on the
// namespace topology: four database hosts, a service with two standbys
// (one synchronous) on three of them, a writer committing through another
// host's endpoint with verify-full the whole time. `basin host drain` of
// the primary's host: the primary hands over to a standby (a switchover),
// then its node is rebuilt on the fourth host, copied from the new
// primary; the host shows DRAINED, the service is READY with every node on
// the other hosts, each node has every row, and every acknowledged commit
// is there; the control plane is killed with kill -9 during the drain and
// started again. No repository host: an HA service's node moves without one.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { parse } from 'yaml';
import { pgClient, psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'hopd';
/** The topology's subnet, 10.231.21.0/24: its own, as the tests run in parallel. */
const NET = 21;
const HOSTS = [1, 2, 3, 4];
const ARGS = ['--host-lost-after', '5s', '--reconcile-interval-ms', '1000'];

const step = (what: string) => console.log(`ha-drain: ${new Date().toISOString()} ${what}`);

interface EtcdView {
  quorum: boolean;
  members: { healthy: boolean }[];
}
interface Listed {
  name: string;
  state: string;
}

test(
  "draining the host of an HA service's primary: a switchover, the node rebuilt on another host, DRAINED, every acknowledged commit kept",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: HOSTS.length,
      driver: 'hosts',
      args: ARGS,
    });
    const { cli, address } = c;
    let b = c.b;
    t.after(() => {
      if ((t as { passed?: boolean }).passed !== false) return;
      for (const i of HOSTS) {
        const instances = join(c.host(i).dataDir, 'local', 'instances');
        for (const d of existsSync(instances) ? readdirSync(instances) : []) {
          const log = join(instances, d, 'patroni', 'patroni.log');
          if (existsSync(log))
            console.error(`--- host ${i} ${d}:\n${readFileSync(log, 'utf8').slice(-6000)}`);
        }
      }
    });
    for (const i of HOSTS) await c.joinAgent(i, { zone: `z${i}`, heartbeatMs: 500 });
    await until(async () => {
      const e = JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
      return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
    }, 300_000);
    step('etcd has its quorum');

    const created = await b.call('POST', b.servicePath(), { name: 'ha', replica_count: 2 });
    assert.equal(created.status, 202, created.text);
    const id = created.body.service_id as string;
    const password = created.body.initial_password as string;
    await b.waitForStatus(id, 'READY', 600_000);
    const setHa = await b.call('POST', `${b.servicePath(id)}/setHA`, { sync_replica_count: 1 });
    assert.equal(setHa.status, 202, setHa.text);
    await b.waitForStatus(id, 'READY', 300_000);
    step('READY');
    const logsText = async () => (await b.call('GET', `${b.servicePath(id)}/logs`)).text;

    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const conn = (n: { host: string; port: number }) =>
      `host=${n.host} port=${n.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;
    const svc = (await b.call('GET', b.servicePath(id))).body;
    const port = svc.endpoint.port as number;
    // The primary's host: its endpoint.host names it.
    const drained = HOSTS.find((i) => address(i) === svc.endpoint.host) as number;
    assert.ok(drained, `endpoint host ${svc.endpoint.host}`);
    const via = HOSTS.find((i) => i !== drained) as number;
    const endpoint = { host: address(via), port };
    await psql(conn(endpoint), password, 'create table w (i int primary key)');

    const acked: number[] = [];
    let writing = true;
    const writer = (async () => {
      let client: pg.Client | undefined;
      for (let i = 1; writing; i++) {
        try {
          client ??= await pgClient(port, password, { ca: readFileSync(ca, 'utf8') }, { host: endpoint.host }); // prettier-ignore
          await client.query('insert into w values ($1)', [i]);
          acked.push(i);
        } catch {
          await client?.end().catch(() => undefined);
          client = undefined;
          await sleep(100);
        }
      }
      await client?.end().catch(() => undefined);
    })();
    await until(async () => acked.length >= 20, 60_000);
    step('the writer commits; draining');

    const out = await cli('host', 'drain', `h${drained}`);
    assert.match(out, /1 with HA replicas move their node\(s\) there without a stop/);
    // The control plane killed with kill -9 once the primary was asked to
    // hand over, and started again: the drain goes on from the rows and
    // what Patroni reports.
    await until(async () => (await logsText()).includes('basin: switchover: host'), 120_000);
    await b.kill();
    step('the control plane killed with kill -9 during the drain');
    b = await c.inst.start({
      args: ['--host-listen', c.controlPlane.replace(/^https:\/\//, ''), ...ARGS],
    });
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as Listed[];
      return listed.find((h) => h.name === `h${drained}`)?.state === 'DRAINED';
    }, 420_000).catch(async () => assert.fail(await logsText()));
    step('DRAINED');
    await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await logsText()));
    const count = acked.length;
    await until(async () => acked.length >= count + 20, 60_000);
    writing = false;
    await writer;

    // Every node on another host, one each.
    const hostsById = new Map(
      (await c.store.sql('SELECT id, name FROM hosts', [], 'basin')).rows.map(
        (r: { id: string; name: string }) => [r.id, r.name] as const,
      ),
    );
    const rows = (
      await c.store.sql(
        'SELECT resource_id, host_id, moved_from FROM placements ORDER BY resource_id',
        [],
        'basin',
      )
    ).rows as { resource_id: string; host_id: string; moved_from: string | null }[];
    assert.deepEqual(
      rows.map((r) => r.resource_id),
      [id, `${id}:node1`, `${id}:node2`],
    );
    const names = rows.map((r) => hostsById.get(r.host_id));
    assert.ok(!names.includes(`h${drained}`), names.join(', '));
    assert.equal(new Set(names).size, 3);
    assert.ok(rows.every((r) => r.moved_from === null));

    // Each node has every acknowledged commit, and one is the primary.
    const stored = new Set(
      (await psql(conn(endpoint), password, 'select i from w')).split('\n').map(Number),
    );
    const lost = acked.filter((i) => !stored.has(i));
    assert.deepEqual(lost, [], `acknowledged commits missing (${acked.length} acknowledged)`);
    const spec = (await b.call('GET', b.servicePath(id))).body;
    assert.notEqual(spec.endpoint.host, address(drained));
    const logs = await logsText();
    assert.ok(logs.includes(`basin: switchover: host h${drained} (${address(drained)}), the primary`), logs); // prettier-ignore
    assert.match(logs, new RegExp(`basin: host h${drained} \\(${address(drained).replace(/\./g, '\\.')}\\) is being drained: node\\d, a standby, moves to host h\\d`)); // prettier-ignore
    // The drained host holds nothing of the service's nodes any more.
    await until(async () => {
      const instances = join(c.host(drained).dataDir, 'local', 'instances');
      return !readdirSync(instances).some((d) => d.startsWith(`${id}n`));
    }, 60_000);
    for (const i of HOSTS.filter((h) => h !== drained)) {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      const mine = readdirSync(instances).filter((d) => d.startsWith(`${id}n`));
      if (mine.length === 0) continue;
      const conf = parse(
        readFileSync(join(instances, mine[0] as string, 'patroni', 'patroni.yml'), 'utf8'),
      ) as { postgresql: { connect_address: string } };
      const nodePort = conf.postgresql.connect_address.split(':')[1];
      let got = '';
      await until(async () => {
        got = await psql(conn({ host: address(i), port: Number(nodePort) }), password, 'select count(*) from w').catch((e: Error) => e.message); // prettier-ignore
        return got === String(stored.size);
      }, 60_000).catch(() => assert.fail(`host ${i}'s node: ${got}`));
    }
    console.log(`ha-drain: ${acked.length} commits acknowledged, every one kept (load: ${readFileSync('/proc/loadavg', 'utf8').trim()})`); // prettier-ignore
    await b.stop();
  },
);
