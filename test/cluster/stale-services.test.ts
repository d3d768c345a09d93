// A returning host's stale nodes never serve (docs/decisions.md, "Several
// hosts": losing a host), on the namespace topology: one database host.
// When the control plane no longer places a service on a host (here its
// placement is moved in the store to a host that is not this one, as a
// restore elsewhere would move it), the host's agent kills every process
// of the service and removes it: at its next heartbeat while it runs, and
// at its start, before its local driver starts, when it was down
// meanwhile. What is still placed there is left alone.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'rxs';
/** The topology's subnet, 10.231.14.0/24: its own, as the tests run in parallel. */
const NET = 14;

test(
  'a service no longer placed on a host is killed and removed there, by the running agent and by an agent at its start',
  { timeout: 600_000 },
  async (t) => {
    const c = await cluster(t, { prefix: PREFIX, net: NET, hosts: 1, driver: 'hosts' });
    const { b, cli, address } = c;
    const agent = await c.joinAgent(1);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 1 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);

    const services: { id: string; port: number; password: string }[] = [];
    for (const name of ['moved', 'moved-while-down', 'kept']) {
      const created = await b.call('POST', b.servicePath(), { name });
      assert.equal(created.status, 202, created.text);
      const ready = await b.waitForStatus(created.body.service_id, 'READY', 300_000);
      assert.equal(ready.endpoint.host, address(1));
      services.push({
        id: ready.service_id,
        port: ready.endpoint.port,
        password: created.body.initial_password,
      });
    }
    const [moved, movedWhileDown, kept] = services as [
      (typeof services)[0],
      (typeof services)[0],
      (typeof services)[0],
    ];
    const sql = (s: (typeof services)[0], q: string) =>
      psql(
        `host=${address(1)} port=${s.port} user=tsdbadmin dbname=tsdb sslmode=require connect_timeout=5`,
        s.password,
        q,
      );
    for (const s of services) assert.equal(await sql(s, 'SELECT 1'), '1');
    // Each one's first backup taken (it starts at READY), so that none runs
    // when the service is moved away: listed in its repository on the host.
    const local = join(c.host(1).dataDir, 'local');
    const backedUp = (id: string) => {
      try {
        const info = readFileSync(join(local, 'repos', id, 'repo', 'backup', id, 'backup.info'));
        return /^\d{8}-\d{6}F=/m.test(info.toString('utf8'));
      } catch {
        return false;
      }
    };
    for (const s of services) await until(async () => backedUp(s.id), 180_000);

    const store = new pg.Client({ connectionString: c.url });
    store.on('error', () => undefined); // the store stops with the test
    await store.connect();
    // What a restore elsewhere writes: the service placed on another host.
    const moveAway = (id: string) =>
      store.query("UPDATE placements SET host_id = 'elsewhere' WHERE resource_id = $1", [id]);
    const uidOf = (id: string) => c.users(1).find((u) => u.name === serviceUserName(id))?.uid;
    // Its processes, its data and its OS user gone (the user goes after its last process).
    const gone = async (id: string, uid: number) =>
      (await processesOfUser(uid)).length === 0 &&
      !existsSync(join(local, 'instances', id)) &&
      uidOf(id) === undefined;

    // While the agent runs: at its next heartbeats.
    const movedUid = uidOf(moved.id);
    assert.ok(movedUid !== undefined);
    assert.ok((await processesOfUser(movedUid)).length > 0);
    await moveAway(moved.id);
    await until(() => gone(moved.id, movedUid), 60_000);
    await assert.rejects(sql(moved, 'SELECT 1'));

    // While the agent is down (its services keep running), then at its start.
    agent.child.kill('SIGKILL');
    await agent.exited;
    const downUid = uidOf(movedWhileDown.id);
    assert.ok(downUid !== undefined);
    assert.ok((await processesOfUser(downUid)).length > 0, 'it runs without its agent');
    assert.equal(await sql(movedWhileDown, 'SELECT 1'), '1');
    await moveAway(movedWhileDown.id);
    const again = c.runAgent(1);
    await until(() => gone(movedWhileDown.id, downUid), 60_000).catch(async (err: Error) => {
      const left = await processesOfUser(downUid);
      const ps = execFileSync('ps', ['-eo', 'pid,ppid,stat,wchan:20,uid,args']).toString();
      throw new Error(
        `${err.message}: left ${JSON.stringify(left)}; user ${String(uidOf(movedWhileDown.id))}; ` +
          `dir ${existsSync(join(local, 'instances', movedWhileDown.id))}\n` +
          `agent: ${again.output().slice(-3000)}\n` +
          ps
            .split('\n')
            .filter((l) => l.includes(String(again.child.pid)) || l.includes(` ${downUid} `))
            .join('\n'),
      );
    });
    // Killed before the local driver started (its log lines reach its
    // output a moment after: pino writes them asynchronously).
    await until(async () => again.output().includes('no longer places on this host'), 30_000).catch(
      () => undefined,
    );
    const out = again.output();
    const killedAt = out.indexOf('no longer places on this host');
    assert.ok(killedAt >= 0, out.slice(-2000));
    const listening = out.indexOf('host agent at https://');
    assert.ok(listening < 0 || killedAt < listening, out.slice(-2000));

    // What is still placed there was left alone: its data and its user are
    // there, and it serves (once the restarted agent's driver has its
    // network up again: a connection may be refused for a moment).
    assert.ok(existsSync(join(local, 'instances', kept.id)));
    assert.ok(uidOf(kept.id) !== undefined);
    await until(async () => (await sql(kept, 'SELECT 1').catch(() => '')) === '1', 60_000);

    // Deleting them: the moved ones' placements name no host any more.
    for (const s of services)
      assert.equal((await b.call('DELETE', b.servicePath(s.id))).status, 202);
    for (const s of services) await b.waitGone(s.id, 180_000);
    await store.end();
    assert.equal((await b.stop()).code, 0);
  },
);
