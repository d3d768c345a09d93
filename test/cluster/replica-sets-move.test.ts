// Read replica sets across hosts when their hosts or their primary move
// (docs/decisions.md, "Read replica sets across hosts" and "Draining a
// host"), on the namespace topology: h1 is the repository host, h2, h3 and
// h4 database hosts, each in a zone of its own. A service without HA
// replicas on one of them (P) and a set of two nodes on the two others (A
// and B).
//
// - `basin host drain A`: the node there is rebuilt on B (the only other
//   host that is not the service's), its row moves, A is DRAINED and keeps
//   nothing of it (files, OS user), the primary's slots stay two, both
//   active; every read through the set's endpoint during the move answers.
// - `basin host drain B`: no host is left for the set's nodes: the drain
//   says so, the set's logs say why, and B stays DRAINING (its nodes serve).
// - A resize of the set that B has no room for: a 503 saying so, the set
//   unchanged.
// - `basin host drain P`: the service moves (restored from the repository
//   host); the set's nodes stream from its new host (rebuilt from it), and
//   a row written after the move is read back through the set's endpoint.
// - Each node's server lines in the set's logs (`?node=`), read from its host.
// - The primary's new host killed (--restore-lost-services on): the service
//   is restored elsewhere, and its set follows it there too.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { pitrWindowStart } from '../harness/basin-api.js';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'rrm';
/** The topology's subnet, 10.231.22.0/24: its own, as the tests run in parallel. */
const NET = 22;

interface Listed {
  name: string;
  state: string;
}

test(
  "a read replica set's node moves off a drained host while the set serves; no room: the drain says so; a resize without room is refused; the set follows its moved primary",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 4,
      driver: 'hosts',
      // A lost host's service is restored elsewhere by itself (step 6).
      args: [
        '--backup-schedule',
        '1d',
        '--reconcile-interval-ms',
        '1000',
        '--restore-lost-services',
        'on',
      ],
    });
    const { b, cli, address } = c;
    const hosts = async () => JSON.parse(await cli('host', 'list', '--json')) as Listed[];
    const stateOf = async (i: number) => (await hosts()).find((h) => h.name === `h${i}`)?.state;
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    for (const i of [2, 3, 4]) await c.joinAgent(i, { zone: `z${i}` });
    await until(async () => {
      const listed = await hosts();
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
    const P = hostOf(svc.endpoint.host);
    assert.ok(P, svc.endpoint.host);
    await psql(
      conn(address(P), svc.endpoint.port),
      password,
      "CREATE TABLE r (v text); INSERT INTO r VALUES ('a'), ('b')",
    );

    const made = await b.call('POST', `${b.servicePath(id)}/replicaSets`, {
      name: 'readers',
      nodes: 2,
      cpu_millis: 500,
      memory_gbs: 2,
    });
    assert.equal(made.status, 202, made.text);
    const rsId = made.body.id as string;
    const rsPath = `${b.servicePath(id)}/replicaSets/${rsId}`;
    type SetView = {
      id: string;
      status: string;
      cpu_millis: number;
      memory_gbs: number;
      endpoint: { host: string; port: number };
    };
    const listed = async () => {
      const res = await b.call('GET', `${b.servicePath(id)}/replicaSets`);
      assert.equal(res.status, 200, res.text);
      return (res.body as SetView[]).find((r) => r.id === rsId);
    };
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 300_000);
    const port = ((await listed()) as SetView).endpoint.port;
    const setRows = async () =>
      (
        await c.store.sql(
          'SELECT resource_id, host_id, moved_from, cpu_millis FROM placements WHERE resource_id LIKE $1 ORDER BY resource_id',
          [`${rsId}:%`],
          'basin',
        )
      ).rows as { resource_id: string; host_id: string; moved_from: string | null; cpu_millis: number }[]; // prettier-ignore
    const hostIds = new Map(
      (
        (await c.store.sql('SELECT id, name FROM hosts', [], 'basin')).rows as {
          id: string;
          name: string;
        }[]
      ).map(
        // prettier-ignore
        (h) => [h.id, Number(h.name.slice(1))],
      ),
    );
    const rowsNow = async () => (await setRows()).map((r) => hostIds.get(r.host_id) as number);
    const [A, B] = (await rowsNow()).sort() as [number, number];
    assert.ok(A !== P && B !== P && A !== B, `service on h${P}, set on h${A}, h${B}`);
    const setNodeDirs = (i: number) => {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      return existsSync(instances)
        ? readdirSync(instances).filter((d) => d.startsWith(`${rsId}n`))
        : [];
    };
    const slots = (primaryAt: number) =>
      psql(
        conn(address(primaryAt), svc.endpoint.port),
        password,
        `SELECT count(*), count(*) FILTER (WHERE active) FROM pg_replication_slots WHERE slot_name LIKE 'rs\\_${rsId}\\_%'`,
      );
    assert.equal(await slots(P), '2|2');

    // Reads through the set's endpoint on P's address, all through the move.
    let reading = true;
    let reads = 0;
    const failures: string[] = [];
    const reader = (async () => {
      while (reading) {
        try {
          assert.equal(await psql(conn(address(P), port), password, 'SELECT count(*) FROM r'), '2');
          reads++;
        } catch (err) {
          failures.push(`${new Date().toISOString()} ${(err as Error).message}`);
        }
      }
    })();

    // 1. A drained: its node is rebuilt on B, the only other host not the service's.
    const out = await cli('host', 'drain', `h${A}`);
    assert.match(out, /1 node\(s\) of 1 read replica set\(s\) move/);
    await until(async () => (await stateOf(A)) === 'DRAINED', 180_000);
    await until(async () => {
      const rows = await setRows();
      return rows.every((r) => hostIds.get(r.host_id) === B && r.moved_from === null);
    }, 180_000);
    // Both nodes serve (each answers from its own namespace's address).
    const seen = new Set<string>();
    await until(async () => {
      seen.add(await psql(conn(address(P), port), password, 'SELECT inet_server_addr()'));
      return seen.size === 2;
    }, 120_000);
    reading = false;
    await reader;
    t.diagnostic(`${reads} reads through the set during the move, ${failures.length} failed`);
    assert.deepEqual(failures, [], 'every read through the set answered during the move');
    assert.ok(reads > 0);
    // Nothing of it is left on A; the primary keeps two slots, both used.
    await until(
      async () =>
        setNodeDirs(A).length === 0 && !c.users(A).some((u) => u.name.startsWith(`basin-${rsId}`)),
      120_000,
    );
    assert.equal(setNodeDirs(B).length, 2, setNodeDirs(B).join(', '));
    await until(async () => (await slots(P)) === '2|2', 60_000);
    const primaryHba = () =>
      readFileSync(
        join(new Layout(c.host(P).dataDir).pgdata({ id, node: 0 }), 'pg_hba.conf'),
        'utf8',
      );
    assert.ok(!primaryHba().includes(`${address(A)}/32`), primaryHba());
    assert.ok(primaryHba().includes(`${address(B)}/32`), primaryHba());
    assert.equal((await listed())?.status, 'active');
    const setLogs = async () => (await b.call('GET', `${b.servicePath(rsId)}/logs`)).text;
    assert.match(
      await setLogs(),
      new RegExp(`host h${A} \\([0-9.]+\\) is being drained: node\\d of this read replica set moves to host h${B}`), // prettier-ignore
    );

    // 2. B drained too: no host is left for the set's nodes (P is the
    // service's, A is drained). The drain says so; B stays DRAINING.
    assert.match(
      await cli('host', 'drain', `h${B}`),
      /2 node\(s\) of 1 read replica set\(s\) move.*a node no other host has room for stays/,
    );
    await b.waitFor(
      async () => /no database host other than the service's has room for node\d/.test(await setLogs()), // prettier-ignore
      "the set's logs to say its nodes have nowhere to go",
      120_000,
    );
    assert.equal(await stateOf(B), 'DRAINING');
    assert.equal(await psql(conn(address(P), port), password, 'SELECT count(*) FROM r'), '2');

    // 3. A resize that B has no room for (two nodes of 2000 millis on a
    // host of two CPUs): refused with a 503, the set unchanged.
    const resized = await b.call('POST', `${rsPath}/resize`, {
      cpu_millis: '2000',
      memory_gbs: '8',
    });
    assert.equal(resized.status, 503, resized.text);
    assert.equal(resized.body.code, 'UNAVAILABLE');
    assert.match(
      resized.body.message as string,
      new RegExp(`host h${B}, which runs its node0, node1, has .* free.*choose a smaller size`),
    );
    const after = (await listed()) as SetView;
    assert.equal(after.status, 'active');
    assert.equal(after.cpu_millis, 500);
    assert.ok((await setRows()).every((r) => r.cpu_millis === 500));

    // 4. B and A take services again; then P is drained: the service moves
    // (restored from its backups), and its set streams from its new host.
    assert.match(await cli('host', 'drain', `h${B}`, '--undo'), /takes services again/);
    assert.match(await cli('host', 'drain', `h${A}`, '--undo'), /takes services again/);
    await b.waitFor(() => pitrWindowStart(b, id), 'its first backup', 180_000);
    await psql(conn(address(P), svc.endpoint.port), password, "INSERT INTO r VALUES ('c')");
    assert.match(await cli('host', 'drain', `h${P}`), /1 service\(s\) move/);
    const moved = await b.waitFor(
      async () => {
        const r = await b.call('GET', b.servicePath(id));
        return (r.body.status === 'READY' && r.body.endpoint.host !== address(P) && r.body) || undefined; // prettier-ignore
      },
      'the service READY on another host',
      300_000,
    );
    const N = hostOf(moved.endpoint.host as string);
    t.diagnostic(`the service moved from h${P} to h${N}; the set's nodes are on h${B}`);
    await psql(conn(address(N), svc.endpoint.port), password, "INSERT INTO r VALUES ('d')");
    // Read back through the set's endpoint (on every host serving it).
    await until(
      async () =>
        (await psql(conn(address(B), port), password, "SELECT string_agg(v, ',' ORDER BY v) FROM r").catch(() => '')) === 'a,b,c,d', // prettier-ignore
      240_000,
    );
    for (const dir of setNodeDirs(B)) {
      const conf = readFileSync(
        join(new Layout(c.host(B).dataDir).pgdata({ id: dir, node: 0 }), 'basin.conf'),
        'utf8',
      );
      assert.match(conf, new RegExp(`primary_conninfo = '.*host=''${address(N)}''`));
    }
    // Said, not asserted: how each node came to follow (rebuilt from the
    // moved primary, which opened a timeline of its own at its archive's end).
    const rebuilt = (c.agents[B - 1]?.output() ?? '').split('\n').filter((l) => l.includes("primary moved to another host")); // prettier-ignore
    t.diagnostic(`h${B}'s agent rebuilt ${rebuilt.length} set node(s) for the moved primary`);
    await until(async () => (await slots(N)) === '2|2', 120_000);
    const newHba = readFileSync(
      join(new Layout(c.host(N).dataDir).pgdata({ id, node: 0 }), 'pg_hba.conf'),
      'utf8',
    );
    assert.ok(newHba.includes(`${address(B)}/32`), newHba);
    // Both nodes stream from it (each answers with every row).
    const streams = new Set<string>();
    await until(async () => {
      const [addr, n] =
        (await psql(conn(address(B), port), password, "SELECT inet_server_addr(), (SELECT count(*) FROM r) || '' FROM pg_stat_wal_receiver WHERE status = 'streaming'")) // prettier-ignore
          .split('|');
      if (n === '4' && addr) streams.add(addr);
      return streams.size === 2;
    }, 120_000);
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 120_000);
    await until(async () => (await stateOf(P)) === 'DRAINED', 120_000);

    // Each node's server lines, read from its host as one machine reads a
    // set's node (`node`): the node streaming from the moved primary.
    for (const node of [0, 1]) {
      await b.waitFor(
        async () => {
          const r = await b.call('GET', `${b.servicePath(rsId)}/logs?node=${node}`);
          assert.equal(r.status, 200, r.text);
          const entries = r.body.entries as { message: string; source: string }[];
          return (
            entries.some(
              (e) =>
                e.source === 'database' && /started streaming WAL from primary/.test(e.message),
            ) || undefined
          );
        },
        `node${node}'s server lines`,
        60_000,
      );
    }

    // 6. The primary's host lost (killed): the service is restored on P
    // (taken back: the host with the most room) from its backups, and its
    // set streams from there: a row written after the restore is read
    // back through the set's endpoint.
    assert.match(await cli('host', 'drain', `h${P}`, '--undo'), /takes services again/);
    c.killHost(N);
    const restored = await b.waitFor(
      async () => {
        const r = await b.call('GET', b.servicePath(id));
        return (r.body.status === 'READY' && r.body.endpoint.host !== address(N) && r.body) || undefined; // prettier-ignore
      },
      'the service restored on another host',
      300_000,
    );
    const R = hostOf(restored.endpoint.host as string);
    t.diagnostic(`h${N} lost: the service was restored on h${R}`);
    await psql(conn(address(R), svc.endpoint.port), password, "INSERT INTO r VALUES ('e')");
    const onPrimary = await psql(conn(address(R), svc.endpoint.port), password, "SELECT string_agg(v, ',' ORDER BY v) FROM r"); // prettier-ignore
    assert.match(onPrimary, /^a,b,c,(d,)?e$/);
    await until(
      async () =>
        (await psql(conn(address(B), port), password, "SELECT string_agg(v, ',' ORDER BY v) FROM r").catch(() => '')) === onPrimary, // prettier-ignore
      240_000,
    );
    for (const dir of setNodeDirs(B)) {
      const conf = readFileSync(
        join(new Layout(c.host(B).dataDir).pgdata({ id: dir, node: 0 }), 'basin.conf'),
        'utf8',
      );
      assert.match(conf, new RegExp(`primary_conninfo = '.*host=''${address(R)}''`));
    }
    await until(async () => (await slots(R)) === '2|2', 120_000);
    await b.waitFor(async () => (await listed())?.status === 'active', 'the set active', 180_000);
    await b.stop();
  },
);
