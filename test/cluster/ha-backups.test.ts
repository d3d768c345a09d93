// WAL archiving of an HA service across hosts (docs/decisions.md, "HA
// across hosts": archiving), on the namespace topology: h1 is the
// repository host, h2-h4 database hosts (etcd's three members). An HA
// service with one synchronous standby: its nodes hold the service's
// client identity for its stanza on the repository host, its leader made
// the stanza, and a WAL switch on the leader (pgBackRest's `check`, run
// as the leader node's own user with its own configuration) reaches the
// stanza's archive through the leader's archive_command. Its first backup
// is taken at creation, from the leader's node, on the repository host,
// and a PITR fork of it holds exactly the rows committed before the target.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import { psql } from '../e2e/clients.js';
import { pitrWindowStart } from '../harness/basin-api.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'hob';
/** The topology's subnet, 10.231.15.0/24: this engineer's own. */
const NET = 15;

interface EtcdView {
  quorum: boolean;
  members: { healthy: boolean }[];
}

test(
  "an HA service across hosts archives its WAL into its stanza on the repository host with the service's client identity on each node, is backed up from its leader at creation, and a PITR fork of it holds exactly the rows before the target",
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 4,
      driver: 'hosts',
      args: ['--host-lost-after', '5s', '--reconcile-interval-ms', '1000'],
    });
    const { b, cli, address } = c;
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    for (const i of [2, 3, 4]) await c.joinAgent(i, { zone: `z${i}`, heartbeatMs: 500 });
    await until(async () => {
      const e = JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
      return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
    }, 300_000);

    const created = await b.call('POST', b.servicePath(), { name: 'ha', replica_count: 1 });
    assert.equal(created.status, 202, created.text);
    const id = created.body.service_id as string;
    const password = created.body.initial_password as string;
    await b.waitForStatus(id, 'READY', 600_000);
    const setHa = await b.call('POST', `${b.servicePath(id)}/setHA`, { sync_replica_count: 1 });
    assert.equal(setHa.status, 202, setHa.text);
    await b.waitForStatus(id, 'READY', 300_000);

    // The two nodes, each on a database host of its own.
    const nodes = [2, 3, 4].flatMap((i) => {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      return readdirSync(instances)
        .filter((d) => d.startsWith(`${id}n`))
        .map((local) => {
          const conf = parse(
            readFileSync(join(instances, local, 'patroni', 'patroni.yml'), 'utf8'),
          ) as { postgresql: { connect_address: string } };
          const port = Number(conf.postgresql.connect_address.split(':')[1]);
          const backup = join(c.host(i).dataDir, 'local', 'backup', local);
          return { i, local, port, backup };
        });
    });
    assert.equal(nodes.length, 2);
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const conn = (n: (typeof nodes)[number]) =>
      `host=${address(n.i)} port=${n.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;
    const recovery = await Promise.all(
      nodes.map((n) => psql(conn(n), password, 'select pg_is_in_recovery()')),
    );
    const leader = nodes[recovery.indexOf('f')] as (typeof nodes)[number];
    assert.ok(leader, `no leader among ${recovery.join(', ')}`);

    // Archiving is on, and every node holds the service's client identity
    // (its stanza's client name, not the node's).
    assert.equal(await psql(conn(leader), password, 'show archive_mode'), 'on');
    for (const n of nodes) {
      const subject = execFileSync(
        'openssl',
        ['x509', '-noout', '-subject', '-in', join(n.backup, 'client.crt')],
        { encoding: 'utf8' },
      );
      assert.match(subject, new RegExp(`CN ?= ?basin-service-${id}\\b`));
    }
    assert.ok(existsSync(join(leader.backup, 'stanza-made')), 'the leader made the stanza');

    await psql(conn(leader), password, 'create table t (v int); insert into t values (1), (2)');
    // pgBackRest's check, as the leader node's user in its host's namespace:
    // it switches the WAL and waits until that segment is in the archive.
    // (Its user is in its host's own /etc: cluster.ts.)
    const owner = c
      .users(leader.i)
      .find((u) => u.uid === statSync(join(leader.backup, 'lock')).uid);
    assert.ok(owner, "the leader node's user");
    execFileSync(
      'ip',
      [
        'netns', 'exec', c.namespace(leader.i), 'setpriv', `--reuid=${owner.uid}`,
        `--regid=${owner.gid}`, '--clear-groups', '--',
        'pgbackrest', `--config=${join(leader.backup, 'pgbackrest.conf')}`, `--stanza=${id}`,
        'check',
      ], // prettier-ignore
      { stdio: 'pipe', timeout: 120_000 },
    );
    // The segments are in the stanza's archive on the repository host.
    const archive = join(c.host(1).dataDir, 'repository', 'repos', id, 'repo', 'archive', id);
    const segments = readdirSync(archive)
      .filter((d) => /^15-\d+$/.test(d))
      .flatMap((d) => readdirSync(join(archive, d)).filter((s) => /^[0-9A-F]{16}$/.test(s)))
      .flatMap((dir) => dir);
    assert.ok(segments.length > 0, `no archived WAL under ${archive}`);

    // Its first backup, taken at creation on the repository host from the
    // leader's node: from then on, PITR reaches back to it.
    await b.waitFor(() => pitrWindowStart(b, id), 'the first backup', 300_000);
    await psql(conn(leader), password, 'insert into t values (3)');
    await sleep(1_100);
    const target = new Date().toISOString();
    await sleep(1_100);
    await psql(conn(leader), password, 'insert into t values (4)');
    // A PITR fork: a service of its own (not HA), restored on a database
    // host from the HA service's stanza, holding exactly the rows committed
    // before the target; read through its endpoint with verify-full.
    const asked = await b.call('POST', `${b.servicePath(id)}/forkService`, {
      fork_strategy: 'PITR',
      target_time: target,
    });
    assert.equal(asked.status, 202, asked.text);
    const forkId = asked.body.service_id as string;
    const fork = await b.waitForStatus(forkId, 'READY', 300_000);
    assert.notEqual(fork.endpoint.host, address(1), 'the repository host runs no service');
    const forkRows = await psql(
      `host=${fork.endpoint.host} port=${fork.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`,
      asked.body.initial_password as string,
      'select v from t order by v',
    );
    assert.deepEqual(forkRows.split('\n'), ['1', '2', '3']);
    assert.equal((await b.call('DELETE', b.servicePath(forkId))).status, 202);
    await b.waitGone(forkId, 300_000);

    const deleted = await b.call('DELETE', b.servicePath(id));
    assert.equal(deleted.status, 202, deleted.text);
    await b.waitGone(id, 300_000);
    assert.ok(
      !existsSync(join(c.host(1).dataDir, 'repository', 'repos', id)),
      'its repository went with it',
    );
    for (const n of nodes)
      assert.ok(!existsSync(n.backup), `${n.local}: its backup side went with it`);
  },
);
