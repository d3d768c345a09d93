// Changes that reach the running nodes of an HA service across hosts
// (docs/decisions.md, "HA across hosts": rolling restarts, stop and
// start), on the namespace topology: three hosts, a service with two
// standbys, one synchronous. A writer commits through host 1's endpoint
// with verify-full the whole time. A resize changes shared_buffers and
// max_connections (in Patroni's dynamic configuration), which take a
// restart: every node is restarted by its own Patroni, the standbys
// first, then a switchover (asked of the leader's Patroni) and the old
// primary last; every node runs the new size, the primary has changed,
// the service's logs say each restart and the switchover, and every
// acknowledged commit is there; the control plane is killed with kill -9
// during it and started again, and goes on. The longest pause between
// two acknowledged commits is printed (not asserted: a time). A new
// password and a VPC reach every node and every host's endpoint (the
// pooler is ha-pooler.test.ts's). Then the service is stopped (PAUSED: no node,
// no endpoint answers) and started again (READY, its rows there).
// Each node's host holds it to its size: its postmaster's cgroup has the
// new size's CPU quota after the resize.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { parse } from 'yaml';
import {
  cgroupOfProcess,
  detectCpuHierarchy,
} from '../../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import { pgClient, psql, psqlRefused } from '../e2e/clients.js';
import { PATRONI_TIMING } from '../../src/drivers/hosts/ha-nodes.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'hopr';
/** The topology's subnet, 10.231.20.0/24: its own, as the tests run in parallel. */
const NET = 20;
const ARGS = ['--host-lost-after', '5s', '--reconcile-interval-ms', '1000'];

/** Patroni's timing in its dynamic configuration. */
const pick = (config: Record<string, unknown>) => ({
  ttl: config.ttl,
  loop_wait: config.loop_wait,
  retry_timeout: config.retry_timeout,
});

/** What the test needs of the patroni.yml of service `id`'s node under `instances`. */
function patroniConfigOf(instances: string, id: string) {
  const mine = readdirSync(instances).filter((d) => d.startsWith(`${id}n`));
  assert.equal(mine.length, 1, mine.join(', '));
  return parse(
    readFileSync(join(instances, mine[0] as string, 'patroni', 'patroni.yml'), 'utf8'),
  ) as {
    restapi: { connect_address: string; authentication: { username: string; password: string } };
    ctl: { certfile: string; keyfile: string; cacert: string };
  };
}

/** Each step's time in the test's output, for a run that ends past its deadline. */
const step = (what: string) => console.log(`ha-resize: ${new Date().toISOString()} ${what}`);

interface EtcdView {
  quorum: boolean;
  members: { healthy: boolean }[];
}

test(
  'an HA service across hosts resized under a writer: a rolling restart with a switchover, every node on the new size, every acknowledged commit kept; stopped (nothing answers) and started again',
  { timeout: 900_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 3,
      driver: 'hosts',
      args: ARGS,
    });
    const { cli, address } = c;
    let b = c.b;
    t.after(() => {
      if ((t as { passed?: boolean }).passed !== false) return;
      for (const i of [1, 2, 3]) {
        const instances = join(c.host(i).dataDir, 'local', 'instances');
        for (const d of existsSync(instances) ? readdirSync(instances) : []) {
          const log = join(instances, d, 'patroni', 'patroni.log');
          if (existsSync(log))
            console.error(`--- host ${i} ${d}:\n${readFileSync(log, 'utf8').slice(-6000)}`);
        }
      }
    });
    for (const i of [1, 2, 3]) await c.joinAgent(i, { zone: `z${i}`, heartbeatMs: 500 });
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
    step('READY with two standbys');
    // A cluster made before Basin's timing across hosts (its bootstrap.dcs
    // said Patroni's own: 30 s, a 10 s loop) is given it through Patroni's
    // dynamic configuration at its next apply: here, the setHA's.
    const patroniConfig = patroniConfigOf(join(c.host(1).dataDir, 'local', 'instances'), id);
    const patroni = (method: 'GET' | 'PATCH', body?: unknown) =>
      JSON.parse(
        execFileSync('ip', ['netns', 'exec', c.namespace(1), 'curl', '-sS', '--fail', '--max-time', '10',
          '--cacert', patroniConfig.ctl.cacert, '--cert', patroniConfig.ctl.certfile, '--key', patroniConfig.ctl.keyfile,
          '-u', `${patroniConfig.restapi.authentication.username}:${patroniConfig.restapi.authentication.password}`,
          '-X', method, ...(body === undefined ? [] : ['-H', 'content-type: application/json', '-d', JSON.stringify(body)]),
          `https://${patroniConfig.restapi.connect_address}/config`], { encoding: 'utf8' }),
      ) as Record<string, unknown>; // prettier-ignore
    const old = { ttl: 30, loop_wait: 10, retry_timeout: 10 };
    assert.deepEqual(pick(patroni('PATCH', old)), old);
    const setHa = await b.call('POST', `${b.servicePath(id)}/setHA`, { sync_replica_count: 1 });
    assert.equal(setHa.status, 202, setHa.text);
    await b.waitForStatus(id, 'READY', 300_000);
    assert.deepEqual(pick(patroni('GET')), {
      ttl: PATRONI_TIMING.ttl,
      loop_wait: PATRONI_TIMING.loopWait,
      retry_timeout: PATRONI_TIMING.retryTimeout,
    });
    step("Patroni's timing set again by the setHA's apply");
    // Basin's own entries (the default page has the primary's server lines too).
    const logsText = async () =>
      (await b.call('GET', `${b.servicePath(id)}/logs?source=basin`)).text;

    // Each node: its name, its host's address and its PostgreSQL port there.
    const nodes = [1, 2, 3].map((i) => {
      const instances = join(c.host(i).dataDir, 'local', 'instances');
      const mine = readdirSync(instances).filter((d) => d.startsWith(`${id}n`));
      assert.equal(mine.length, 1, `host ${i}: ${mine.join(', ')}`);
      const conf = parse(
        readFileSync(join(instances, mine[0] as string, 'patroni', 'patroni.yml'), 'utf8'),
      ) as { name: string; postgresql: { connect_address: string; data_dir: string } };
      const [host, port] = conf.postgresql.connect_address.split(':') as [string, string];
      return { name: conf.name, host, port: Number(port), pgdata: conf.postgresql.data_dir };
    });
    // The CPU quota of the cgroup a node's postmaster runs in, in µs per 100 ms.
    const cpu = await detectCpuHierarchy();
    assert.ok(!('none' in cpu), `this machine has a cpu cgroup hierarchy (${JSON.stringify(cpu)})`);
    const quotas = () =>
      nodes.map((n) => {
        const pid = Number(readFileSync(join(n.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
        const group = cgroupOfProcess(readFileSync(`/proc/${pid}/cgroup`, 'utf8'), cpu) ?? '';
        const read = (f: string) => readFileSync(join(cpu.dir, group, f), 'utf8').trim();
        return cpu.version === 2 ? read('cpu.max').split(' ')[0] : read('cpu.cfs_quota_us');
      });
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const conn = (n: { host: string; port: number }) =>
      `host=${n.host} port=${n.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;
    const each = (sql: string) => Promise.all(nodes.map((n) => psql(conn(n), password, sql)));
    const primaryOf = async () => {
      const recovery = await each('select pg_is_in_recovery()');
      assert.deepEqual([...recovery].sort(), ['f', 't', 't']);
      return nodes[recovery.indexOf('f')] as (typeof nodes)[number];
    };
    const before = await primaryOf();
    assert.deepEqual(await each('show shared_buffers'), ['512MB', '512MB', '512MB']);
    assert.deepEqual(await each('show max_connections'), ['100', '100', '100']);
    const startedAt = await each('select pg_postmaster_start_time()');

    // The writer: through host 1's endpoint, verify-full, each commit
    // acknowledged recorded with when it was.
    const svc = (await b.call('GET', b.servicePath(id))).body;
    const endpoint = { host: address(1), port: svc.endpoint.port as number };
    await psql(conn(before), password, 'create table w (i int primary key)');
    const acked: { i: number; at: number }[] = [];
    let writing = true;
    const writer = (async () => {
      let client: pg.Client | undefined;
      for (let i = 1; writing; i++) {
        try {
          client ??= await pgClient(endpoint.port, password, { ca: readFileSync(ca, 'utf8') }, { host: endpoint.host }); // prettier-ignore
          await client.query('insert into w values ($1)', [i]);
          acked.push({ i, at: Date.now() });
        } catch {
          await client?.end().catch(() => undefined);
          client = undefined;
          await sleep(100);
        }
      }
      await client?.end().catch(() => undefined);
    })();
    await until(async () => acked.length >= 20, 60_000);

    step('the writer commits');
    // The resize: shared_buffers 512MB → 2GB and max_connections 100 → 200
    // (a setting every member shares: Patroni's dynamic configuration),
    // which take a restart.
    const resize = await b.call('POST', `${b.servicePath(id)}/resize`, {
      cpu_millis: '2000',
      memory_gbs: '8',
    });
    assert.equal(resize.status, 202, resize.text);
    const resizedAt = Date.now();
    // The control plane killed with kill -9 once the rolling restart has
    // begun, and started again: it goes on from what the nodes run.
    await until(async () => /basin: restarting node\d/.test(await logsText()), 120_000);
    await b.kill();
    step('the control plane killed with kill -9 during the rolling restart');
    b = await c.inst.start({
      args: ['--host-listen', c.controlPlane.replace(/^https:\/\//, ''), ...ARGS],
    });
    await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await logsText()));
    const tookMs = Date.now() - resizedAt;
    step('READY after the resize');
    const count = acked.length;
    await until(async () => acked.length >= count + 20, 60_000);
    writing = false;
    await writer;

    assert.deepEqual(await each('show shared_buffers'), ['2GB', '2GB', '2GB']);
    assert.deepEqual(await each('show max_connections'), ['200', '200', '200']);
    // Each node's host holds it to its new size: two CPUs.
    assert.deepEqual(quotas(), ['200000', '200000', '200000']);
    const restartedAt = await each('select pg_postmaster_start_time()');
    for (const [k, n] of nodes.entries()) {
      assert.notEqual(restartedAt[k], startedAt[k], `${n.name} was not restarted`);
    }
    const after = await primaryOf();
    assert.notEqual(after.name, before.name, 'the primary did not change');
    const logs = await logsText();
    assert.match(logs, /basin: restarting node\d, a standby, for settings that take a restart \([^)]*shared_buffers/); // prettier-ignore
    assert.ok(logs.includes(`basin: switchover: the primary ${before.name} needs a restart`), logs);
    // What Patroni did, as Basin read it: the new leader named (a
    // switchover when the old primary was read running as a standby, else
    // while it was still restarting).
    let told = '';
    await until(async () => {
      told = await logsText();
      const host = `\\(on [^,]+, ${after.host.replaceAll('.', '\\.')}\\)`;
      return new RegExp(`patroni: (switchover: ${after.name} ${host} is the primary|failover: ${after.name} ${host} was promoted)`).test(told) && // prettier-ignore
        new RegExp(`patroni: ${after.name} ${host}: promoted to primary`).test(told); // prettier-ignore
    }, 60_000).catch(() => assert.fail(told));
    console.log(`ha-resize: ${told.match(/patroni: (switchover|failover): [^"]*/)?.[0] ?? ''}`);
    // Told once, however many readings (and both control-plane processes) saw it.
    const changes = JSON.parse(told).entries.filter((e: { message: string }) =>
      /^patroni: (switchover|failover):/.test(e.message),
    );
    assert.equal(changes.length, 1, told);
    // No entry of any node holds the password.
    for (const node of [0, 1, 2]) {
      const all = await b.call('GET', `${b.servicePath(id)}/logs?node=${node}`);
      assert.equal(all.status, 200, all.text);
      assert.ok(!all.text.includes(password), `node ${node}'s logs hold the password`);
    }
    const stored = new Set(
      (await psql(conn(after), password, 'select i from w')).split('\n').map(Number),
    );
    const lost = acked.filter((a) => !stored.has(a.i)).map((a) => a.i);
    assert.deepEqual(lost, [], `acknowledged commits missing (${acked.length} acknowledged)`);
    let pause = 0;
    for (let k = 1; k < acked.length; k++) {
      pause = Math.max(pause, (acked[k]?.at ?? 0) - (acked[k - 1]?.at ?? 0));
    }
    console.log(
      `ha-resize: ${acked.length} commits acknowledged; the resize took ${tookMs} ms to READY; ` +
        `the longest pause between two acknowledged commits: ${pause} ms (load: ${readFileSync('/proc/loadavg', 'utf8').trim()})`,
    );

    step('checked the resize');

    // A new password: the leader's SQL, replayed by the standbys.
    const newPassword = 'a-new-long-password-for-ha';
    const pw = await b.call('POST', `${b.servicePath(id)}/updatePassword`, {
      password: newPassword,
    });
    assert.equal(pw.status, 204, pw.text);
    await b.waitForStatus(id, 'READY', 120_000);
    for (const n of [...nodes, endpoint]) {
      await until(
        async () => (await psql(conn(n), newPassword, 'select 1').catch(() => '')) === '1',
        60_000,
      );
      assert.match(await psqlRefused(conn(n), password), /password authentication failed/);
    }

    // In a VPC: the endpoint (HAProxy on every host) and the nodes' own
    // ports admit its block only (this test's address is outside it);
    // detached, public again.
    const vpc = await b.call('POST', `/projects/${b.projectId}/vpcs`, {
      name: 'net',
      cidr: '10.213.79.0/24',
      region_code: 'us-east-1',
    });
    assert.equal(vpc.status, 201, vpc.text);
    const attach = await b.call('POST', `${b.servicePath(id)}/attachToVPC`, {
      vpc_id: vpc.body.id,
    });
    assert.equal(attach.status, 202, attach.text);
    await b.waitForStatus(id, 'READY', 120_000);
    for (const n of [endpoint, ...nodes]) {
      const refused = await psqlRefused(conn(n), newPassword);
      assert.match(refused, /pg_hba|closed|terminated|reset/i, `${n.host}:${n.port}: ${refused}`);
    }
    const detach = await b.call('POST', `${b.servicePath(id)}/detachFromVPC`, {
      vpc_id: vpc.body.id,
    });
    assert.equal(detach.status, 202, detach.text);
    await b.waitForStatus(id, 'READY', 120_000);
    await until(
      async () => (await psql(conn(endpoint), newPassword, 'select 1').catch(() => '')) === '1',
      60_000,
    );
    step('password and VPC reach every node');
    // Stopped: PAUSED, and neither a node nor the endpoint answers.
    const stop = await b.call('POST', `${b.servicePath(id)}/stop`);
    assert.equal(stop.status, 202, stop.text);
    await b.waitForStatus(id, 'PAUSED', 300_000);
    for (const n of [...nodes, endpoint]) {
      await assert.rejects(psql(conn(n), newPassword, 'select 1'));
    }
    assert.match(await logsText(), /basin: stopping node\d, node\d \(standbys\), then the leader/);
    step('PAUSED');
    // Started: READY, its rows there, writable through the endpoint.
    const startedAgainAt = Date.now();
    const start = await b.call('POST', `${b.servicePath(id)}/start`);
    assert.equal(start.status, 202, start.text);
    await b.waitForStatus(id, 'READY', 300_000).catch(async () => assert.fail(await logsText()));
    const readyMs = Date.now() - startedAgainAt;
    // The node stopped last, the leader, was started first, alone (its
    // control file says it stopped as the primary), the others after it.
    const stopLogs = await logsText();
    const last = /basin: stopping (node\d) \(the leader\)/.exec(stopLogs)?.[1];
    assert.ok(last, stopLogs);
    assert.ok(stopLogs.includes(`basin: starting ${last} first, alone`), stopLogs);
    let answer = '';
    await until(async () => {
      answer = await psql(
        conn(endpoint),
        newPassword,
        'select pg_is_in_recovery(), count(*) from w',
      ).catch((err: Error) => err.message);
      return answer === `f|${stored.size}`;
    }, 120_000).catch(() => assert.fail(`the endpoint after the start: ${answer}`));
    // Every node answers again, and the one started first leads.
    let primaries: string[] = [];
    await until(async () => {
      const sql = 'select pg_is_in_recovery()';
      const r = await Promise.all(nodes.map((n) => psql(conn(n), newPassword, sql).catch(() => '?'))); // prettier-ignore
      primaries = nodes.filter((_, k) => r[k] === 'f').map((n) => n.name);
      return !r.includes('?');
    }, 120_000);
    assert.deepEqual(primaries, [last]);
    step(`started again: ${last} first, alone, and it leads; READY in ${readyMs} ms (load: ${readFileSync('/proc/loadavg', 'utf8').trim()})`); // prettier-ignore
    await b.stop();
  },
);
