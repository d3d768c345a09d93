// Issue 18, "the host's memory": a tenant that allocates 3 GiB in its
// service, against Basin as shipped (`node dist/main.js`, the local driver,
// as root on this host's cgroups), with only a customer's means (its
// credential, and tsdbadmin running programs as the service's OS user
// through COPY … PROGRAM). Its node (a size of 1 GiB) runs in a memory
// cgroup bounded at 1 GiB, swap included; what the tenant writes into its
// private /tmp is charged to it (the kernel's counters); a program that
// allocates 3 GiB is killed by the kernel at the bound, not the host's
// memory taken; a backend that does the same is killed, and PostgreSQL
// recovers with the same postmaster; a private /tmp filled to the bound
// (pages no process holds) takes the whole node down (oom-watch.ts), and
// it is restarted like any crashed node; Basin's process is alive and
// untouched throughout; the service is READY again with its rows, and its
// logs say what happened (a `basin: …` entry naming the node and its
// bound, each time). The OOM scores are as designed (oom-scores.ts): Basin and the
// postmaster protected where the kernel lets Basin lower a score (it needs
// CAP_SYS_RESOURCE, which this machine's root lacks), the tenant's side
// raised where it does not, and a tenant cannot lower its programs'.

import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { installation } from './basin-process.js';
import {
  control,
  counter,
  hierarchyOf,
  maySetLowerScores,
  oomScoreAdj,
  tagOf,
  unitDir,
  cgroupNameOf,
} from './cgroups.js';
import { pgClient } from './clients.js';
import { basinLogs, isLive, runningNodes } from './ha-nodes.js';
import { bootstrapTenant, TenantApi, tenantShell } from './tenants.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const OOM_ENTRY =
  /^basin: node0 ran out of memory \(its bound: 1 GiB, its size's memory\): the kernel killed \d+ of its processes/;

test(
  'a tenant allocating 3 GiB is killed at its node’s 1 GiB bound; Basin is untouched, the service READY again',
  { timeout: 400_000 },
  async (t) => {
    const h = await hierarchyOf('memory');
    const inst = await installation(t, {
      env: { BASIN_RECONCILE_INTERVAL_MS: '1000' },
      args: ['--sizes', 'shared,500m/1GB'],
    });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const tenant = new TenantApi(b, bootstrapTenant(b));
    const svc = await tenant.create('hungry', { cpu_millis: '500', memory_gbs: '1' });
    const id = svc.service_id;
    svc.endpoint.port = (await tenant.waitForStatus(id, 'READY')).endpoint.port;
    const dir = unitDir(h, tagOf(layout), { id, part: 0 });
    const postmaster = runningNodes(layout, id)[0]!.pid;
    const basinScore = oomScoreAdj(b.pid);

    // The bound: the size's memory, swap included where the kernel accounts it.
    assert.equal(cgroupNameOf(h, postmaster), basename(dir));
    assert.equal(Number(control(dir, 'memory.limit_in_bytes')), GiB);
    if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) {
      assert.equal(Number(control(dir, 'memory.memsw.limit_in_bytes')), GiB);
    }

    const shell = await tenantShell(svc, svc.initial_password);
    const backend = Number(
      (await shell.client.query('SELECT pg_backend_pid() AS p')).rows[0].p as string,
    );
    await shell.client.query('CREATE TABLE kept AS SELECT g AS n FROM generate_series(1, 1000) g');

    await t.test(
      'OOM scores: Basin and the postmaster protected, the tenant’s side not',
      async () => {
        const protectedScore = maySetLowerScores() ? -900 : undefined;
        if (protectedScore === undefined) {
          assert.match(b.output(), /does not let Basin lower oom_score_adj/);
        }
        // Basin: -900, or where it cannot be lowered, what it was started with (ours).
        assert.equal(basinScore, protectedScore ?? oomScoreAdj(process.pid));
        assert.equal(oomScoreAdj(postmaster), protectedScore ?? basinScore);
        const tenantScore = protectedScore === undefined ? 900 : 0;
        assert.equal(oomScoreAdj(backend), tenantScore);
        assert.deepEqual(await shell.run('cat /proc/self/oom_score_adj'), [String(tenantScore)]);
        // It may raise its programs' score, never lower it below its postmaster's.
        await shell.refused(
          `/bin/echo ${(protectedScore ?? basinScore) - 1} > /proc/self/oom_score_adj`,
        );
        assert.deepEqual(
          await shell.run('echo 1000 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj'),
          ['1000'],
        );
      },
    );

    await t.test(
      'what the tenant writes into its private /tmp is charged to its node',
      async () => {
        const before = counter(dir, 'memory.stat', 'shmem');
        await shell.run('dd if=/dev/zero of=/tmp/fill bs=1M count=256 2>/dev/null; echo written');
        const written = counter(dir, 'memory.stat', 'shmem');
        assert.ok(written - before >= 256 * MiB, `shmem ${before} → ${written}`);
        await shell.run('rm /tmp/fill; echo removed');
        // Freed with the file (the server's own shared memory may grow meanwhile).
        assert.ok(counter(dir, 'memory.stat', 'shmem') <= written - 200 * MiB, 'freed');
      },
    );

    await t.test('a program allocating 3 GiB is killed at the bound', async () => {
      const killsBefore = counter(dir, 'memory.oom_control', 'oom_kill');
      writeFileSync(join(dir, 'memory.max_usage_in_bytes'), '0'); // the peak, from now on
      await assert.rejects(
        shell.run(`perl -e '$x = "a" x (3 * 1024 ** 3); print length($x), "\\n"'`),
        // Killed (SIGKILL), as the shell that popen ran it in says: 128 + 9.
        (err: Error & { detail?: string }) => /signal 9|exit code 137/.test(`${err.detail}`),
      );
      assert.ok(
        counter(dir, 'memory.oom_control', 'oom_kill') > killsBefore,
        'the kernel killed it',
      );
      // Up to its bound, never past it.
      const peak = Number(control(dir, 'memory.max_usage_in_bytes'));
      assert.ok(peak > 0.9 * GiB && peak <= GiB, `peak ${peak}`);
      // The session that ran it goes on: only the program died.
      assert.deepEqual(await shell.run('echo alive'), ['alive']);
      await b.waitFor(
        async () => (await basinLogs(b, id)).some((l) => OOM_ENTRY.test(l)),
        'a basin: entry in the service’s logs naming the node and its bound',
        30_000,
      );
    });
    await shell.end();

    await t.test(
      'a backend allocating 3 GiB is killed; PostgreSQL recovers, same postmaster',
      async () => {
        const killsBefore = counter(dir, 'memory.oom_control', 'oom_kill');
        const c = await pgClient(svc.endpoint.port, svc.initial_password);
        c.on('error', () => {}); // the connection dies with its backend
        await assert.rejects(
          c.query(
            "SELECT array_length(array_agg(repeat('x', 1048576)), 1) FROM generate_series(1, 3072)",
          ),
        );
        await c.end().catch(() => {});
        assert.ok(counter(dir, 'memory.oom_control', 'oom_kill') > killsBefore);
        await b.waitFor(
          async () => (await basinLogs(b, id)).filter((l) => OOM_ENTRY.test(l)).length >= 2,
          'a second basin: entry',
          30_000,
        );
        await tenant.waitForStatus(id, 'READY');
        assert.equal(runningNodes(layout, id)[0]!.pid, postmaster, 'the same postmaster');
      },
    );

    await t.test('Basin is alive and untouched; the service is READY with its rows', async () => {
      assert.ok(isLive(b.pid));
      assert.equal(oomScoreAdj(b.pid), basinScore);
      assert.equal(cgroupNameOf(h, b.pid) === cgroupNameOf(h, postmaster), false);
      // PostgreSQL recovers from the backend's death on its own, within seconds.
      const kept = await b.waitFor(
        async () => {
          const c = await pgClient(svc.endpoint.port, svc.initial_password).catch(() => undefined);
          if (!c) return undefined;
          try {
            return (await c.query('SELECT count(*)::int AS n FROM kept')).rows[0].n as number;
          } finally {
            await c.end();
          }
        },
        'the service to accept connections again',
        60_000,
      );
      assert.equal(kept, 1000);
      await tenant.waitForStatus(id, 'READY');
    });

    await t.test(
      'a private /tmp filled to the bound: the whole node dies, and is restarted with its rows',
      async () => {
        // tmpfs pages belong to no process: killing backends frees none of
        // them, so the whole node goes (Basin kills it, seeing its private
        // directories hold half its bound; or the kernel's killer got to
        // the postmaster first: -900, not -1000, or 0 beside its children's
        // 900), and its namespace and /tmp with it.
        const killsBefore = counter(dir, 'memory.oom_control', 'oom_kill');
        const entries = (await basinLogs(b, id)).filter((l) => OOM_ENTRY.test(l)).length;
        const shell = await tenantShell(svc, svc.initial_password);
        shell.client.on('error', () => {});
        await shell
          .feed(
            'dd if=/dev/zero of=/tmp/a bs=1M count=1000; dd if=/dev/zero of=/dev/shm/b bs=1M count=1000',
          )
          .catch(() => {}); // its session dies with the node
        await shell.end();
        await b.waitFor(
          async () => runningNodes(layout, id)[0]?.pid !== postmaster,
          'the node to die',
          60_000,
        );
        assert.ok(counter(dir, 'memory.oom_control', 'oom_kill') > killsBefore);
        // Said once more (whether the restart came first or not).
        await b.waitFor(
          async () => (await basinLogs(b, id)).filter((l) => OOM_ENTRY.test(l)).length > entries,
          'another basin: entry naming the node and its bound',
          30_000,
        );
        const kept = await b.waitFor(
          async () => {
            const c = await pgClient(svc.endpoint.port, svc.initial_password).catch(
              () => undefined,
            );
            if (!c) return undefined;
            try {
              return (await c.query('SELECT count(*)::int AS n FROM kept')).rows[0].n as number;
            } finally {
              await c.end();
            }
          },
          'the restarted node to accept connections',
          120_000,
        );
        assert.equal(kept, 1000);
        await tenant.waitForStatus(id, 'READY');
        assert.ok(counter(dir, 'memory.stat', 'shmem') < 100 * MiB, 'its /tmp went with it');
        assert.ok(isLive(b.pid));
        assert.equal(oomScoreAdj(b.pid), basinScore);
      },
    );

    await tenant.deleteAndWait(id);
    assert.ok(!existsSync(dir), 'its memory cgroup goes with it');
  },
);
