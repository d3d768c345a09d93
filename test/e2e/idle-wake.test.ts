// Issue 25, item 2: idle services suspend and wake on connect, through
// Basin as shipped (`node dist/main.js`, root, service networks on) with a
// short --idle-suspend-after. A service with no client suspends: its
// postmaster is gone, its status stays READY, its answer says suspended;
// `psql … sslmode=verify-full` (with channel binding) then connects and
// reads back rows written before, the wake invisible but for the delay;
// its logs say when it slept and woke. While it sleeps, another tenant
// (its tsdbadmin's COPY … PROGRAM) can neither bind its endpoint (the
// waker's address on the host side is not in the tenant's network) nor
// receive its clients. A kill -9 of Basin while it sleeps: the next Basin
// arms its waker again. A stop, a start and a delete of a sleeping
// service work. An HA service never suspends.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import { conninfo, pgClient, portOpen, psql } from './clients.js';
import { runningNodes } from './ha-nodes.js';
import { gatewayOf } from './service-network.js';
import { bootstrapTenant, newTenant, TenantApi, tenantShell } from './tenants.js';

const IDLE = '4s';

/** Whether a socket of the host's network listens on `host`:`port` (the kernel's list: `ss`). */
function listening(host: string, port: number): boolean {
  return execFileSync('ss', ['-Hltn'], { encoding: 'utf8' })
    .split('\n')
    .some((line) => line.split(/\s+/).includes(`${host}:${port}`));
}

/** Whether service `id` has a full backup (its repository's backup.info lists one). */
function hasBackup(layout: Layout, id: string): boolean {
  // Its repository server's repository, or a local one (--repository-servers off).
  return [layout.repository(id).repo, layout.backupDirs(id).repo].some((repo) => {
    try {
      return /^\d{8}-\d{6}F=/m.test(readFileSync(`${repo}/backup/${id}/backup.info`, 'utf8'));
    } catch {
      return false;
    }
  });
}

/** Basin's own entries of the service's logs, oldest first. */
async function basinEntries(api: TenantApi, id: string): Promise<string[]> {
  const res = await api.call('GET', `${api.path(id)}/logs?source=basin`);
  assert.equal(res.status, 200, res.text);
  return (res.body.entries as { message: string }[]).map((e) => e.message).reverse();
}

test(
  'an idle service suspends, stays READY, and wakes for a verify-full client with its data; a tenant cannot take its endpoint',
  { timeout: 1_800_000 },
  async (t) => {
    const inst = await installation(t);
    // Local repositories: the first backup (which must be in before the
    // service idles) does not wait for a repository server's start, which
    // has its own tests (attack-repository, repository-move).
    const args = [
      '--idle-suspend-after',
      IDLE,
      '--reconcile-interval-ms',
      '500',
      '--repository-servers',
      'off',
    ];
    let b = await inst.start({ args });
    const layout = new Layout(inst.dataDir);
    let api = new TenantApi(b, bootstrapTenant(b));
    const attacker = new TenantApi(b, await newTenant(inst, 'attacker'));
    const [svc, ha, aSvc] = await Promise.all([
      api.create('sleepy'),
      api.create('ha'),
      attacker.create('attacker'),
    ]);
    const id = svc.service_id;
    for (const [who, s] of [
      [api, svc],
      [api, ha],
      [attacker, aSvc],
    ] as const) {
      await who.waitForStatus(s.service_id, 'READY');
    }
    // The attacker's own session keeps its service awake.
    const a = await tenantShell(aSvc, aSvc.initial_password);
    t.after(() => a.end());
    const withHa = await api.call('POST', `${api.path(ha.service_id)}/setHA`, {
      replica_count: 1,
    });
    assert.equal(withHa.status, 202, withHa.text);

    const strict = conninfo(svc.endpoint.port, {
      host: 'localhost',
      sslmode: 'verify-full',
      sslrootcert: layout.caCert,
      channel_binding: 'require',
    });
    await psql(
      strict,
      svc.initial_password,
      'CREATE TABLE kept AS SELECT generate_series(1, 1000) AS n',
    );
    // Its first backup (taken at its first READY) is in: a backup due
    // while it sleeps would wake it (docs/decisions.md, Idle services).
    await b.waitFor(async () => hasBackup(layout, id), 'its first backup', 600_000);

    const suspended = async (timeoutMs = 120_000) => {
      await b.waitFor(
        async () => runningNodes(layout, id).length === 0,
        'the idle service to be suspended (its postmaster gone)',
        timeoutMs,
      );
      return b.waitFor(async () => {
        const res = await api.call('GET', api.path(id));
        return res.body?.idle?.state === 'suspended' ? res.body : undefined;
      }, 'the service to say it is suspended');
    };

    await t.test(
      'with no client it suspends: no postmaster, still READY, metrics say suspended',
      async () => {
        const body = await suspended();
        assert.equal(body.status, 'READY');
        // Its port's listener is Basin's waker, on the host side of its namespace.
        assert.ok(listening(gatewayOf(inst.dataDir, id), svc.endpoint.port));
        assert.match(body.idle.since, /^\d{4}-\d\d-\d\dT/);
        // Its memory is freed (the next sample of its processes finds none).
        await b.waitFor(
          async () => (await api.call('GET', api.path(id))).body?.metrics?.memory_mb === 0,
          'its memory metric to be 0',
        );
        await b.waitFor(
          async () =>
            (await basinEntries(api, id)).some((m) =>
              /^basin: suspended after \d+ s without a client connection/.test(m),
            ),
          'its logs to say it was suspended',
        );
      },
    );

    await t.test(
      "a tenant cannot bind the suspended service's endpoint, nor receive its clients",
      async () => {
        await suspended();
        const port = svc.endpoint.port;
        const gateway = gatewayOf(inst.dataDir, id);
        // The waker's address is on the host, not in the tenant's network.
        const said = await a.run(
          `python3 -c "import socket; s=socket.socket(); s.bind(('${gateway}', ${port}))" 2>&1; echo "exit=$?"`,
        );
        assert.match(said.join('\n'), /Cannot assign requested address/);
        assert.notEqual(said.at(-1), 'exit=0');
        // The same port in its own network it may hold: it receives nothing.
        await a.feed(
          `setsid nohup python3 -c "
import os, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', ${port})); s.listen(16)
open('/tmp/bound', 'w').write('bound'); open('/tmp/listener.pid', 'w').write(str(os.getpid()))
while True:
    c, peer = s.accept(); open('/tmp/got', 'a').write('connection from %s\\\\n' % peer[0]); c.close()
" >/dev/null 2>&1 &`,
        );
        await b.waitFor(
          async () => (await a.run('cat /tmp/bound 2>/dev/null || true')).includes('bound'),
          "the tenant's listener",
        );
        // The client connects, verified, and reads what was written before the suspend.
        assert.equal(await psql(strict, svc.initial_password, 'SELECT count(*) FROM kept'), '1000');
        assert.deepEqual(await a.run('cat /tmp/got 2>/dev/null || true'), []);
        await a.feed('kill "$(cat /tmp/listener.pid)"');
      },
    );

    await t.test('the wake is in its logs and its answer; it runs again', async () => {
      const entries = await basinEntries(api, id);
      assert.ok(
        entries.some((m) => /^basin: woke after .* suspended \(a client connected\)/.test(m)),
        entries.join('\n'),
      );
      // A session kept open keeps it awake (woken again, if it slept meanwhile).
      const keeper = await pgClient(svc.endpoint.port, svc.initial_password, {
        ca: readFileSync(layout.caCert, 'utf8'),
        servername: 'localhost',
      });
      try {
        assert.equal(runningNodes(layout, id).length, 1);
        const res = await api.call('GET', api.path(id));
        assert.equal(res.body.status, 'READY');
        assert.equal(res.body.idle.state, 'awake');
        // Direct again: the waker stops listening on the host side once the
        // connections translated to it before the switch are in, and a new
        // connection reaches the server itself, nothing of Basin in its way.
        const gateway = gatewayOf(inst.dataDir, id);
        await b.waitFor(
          async () => !listening(gateway, svc.endpoint.port),
          'the waker to stop listening',
        );
        assert.equal(await psql(strict, svc.initial_password, 'SELECT 1'), '1');
      } finally {
        await keeper.end().catch(() => {});
      }
    });

    await t.test('Basin killed while it sleeps: the next Basin arms its waker again', async () => {
      await suspended();
      await b.kill();
      b = await inst.start({ args });
      api = new TenantApi(b, bootstrapTenant(b));
      assert.equal(runningNodes(layout, id).length, 0);
      await b.waitFor(
        async () => /armed the wakers of suspended services/.test(b.output()),
        'the waker armed again',
      );
      assert.equal(await psql(strict, svc.initial_password, 'SELECT sum(n) FROM kept'), '500500');
    });

    await t.test('a sleeping service is resized and forked as any other', async () => {
      await suspended();
      const resize = await api.call('POST', `${api.path(id)}/resize`, {
        cpu_millis: '500',
        memory_gbs: '2',
      });
      assert.equal(resize.status, 202, resize.text);
      const resized = await b.waitFor(async () => {
        const res = await api.call('GET', api.path(id));
        return res.body?.status === 'READY' && res.body.resources?.[0]?.spec?.cpu_millis === 500
          ? res.body
          : undefined;
      }, 'the resize to be done');
      assert.equal(resized.status, 'READY');
      // Forked while it sleeps: a copy of its stopped data.
      const forked = await api.call('POST', `${api.path(id)}/forkService`, {
        fork_strategy: 'NOW',
      });
      assert.equal(forked.status, 202, forked.text);
      const fork = await api.waitForStatus(forked.body.service_id, 'READY', 180_000);
      const forkConn = conninfo(fork.endpoint.port, {
        host: 'localhost',
        sslmode: 'verify-full',
        sslrootcert: layout.caCert,
      });
      assert.equal(
        await psql(forkConn, forked.body.initial_password, 'SELECT count(*) FROM kept'),
        '1000',
      );
      await api.deleteAndWait(forked.body.service_id);
      // Woken, it runs with its new size's settings (2 GB: 512MB of shared buffers).
      assert.equal(await psql(strict, svc.initial_password, 'SHOW shared_buffers'), '512MB');
    });

    await t.test('a sleeping service stops, starts and is deleted as any other', async () => {
      await suspended();
      const stop = await api.call('POST', `${api.path(id)}/stop`);
      assert.equal(stop.status, 202, stop.text);
      const paused = await api.waitForStatus(id, 'PAUSED');
      assert.equal(paused.idle, undefined);
      // Paused, its endpoint leads into its namespace again, where nothing listens.
      assert.equal(runningNodes(layout, id).length, 0);
      assert.equal(await portOpen(svc.endpoint.port), false);
      const start = await api.call('POST', `${api.path(id)}/start`);
      assert.equal(start.status, 202, start.text);
      await api.waitForStatus(id, 'READY');
      assert.equal(await psql(strict, svc.initial_password, 'SELECT count(*) FROM kept'), '1000');
      await suspended();
      await api.deleteAndWait(id);
    });

    await t.test('an HA service never suspends', async () => {
      // By now it has had many times the idle time without a client.
      await api.waitForStatus(ha.service_id, 'READY', 180_000);
      const res = await api.call('GET', api.path(ha.service_id));
      assert.equal(res.body.idle, undefined);
      assert.equal(runningNodes(layout, ha.service_id).length, 2);
    });
  },
);
