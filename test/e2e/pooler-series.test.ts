// The pooler's client and server connections, as a user and an operator
// read them: Basin as shipped (`node dist/main.js`, local driver) sampling
// every 2 s with its metrics listener on; a service's pooler holds three
// session-mode clients (each with a server connection of its own); the
// series API and /metrics both read three of each, then the clients gone.
// A read replica set of it is sampled under its own id: each of its nodes
// as a replica, and its pooler's clients.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFileSync, statSync } from 'node:fs';
import pg from 'pg';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import { activeReplicaSet } from './ha-nodes.js';
import { pgClient } from './clients.js';
import { parsePrometheusText } from '../metrics/prom-text.js';

test(
  "a service's pooler: its clients and servers in the series API and on /metrics",
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start({
      args: ['--series-interval-ms', '2000', '--metrics-listen', '127.0.0.1:0'],
    });
    const created = await b.call('POST', b.servicePath(), { name: 'pooled-series' });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const password: string = created.body.initial_password;
    await b.waitForStatus(id, 'READY');
    const on = await b.call('POST', `${b.servicePath(id)}/enablePooler`);
    assert.equal(on.status, 200, on.text);
    const svc = await b.waitForStatus(id, 'READY');
    const port: number = svc.connection_pooler.endpoint.port;
    const projectId: string = svc.project_id;

    const url = /Prometheus metrics at (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(b.output())?.[1];
    assert.ok(url, `the metrics address is logged: ${b.tail()}`);
    const until = async <T>(what: string, f: () => Promise<T | undefined>): Promise<T> => {
      const deadline = Date.now() + 120_000;
      let last: unknown;
      for (;;) {
        try {
          const v = await f();
          if (v !== undefined) return v;
        } catch (err) {
          last = err;
        }
        if (Date.now() > deadline) throw new Error(`not seen in time: ${what} (${String(last)})`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    /** LAST of each series over the last 20 s, from the series API (null: no sample). */
    const seriesNow = async (name: string): Promise<number | null> => {
      const now = Date.now();
      const res = await b.call('POST', `${b.servicePath(id)}/metrics/series`, {
        name,
        from: new Date(now - 20_000).toISOString(),
        to: new Date(now + 1000).toISOString(),
        bucket_seconds: 60,
        filters: [{ key: 'role', value: 'primary' }],
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.length, 1, res.text);
      assert.deepEqual(res.body[0].labels, { node: '0', role: 'primary' });
      const values = (res.body[0].data as { value: number | null }[]).map((d) => d.value);
      return values.filter((v) => v !== null).at(-1) ?? null;
    };
    /** The gauge of this service on /metrics. */
    const scraped = async (name: string): Promise<number | undefined> => {
      const res = await fetch(url);
      assert.equal(res.status, 200);
      const found = (parsePrometheusText(await res.text()).get(name)?.samples ?? []).filter(
        (s) => s.labels.service === id,
      );
      if (found.length === 0) return undefined;
      assert.equal(found.length, 1, `${name}: one series`);
      assert.deepEqual(found[0]?.labels, {
        project: projectId,
        service: id,
        node: '0',
        role: 'primary',
      });
      return found[0]?.value;
    };
    const both = (want: { clients: number; servers: number }) => async () => {
      const seen = {
        clients: await seriesNow('basin_pooler_client_connections'),
        servers: await seriesNow('basin_pooler_server_connections'),
        gaugeClients: await scraped('basin_service_pooler_client_connections'),
        gaugeServers: await scraped('basin_service_pooler_server_connections'),
      };
      const ok =
        seen.clients === want.clients &&
        seen.servers === want.servers &&
        seen.gaugeClients === want.clients &&
        seen.gaugeServers === want.servers;
      if (!ok) throw new Error(`want ${JSON.stringify(want)}, saw ${JSON.stringify(seen)}`);
      return seen;
    };

    // Listed once sampled (no client yet: zero of each).
    await until('the pooler series listed', async () => {
      const names = await b.call('GET', `${b.servicePath(id)}/metrics/available-series`);
      assert.equal(names.status, 200, names.text);
      for (const name of ['basin_pooler_client_connections', 'basin_pooler_server_connections'])
        assert.ok(names.body.includes(name), `${name} in ${names.text}`);
      return true;
    });
    await until('no client yet', both({ clients: 0, servers: 0 }));

    // Three session-mode clients, each holding its server connection.
    const clients: pg.Client[] = [];
    t.after(() => Promise.all(clients.map((c) => c.end().catch(() => {}))));
    for (let i = 0; i < 3; i++) {
      const c = await pgClient(port, password, undefined, { database: 'tsdb' });
      clients.push(c);
      assert.deepEqual((await c.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
    }
    await until('three clients and three servers', both({ clients: 3, servers: 3 }));

    // The clients leave; their server connections stay in the pool, idle.
    await Promise.all(clients.splice(0).map((c) => c.end()));
    await until('no clients, three idle servers', both({ clients: 0, servers: 3 }));

    // Basin's stats user reads the console and nothing else; its secret is root's alone.
    const files = new Layout(inst.dataDir).pooler(id);
    const st = statSync(files.stats);
    assert.equal(st.uid, 0);
    assert.equal(st.mode & 0o777, 0o600);
    const { secret } = JSON.parse(readFileSync(files.stats, 'utf8')) as { secret: string };
    assert.doesNotMatch(readFileSync(files.authFile, 'utf8'), new RegExp(secret));
    const stats = (database: string, password = secret) =>
      new pg.Client({
        host: '127.0.0.1',
        port,
        user: 'basin_stats',
        password,
        database,
        ssl: { rejectUnauthorized: false },
      });
    const refused = async (c: pg.Client) => {
      c.on('error', () => {});
      await assert.rejects(c.connect());
      await c.end().catch(() => {});
    };
    await refused(stats('tsdb'));
    await refused(stats('pgbouncer', 'not-the-secret'));
    const statsConsole = stats('pgbouncer');
    statsConsole.on('error', () => {});
    await statsConsole.connect();
    t.after(() => statsConsole.end().catch(() => {}));
    const pools = (await statsConsole.query('SHOW POOLS')).rows as { database: string }[];
    assert.ok(
      pools.some((r) => r.database === 'tsdb'),
      JSON.stringify(pools),
    );
    for (const admin of ['PAUSE tsdb', 'KILL tsdb', 'SET max_client_conn = 1', 'SHUTDOWN'])
      await assert.rejects(statsConsole.query(admin), /admin access needed/, admin);

    await t.test("a read replica set's nodes and pooler, under the set's id", async () => {
      const { id: rsId } = await activeReplicaSet(b, id, 'series');
      const rsPath = `${b.servicePath(id)}/replicaSets/${rsId}`;
      assert.equal((await b.call('POST', `${rsPath}/enablePooler`)).status, 200);
      const rsPooler = await until('the set pooled', async () => {
        const res = await b.call('GET', `${b.servicePath(id)}/replicaSets`);
        const rs = (
          res.body as { id: string; connection_pooler?: { endpoint: { port: number } } }[]
        ).find((r) => r.id === rsId);
        return rs?.connection_pooler?.endpoint.port;
      });
      const held = await until("a client through the set's pooler", () =>
        pgClient(rsPooler, password, undefined, { database: 'tsdb' }),
      );
      t.after(() => held.end().catch(() => {}));
      assert.deepEqual((await held.query('SELECT pg_is_in_recovery() AS r')).rows, [{ r: true }]);
      /** Each series of the set over the last 20 s: its labels and LAST value. */
      const setSeries = async (name: string) => {
        const now = Date.now();
        const res = await b.call('POST', `${b.servicePath(rsId)}/metrics/series`, {
          name,
          from: new Date(now - 20_000).toISOString(),
          to: new Date(now + 1000).toISOString(),
          bucket_seconds: 60,
        });
        assert.equal(res.status, 200, res.text);
        return (res.body as { labels: object; data: { value: number | null }[] }[])
          .map((s) => ({
            labels: s.labels,
            last: s.data
              .map((d) => d.value)
              .filter((v) => v !== null)
              .at(-1),
          }))
          .sort((x, y) => JSON.stringify(x.labels).localeCompare(JSON.stringify(y.labels)));
      };
      await until('both nodes sampled as replicas, the pooler with its client', async () => {
        const connections = await setSeries('timescale_cloud_database_num_connections');
        const clients = await setSeries('basin_pooler_client_connections');
        const ok =
          JSON.stringify(connections.map((c) => c.labels)) ===
            JSON.stringify([
              { node: '0', role: 'replica' },
              { node: '1', role: 'replica' },
            ]) &&
          connections.every((c) => typeof c.last === 'number') &&
          clients.length === 1 &&
          clients[0]?.last === 1;
        if (!ok) throw new Error(JSON.stringify({ connections, clients }));
        return true;
      });
      // What the service's own series hold is the service's: none of the set's nodes.
      const own = await b.call('POST', `${b.servicePath(id)}/metrics/series`, {
        name: 'timescale_cloud_database_num_connections',
        from: new Date(Date.now() - 20_000).toISOString(),
        to: new Date(Date.now() + 1000).toISOString(),
        bucket_seconds: 60,
      });
      assert.deepEqual(
        (own.body as { labels: object }[]).map((s) => s.labels),
        [{ node: '0', role: 'primary' }],
      );
    });
  },
);
