// Lost hosts' services restored on another host (docs/decisions.md, "A
// lost host's service restored elsewhere"), on the namespace topology: h1
// is the repository host, h2-h4 database hosts. Two services without HA
// replicas, on two hosts, have rows archived. One host is killed whole
// (every process, then its link); the other is only cut off (its link
// down, everything on it still running), and stops its service by itself
// before the control plane could restore it elsewhere (agent/self-fence.ts).
// Both services become UNSTABLE with a log entry naming their host; their
// owner's start restores each on the third host from its stanza, with
// every archived row and its own system identifier, and its endpoint
// names the new host. Both hosts, back, serve nothing of them: their
// agents remove their copies (data, OS user). Then, with
// --restore-lost-services on, the host they run on is killed, and both are
// restored on the hosts that came back, by themselves.

import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { BACKUP_POLL_MS, pitrWindowStart } from '../harness/basin-api.js';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const PREFIX = 'lh';
/** The topology's subnet, 10.231.17.0/24: its own, as the tests run in parallel. */
const NET = 17;

test(
  "lost hosts' services are restored on another host on their owner's start, with every archived row; a host cut off stops its own first; the hosts back serve nothing of them",
  { timeout: 900_000 },
  async (t) => {
    const args = ['--backup-schedule', '1d', '--pitr-window', '1d', '--host-lost-after', '6s'];
    const c = await cluster(t, { prefix: PREFIX, net: NET, hosts: 4, driver: 'hosts', args });
    const { cli, address } = c;
    let b = c.b;
    args.unshift('--host-listen', new URL(c.controlPlane).host);
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    for (const i of [2, 3, 4]) await c.joinAgent(i);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 4 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);
    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));

    const make = async (name: string) => {
      const created = await b.call('POST', b.servicePath(), { name });
      assert.equal(created.status, 202, created.text);
      return {
        id: created.body.service_id as string,
        password: created.body.initial_password as string,
      };
    };
    const [killedSvc, cutSvc] = await Promise.all([make('killed'), make('cut')]);
    const placed = await Promise.all(
      [killedSvc, cutSvc].map(async (s) => {
        const ready = await b.waitForStatus(s.id, 'READY', 300_000);
        const host = ready.endpoint.host as string;
        const sql = (at: string, q: string) =>
          psql(
            `host=${at} port=${ready.endpoint.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=5`,
            s.password,
            q,
          );
        return { ...s, host, index: [2, 3, 4].find((i) => address(i) === host) as number, sql };
      }),
    );
    const [killed, cut] = placed as [(typeof placed)[0], (typeof placed)[0]];
    // Everything written so far archived: the segment the last write is in
    // filled (a customer cannot switch WAL) and pushed to the repository
    // host. What is not archived when a host is lost is lost with it (the
    // recovery point: archive_timeout, docs/decisions.md).
    const archive = async (s: (typeof placed)[0], at: string) => {
      const segment = await s.sql(at, 'SELECT pg_walfile_name(pg_current_wal_lsn())');
      await s.sql(at, "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 20000)");
      const archived = "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver";
      await until(async () => (await s.sql(at, archived)) >= segment, 120_000);
    };
    assert.ok(killed.index && cut.index, 'each is on a database host');
    assert.notEqual(killed.index, cut.index, 'placement spreads them over two hosts');
    const third = [2, 3, 4].find((i) => i !== killed.index && i !== cut.index) as number;

    // Rows, archived. Each service's first backup is there too (taken at READY).
    const systemIds = await Promise.all(
      placed.map(async (s) => {
        await s.sql(s.host, 'CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 500) g');
        await s.sql(s.host, 'CREATE TABLE filler (x text)');
        await archive(s, s.host);
        await b.waitFor(
          () => pitrWindowStart(b, s.id),
          'its first backup',
          180_000,
          BACKUP_POLL_MS,
        );
        return s.sql(s.host, 'SELECT system_identifier FROM pg_control_system()');
      }),
    );

    // One host killed whole; the other cut off, still running.
    const cutUid = c.users(cut.index).find((u) => u.name === `basin-${cut.id}`)?.uid as number;
    assert.ok(cutUid !== undefined);
    assert.ok((await processesOfUser(cutUid)).length > 0);
    c.killHost(killed.index);
    c.cutHost(cut.index);
    // The cut host stops its service by itself, before the control plane
    // would declare it lost (half of --host-lost-after).
    await until(async () => (await processesOfUser(cutUid)).length === 0, 60_000);
    for (const s of placed) {
      await b.waitForStatus(s.id, 'UNSTABLE', 120_000);
      await b.waitFor(
        async () => {
          const r = await b.call('GET', `${b.servicePath(s.id)}/logs`);
          return r.text.includes(`host h${s.index} (${s.host}) has not reported`) || undefined;
        },
        'the log entry naming the lost host',
        60_000,
      );
    }

    // Their owner's start restores each elsewhere, from the repository host.
    for (const s of placed) {
      const started = await b.call('POST', `${b.servicePath(s.id)}/start`);
      assert.equal(started.status, 202, started.text);
    }
    for (const [k, s] of placed.entries()) {
      const again = await b.waitForStatus(s.id, 'READY', 300_000);
      const moved = again.endpoint.host as string;
      assert.equal(moved, address(third), 'the endpoint names the host it was restored on');
      assert.equal(await s.sql(moved, 'SELECT count(*) FROM t'), '500');
      const systemId = await s.sql(moved, 'SELECT system_identifier FROM pg_control_system()');
      assert.equal(systemId, systemIds[k]);
      await s.sql(moved, 'INSERT INTO t VALUES (501)');
      await archive(s, moved);
      const read = await b.call('GET', `${b.servicePath(s.id)}/logs`);
      if (read.status !== 200) {
        await sleep(1000); // Basin's log lines come a moment after its answer
        assert.fail(`${read.text}\n${b.output().slice(-6000)}`);
      }
      const dots = s.host.replaceAll('.', '\\.');
      assert.match(read.text, new RegExp(`host h${s.index} \\(${dots}\\) is lost: this service is restored on host h${third}`)); // prettier-ignore
      // Its server's own lines, read on its new host, beside Basin's.
      assert.match(read.text, /"source":"database"/);
    }

    // The hosts back: the killed one's agent started again, the cut one's
    // link up. Each removes its copy, and nothing answers for the service
    // at its address.
    c.linkUp(killed.index);
    const back = c.runAgent(killed.index);
    c.linkUp(cut.index);
    for (const s of placed) {
      const local = join(c.host(s.index).dataDir, 'local');
      await until(
        async () =>
          !existsSync(join(local, 'instances', s.id)) &&
          !c.users(s.index).some((u) => u.name === `basin-${s.id}`),
        120_000,
      );
    }
    // (Its log lines reach its output a moment after: pino writes them asynchronously.)
    await until(async () => /no longer places on this host/.test(back.output()), 30_000).catch(
      () => undefined,
    );
    assert.match(back.output(), /no longer places on this host/);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.every((h) => h.state === 'ONLINE');
    }, 60_000);
    for (const s of placed) {
      await assert.rejects(s.sql(s.host, 'SELECT 1'));
      assert.equal(await s.sql(address(third), 'SELECT count(*) FROM t'), '501');
    }

    // With --restore-lost-services on, a lost host's services are restored
    // elsewhere by themselves. The control plane restarted for it: its
    // hosts, silent meanwhile, stop their services (self-fence), and start
    // them again once it answers (its reconciler finds them down).
    await b.kill();
    b = await c.inst.start({ args: [...args, '--restore-lost-services', 'on'] });
    // READY is what was stored before the restart until the reconciler has
    // looked: whether the hosts fenced meanwhile depends on how long the
    // restart took (half of --host-lost-after), so the service is waited
    // for at its address, not read once (it refused connections there when
    // the restart took 5 s, at load 8-40).
    for (const s of placed) await b.waitForStatus(s.id, 'READY', 120_000);
    // (It may answer, then be fenced a moment later, then be started
    // again: what is waited for is its 501 rows there, not one answer.)
    for (const s of placed) {
      const rows = () => s.sql(address(third), 'SELECT count(*) FROM t').catch(() => undefined);
      await b.waitFor(async () => (await rows()) === '501', `${s.id} answering at its host again with its 501 rows`, 240_000); // prettier-ignore
    }
    c.killHost(third);
    const homes = new Set<string>();
    for (const s of placed) {
      await b.waitFor(
        async () => {
          const r = await b.call('GET', b.servicePath(s.id));
          return (
            (r.body.status === 'READY' && r.body.endpoint.host !== address(third)) || undefined
          );
        },
        'restored by itself on another host',
        300_000,
      );
      const home = (await b.call('GET', b.servicePath(s.id))).body.endpoint.host as string;
      homes.add(home);
      assert.equal(await s.sql(home, 'SELECT count(*) FROM t'), '501');
    }
    assert.ok([...homes].every((h) => h === address(killed.index) || h === address(cut.index)));

    for (const s of placed) assert.equal((await b.call('DELETE', b.servicePath(s.id))).status, 202); // prettier-ignore
    for (const s of placed) await b.waitGone(s.id, 180_000);
  },
);
