// Issue 18, "the host's processes": a tenant that starts 2,000 processes in
// its service, against Basin as shipped (`node dist/main.js`, the local
// driver, as root on this host's cgroups), with only a customer's means
// (tsdbadmin running programs as the service's OS user through COPY …
// PROGRAM). Its node runs in a pids cgroup bounded at what a full load of
// it needs (node-bounds.ts: its max_connections, workers, PostgreSQL's own
// processes and some headroom), so the forks stop there, whatever the
// tenant tries; every process of its OS user, its PgBouncer's included,
// is in a bounded cgroup, with an RLIMIT_NPROC well below the host's
// pid_max; meanwhile another tenant creates and queries a service as
// usual; and everything of the tenant goes when its service is deleted.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { test } from 'node:test';
import { DEFAULT_SIZES } from '../../src/domain/sizes.js';
import { unitCgroupName } from '../../src/drivers/local/host/cgroups/cgroup-hierarchy.js';
import { processCounts } from '../../src/drivers/local/config/conf.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { nodePidsMax, serviceNproc } from '../../src/drivers/local/host/cgroups/node-bounds.js';
import { installation } from './basin-process.js';
import {
  cgroupNameOf,
  control,
  counter,
  hierarchyOf,
  pidsIn,
  processesOfUid,
  tagOf,
  unitDir,
} from './cgroups.js';
import { pgClient } from './clients.js';
import { runningNodes } from './ha-nodes.js';
import { bootstrapTenant, newTenant, TenantApi, tenantShell } from './tenants.js';
import { expectedPoolerProcesses } from './pgbouncer-processes.js';

/** Forks up to 2,000 sleepers, counting those the kernel let it make; each child lets go of the COPY's pipe. */
const FORK_2000 = `perl -e 'my $n = 0; for (1 .. 2000) { my $p = fork; next unless defined $p; if ($p == 0) { open STDOUT, ">", "/dev/null"; open STDERR, ">", "/dev/null"; exec "sleep", "600" } $n++ } print "$n\\n"'`;

const comm = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

/** A process as a failed assertion should tell it: its command line, its parent's, its cgroups. */
const described = (pid: number) => {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  const cmd = (p: number | string) => read(`/proc/${p}/cmdline`).split('\0').join(' ').trim();
  const ppid = /^PPid:\s+(\d+)$/m.exec(read(`/proc/${pid}/status`))?.[1] ?? '?';
  const cgroups = read(`/proc/${pid}/cgroup`).trim().split('\n').join('; ');
  return `${comm(pid)} ${pid} (${cmd(pid)}; parent ${ppid}: ${cmd(ppid)}; cgroups ${cgroups})`;
};

test(
  'a tenant starting 2,000 processes is stopped at its node’s pids bound; another tenant is served meanwhile',
  { timeout: 400_000 },
  async (t) => {
    const pids = await hierarchyOf('pids');
    const memory = await hierarchyOf('memory');
    const inst = await installation(t, { env: { BASIN_RECONCILE_INTERVAL_MS: '1000' } });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const tag = tagOf(layout);
    const attacker = new TenantApi(b, bootstrapTenant(b));
    const svc = await attacker.create('forker');
    const id = svc.service_id;
    svc.endpoint.port = (await attacker.waitForStatus(id, 'READY')).endpoint.port;
    const on = await attacker.call('POST', `${attacker.path(id)}/enablePooler`);
    assert.equal(on.status, 200, on.text);
    await attacker.waitForStatus(id, 'READY');
    const uid = statSync(layout.pgdata({ id, node: 0 })).uid;
    const node = unitDir(pids, tag, { id, part: 0 });
    // A shared service: 50 connections, 8 workers.
    const bound = nodePidsMax(processCounts({ size: DEFAULT_SIZES[0]!, type: 'POSTGRES' }));
    assert.equal(Number(control(node, 'pids.max')), bound);
    const postmaster = runningNodes(layout, id)[0]!.pid;

    const shell = await tenantShell(svc, svc.initial_password);
    const [made] = await shell.run(FORK_2000);
    await shell.end();

    await t.test('the forks stop at the bound: what runs is counted', async () => {
      const forked = Number(made);
      const sleepers = processesOfUid(uid).filter((pid) => comm(pid) === 'sleep');
      assert.equal(sleepers.length, forked, 'every fork that succeeded runs');
      assert.ok(forked < 2000 && forked > 0, `${forked} of 2000 forks succeeded`);
      const inNode = pidsIn(node);
      assert.ok(inNode.length <= bound, `${inNode.length} processes in the node, bound ${bound}`);
      for (const pid of sleepers) assert.ok(inNode.includes(pid), `sleeper ${pid} is in the node`);
      assert.ok(counter(node, 'pids.events', 'max') > 0, 'the kernel refused forks at the bound');
    });

    await t.test(
      'every process of its OS user is in a bounded cgroup, with its RLIMIT_NPROC',
      async () => {
        const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
        const nproc = serviceNproc(pidMax);
        assert.ok(nproc <= pidMax / 4, `${nproc} is well below pid_max ${pidMax}`);
        const pooler = unitCgroupName(tag, { id, part: 'pooler' });
        // Its node's, its pooler's, and its helpers' (the first backup may still run).
        const ours = ([0, 'pooler', 'tasks'] as const).map((part) =>
          unitCgroupName(tag, { id, part }),
        );
        const all = processesOfUid(uid);
        let bouncers = 0;
        // What a process that exited meanwhile reads as: nothing (its /proc entry is gone).
        const ofLive = <T>(read: () => T): T | undefined => {
          try {
            return read();
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
            throw err;
          }
        };
        for (const pid of all) {
          const name = ofLive(() => cgroupNameOf(pids, pid));
          const inMemory = ofLive(() => cgroupNameOf(memory, pid));
          const limits = ofLive(() => readFileSync(`/proc/${pid}/limits`, 'utf8'));
          if (name === undefined || inMemory === undefined || limits === undefined) continue;
          assert.ok(ours.includes(name), `${described(pid)} runs in ${name}`);
          assert.equal(inMemory, name, `${comm(pid)} ${pid}: its memory cgroup`);
          if (name === pooler) bouncers++;
          assert.match(limits, new RegExp(`^Max processes\\s+${nproc}\\s+${nproc}\\s`, 'm'));
        }
        assert.equal(
          bouncers,
          await expectedPoolerProcesses(),
          'its PgBouncers, in a cgroup of their own',
        );
        assert.ok(Number(control(unitDir(pids, tag, { id, part: 'pooler' }), 'pids.max')) > 0);
        assert.equal(runningNodes(layout, id)[0]!.pid, postmaster, 'its server still runs');
      },
    );

    await t.test('another tenant creates and queries a service meanwhile', async () => {
      const neighbour = new TenantApi(b, await newTenant(inst, 'neighbour'));
      const other = await neighbour.create('calm');
      const ready = await neighbour.waitForStatus(other.service_id, 'READY');
      const c = await pgClient(ready.endpoint.port, other.initial_password);
      try {
        await c.query('CREATE TABLE t AS SELECT g FROM generate_series(1, 100) g');
        assert.equal((await c.query('SELECT count(*)::int AS n FROM t')).rows[0].n, 100);
      } finally {
        await c.end();
      }
      await neighbour.deleteAndWait(other.service_id);
    });

    await t.test('everything of the tenant goes when its service is deleted', async () => {
      await attacker.deleteAndWait(id);
      assert.deepEqual(processesOfUid(uid), []);
      for (const part of [0, 'pooler', 'tasks'] as const) {
        for (const h of [pids, memory]) {
          assert.ok(!existsSync(unitDir(h, tag, { id, part })), `its ${part} cgroup is gone`);
        }
      }
    });
  },
);
