// Services on hosts, on the namespace topology (topology.sh): a control
// plane with `--driver hosts` (PostgreSQL store, root namespace) runs no
// database itself; three `basin host run` agents, each in a namespace of
// its own, run the services it places on them with the local driver. The
// services spread over the hosts, each endpoint names its host, psql
// connects with verify-full from the control plane's side, a service stops
// and starts on its host, a resize reaches its node's CPU budget there, and
// deletes leave nothing behind.

import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  cgroupOfProcess,
  detectCpuHierarchy,
} from '../../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import { psql } from '../e2e/clients.js';
import { servicePgdata } from '../harness/clean-up.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'bhs';
/** The topology's subnet, 10.231.2.0/24: its own, as the tests run in parallel. */
const NET = 2;

test(
  'the hosts driver places services across hosts; each runs there, reached at its host with verify-full',
  { timeout: 600_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 3,
      driver: 'hosts',
      args: ['--host-lost-after', '3s'],
    });
    const { b, cli, address } = c;
    const agentOf = (i: number) => ({ zone: `z${i}`, heartbeatMs: 500 });
    const agents: ChildProcess[] = [];
    for (const i of [1, 2, 3]) agents.push((await c.joinAgent(i, agentOf(i))).child);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 3 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);

    // Three services: one on each host (spread: the most memory left first).
    const made: { id: string; password: string }[] = [];
    for (const name of ['one', 'two', 'three']) {
      const created = await b.call('POST', b.servicePath(), { name });
      assert.equal(created.status, 202, created.text);
      made.push({ id: created.body.service_id, password: created.body.initial_password });
    }
    const ready = [];
    for (const m of made) ready.push(await b.waitForStatus(m.id, 'READY', 300_000));
    const endpoints = ready.map((s) => s.endpoint.host as string).sort();
    assert.deepEqual(endpoints, [address(1), address(2), address(3)]);

    // Each is a real PostgreSQL on its host, reached at the host's address
    // with verify-full against the installation's one services CA.
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    for (const [k, s] of ready.entries()) {
      const i = [address(1), address(2), address(3)].indexOf(s.endpoint.host) + 1;
      const conn = `host=${s.endpoint.host} port=${s.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;
      const password = (made[k] as { password: string }).password;
      await psql(
        conn,
        password,
        `create table t (v text); insert into t values ('${s.service_id}')`,
      );
      assert.equal(await psql(conn, password, 'select v from t'), s.service_id);
      // Its cluster lives on that host, not on the control plane.
      assert.ok(existsSync(join(c.host(i).dataDir, 'local')), 'the host has the service');
    }

    // Stop and start on its host; the data is still there.
    const first = ready[0] as { service_id: string; endpoint: { host: string; port: number } };
    assert.equal((await b.call('POST', `${b.servicePath(first.service_id)}/stop`)).status, 202);
    await b.waitForStatus(first.service_id, 'PAUSED', 120_000);
    assert.equal((await b.call('POST', `${b.servicePath(first.service_id)}/start`)).status, 202);
    await b.waitForStatus(first.service_id, 'READY', 120_000);
    assert.equal(
      await psql(
        `host=${first.endpoint.host} port=${first.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca}`,
        (made[0] as { password: string }).password,
        'select v from t',
      ),
      first.service_id,
    );

    // A size no host has room for (8 CPUs on hosts of this machine's) is refused at once.
    const big = await b.call('POST', b.servicePath(), {
      name: 'big',
      cpu_millis: '8000',
      memory_gbs: '32',
    });
    assert.equal(big.status, 503, big.text);
    assert.equal(big.body.code, 'UNAVAILABLE');
    assert.match(big.body.message, /no online host has 8000 millis/);
    // So is a resize its own host has no room for; one it has room for is made there.
    const resize = (cpu: string, memory: string) =>
      b.call('POST', `${b.servicePath(first.service_id)}/resize`, {
        cpu_millis: cpu,
        memory_gbs: memory,
      });
    const tooBig = await resize('8000', '32');
    assert.equal(tooBig.status, 503, tooBig.text);
    assert.equal(tooBig.body.code, 'UNAVAILABLE');
    assert.match(tooBig.body.message, /its host h\d has \d+ millis/);
    assert.equal((await resize('1000', '4')).status, 202);
    const grown = await b.waitForStatus(first.service_id, 'READY', 120_000);
    assert.equal(grown.resources[0].spec.cpu_millis, 1000);
    // Its host holds it to that size as one machine does: its postmaster
    // runs in a cgroup of its own whose CPU quota is one CPU.
    const cpu = await detectCpuHierarchy();
    assert.ok(!('none' in cpu), `this machine has a cpu cgroup hierarchy (${JSON.stringify(cpu)})`);
    const i1 = [address(1), address(2), address(3)].indexOf(first.endpoint.host) + 1;
    const pgdata = servicePgdata(c.host(i1).dataDir, first.service_id);
    const pid = Number(readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const group = cgroupOfProcess(readFileSync(`/proc/${pid}/cgroup`, 'utf8'), cpu);
    assert.match(group ?? '', new RegExp(`-${first.service_id}-0$`));
    const limit = (f: string) => readFileSync(join(cpu.dir, group as string, f), 'utf8').trim();
    assert.equal(cpu.version === 2 ? limit('cpu.max') : limit('cpu.cfs_quota_us'), cpu.version === 2 ? '100000 100000' : '100000'); // prettier-ignore

    // A host whose agent is killed stops reporting: the service on it becomes
    // UNSTABLE and its logs name the host; once the agent runs again, READY.
    const second = ready[1] as { service_id: string; endpoint: { host: string } };
    const i2 = [address(1), address(2), address(3)].indexOf(second.endpoint.host);
    (agents[i2] as ChildProcess).kill('SIGKILL');
    await b.waitForStatus(second.service_id, 'UNSTABLE', 60_000);
    const logs = await b.call('GET', `${b.servicePath(second.service_id)}/logs`);
    assert.equal(logs.status, 200, logs.text);
    assert.ok(
      logs.text.includes(`host h${i2 + 1} (${second.endpoint.host}) has not reported`),
      logs.text,
    );
    agents[i2] = c.runAgent(i2 + 1, agentOf(i2 + 1)).child;
    await b.waitForStatus(second.service_id, 'READY', 120_000);

    // A fork without a repository host (nothing to restore it from on
    // another host) is refused up front.
    const fork = await b.call('POST', `${b.servicePath(first.service_id)}/forkService`, {
      name: 'f',
      fork_strategy: 'NOW',
    });
    assert.equal(fork.status, 400, fork.text);

    // Deletes remove every service from its host: no OS user is left.
    for (const m of made) assert.equal((await b.call('DELETE', b.servicePath(m.id))).status, 202);
    for (const m of made) await b.waitGone(m.id, 120_000);
    const users = [1, 2, 3]
      .flatMap((i) => c.users(i))
      .filter((u) => made.some((m) => u.name === `basin-${m.id}`));
    assert.deepEqual(users, []);
    const placed = await c.store.sql('SELECT count(*)::int AS n FROM placements', [], 'basin');
    assert.deepEqual(placed.rows, [{ n: 0 }]);
    assert.equal((await b.stop()).code, 0);
  },
);
