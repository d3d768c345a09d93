// Issue 20, items 2 and 3: three Basin processes (dist/main.js, local
// driver) on one PostgreSQL store this test starts, one data directory,
// three API ports. Exactly one leads (runs the driver, the engine and the
// reconciler); any of them accepts requests.
//
// - Creates, stops, starts, resizes, a fork and deletes go to random
//   processes while the leader is killed with SIGKILL ten times (each
//   killed process started again) and once paused (SIGSTOP) for longer than
//   its lease, then resumed: every accepted operation completes, none twice
//   (no duplicate postmaster, no orphan OS user, one operation row per
//   delete), another process leads within 5 s of each kill, and the paused
//   leader never runs again: its successor kills it before acting.
// - The logs of a service are read through every process (the followers'
//   drivers are not started). A credential revoked is refused by every
//   process within 1 s; a status the leader writes is answered by every
//   process within 1 s.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { answering, type BasinProcess } from '../harness/basin-api.js';
import { freePort } from '../harness/postmaster.js';
import { API_KEY } from '../helpers.js';
import { startStorePostgres, type StorePostgres } from '../store-postgres.js';
import { installation, type Installation } from './basin-process.js';

const KILLS = 10;
/** The bound on a takeover after kill -9. */
const TAKEOVER_MS = 5_000;
const SETTLE_MS = 240_000;

interface Lease {
  term: number;
  pid: number;
  live: boolean;
}

async function lease(pgc: StorePostgres): Promise<Lease | undefined> {
  const res = await pgc.sql(
    `SELECT term::int AS term, holder,
       expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS live
     FROM leadership`,
    [],
    'basin',
  );
  const row = res.rows[0] as { term: number; holder: string | null; live: boolean } | undefined;
  // A released lease names nobody (pid 0).
  return row && { term: row.term, pid: Number(row.holder?.split('/')[1] ?? 0), live: row.live };
}

/**
 * Processes whose arguments name a node's data directory under `root`, by
 * directory. Only a postmaster is started with -D; a child it forks shows
 * the same arguments until it sets its process title, so a process whose
 * parent is a postmaster of the same directory is not counted.
 */
function postmastersNow(root: string): Map<string, number[]> {
  const byDir = new Map<string, { pid: number; ppid: number }[]>();
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (/^[ZX]/.test(fields[0] ?? '')) continue;
      if (!readlinkSync(`/proc/${name}/exe`).includes('/postgresql/')) continue;
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const d = argv.indexOf('-D');
      const dir = d >= 0 ? argv[d + 1] : undefined;
      if (!dir?.startsWith(root) || !dir.includes('/instances/')) continue;
      byDir.set(dir, [...(byDir.get(dir) ?? []), { pid: Number(name), ppid: Number(fields[1]) }]);
    } catch {
      // exited meanwhile
    }
  }
  const out = new Map<string, number[]>();
  for (const [dir, procs] of byDir) {
    const pids = new Set(procs.map((p) => p.pid));
    out.set(
      dir,
      procs.filter((p) => !pids.has(p.ppid)).map((p) => p.pid),
    );
  }
  return out;
}

/**
 * The postmasters that run, seen twice a second apart: a second postmaster
 * that PostgreSQL's lock file refuses at once (its data directory is in
 * use) is not one that runs.
 */
async function postmasters(root: string): Promise<Map<string, number[]>> {
  const first = postmastersNow(root);
  await sleep(1000);
  const out = new Map<string, number[]>();
  for (const [dir, pids] of postmastersNow(root)) {
    const both = pids.filter((pid) => first.get(dir)?.includes(pid));
    if (both.length > 0) out.set(dir, both);
  }
  return out;
}

function serviceUsers(inst: Installation): string[] {
  return readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .filter(([name, , uid]) => {
      const n = Number(uid);
      return name?.startsWith('basin-') && n >= inst.serviceUids.min && n <= inst.serviceUids.max;
    })
    .map(([name]) => name!.replace(/^basin-(r-)?/, ''));
}

test(
  'three Basins on one PostgreSQL store: one leads, kill -9 ten times and a pause, every operation completes once',
  { timeout: 1_200_000 },
  async (t) => {
    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    // Local repositories: the test is about who acts, not where backups go.
    const inst = await installation(t, {
      args: ['--store-url', url, '--repository-servers', 'off'],
    });
    const ports = [inst.apiPort, await freePort(), await freePort()];
    const procs: BasinProcess[] = [];
    /** The indices whose process runs. */
    const up = new Set<number>();
    /** Indices the test itself restarts (the paused leader). */
    const held = new Set<number>();
    /** Processes the test killed itself. */
    const killedByTest = new Set<number>();
    /** Leaders that stepped down on their own (a stall past their guard on this busy host). */
    const steppedDown: number[] = [];
    let supervising = true;
    const start = async (i: number): Promise<BasinProcess> => {
      const port = ports[i] as number;
      const proc = await answering(
        inst.launch({ args: ['--port', String(port)] }),
        `http://127.0.0.1:${port}/v1`,
        API_KEY,
      );
      procs[i] = proc;
      up.add(i);
      void proc.exited.then(({ code, signal }) => {
        if (procs[i] !== proc) return;
        up.delete(i);
        // As its supervisor (systemd Restart=always) would: a leader that
        // lost leadership exits with 3 (or its successor killed it, when
        // it stalled past its lease), and comes back as a follower.
        const fenced = signal === 'SIGKILL' && !killedByTest.has(proc.pid);
        if ((code === 3 || fenced) && supervising && !held.has(i)) {
          steppedDown.push(proc.pid);
          void start(i);
        }
      });
      return proc;
    };
    // The first alone (it bootstraps the empty store), then the others.
    await start(0);
    await Promise.all([start(1), start(2)]);
    const any = (): BasinProcess => {
      const live = [...up];
      return procs[live[Math.floor(Math.random() * live.length)] as number] as BasinProcess;
    };
    /** A GET through a random process; another one if that one just went (a supervisor restarts it). */
    const get = async (path: string) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await any().call('GET', path);
        } catch (err) {
          if (attempt >= 20) throw err;
          await sleep(250);
        }
      }
    };
    const allUp = async () => {
      for (let i = 0; up.size < 3; i++) {
        assert.ok(i < 600, 'three processes run again');
        await sleep(100);
      }
    };
    const indexOf = (pid: number) => procs.findIndex((p) => p.pid === pid);

    const leader = async (): Promise<{ term: number; index: number }> => {
      for (let i = 0; i < 200; i++) {
        const l = await lease(pgc);
        if (l?.live && indexOf(l.pid) >= 0) return { term: l.term, index: indexOf(l.pid) };
        await sleep(50);
      }
      throw new Error(`no leader among ${procs.map((p) => p.pid).join(', ')}`);
    };

    const first = await leader();
    assert.equal(first.term, 1);
    const leaders = procs.filter((p) => /leading as term/.test(p.output()));
    assert.equal(leaders.length, 1, 'exactly one process leads');

    // What every accepted request should come to, checked through any process.
    const expected = new Map<string, { status: string | 'gone'; cpu?: number }>();
    const accepted: string[] = [];
    const send = async (what: string, method: string, path: string, body?: unknown) => {
      const b = any();
      const res = await b.call(method, path, body);
      assert.equal(res.status, 202, `${what} through ${b.pid}: ${res.text}`);
      accepted.push(`${what} → ${b.pid}`);
      return res.body;
    };
    const p = (id?: string) => procs[0]!.servicePath(id);
    const create = async (name: string) => {
      const body = await send(`create ${name}`, 'POST', p(), { name });
      expected.set(body.service_id, { status: 'READY' });
      return body.service_id as string;
    };
    const stop = async (id: string) => {
      await send(`stop ${id}`, 'POST', `${p(id)}/stop`);
      expected.set(id, { status: 'PAUSED' });
    };
    const startSvc = async (id: string) => {
      await send(`start ${id}`, 'POST', `${p(id)}/start`);
      expected.set(id, { status: 'READY' });
    };
    const resize = async (id: string, cpu: number) => {
      await send(`resize ${id}`, 'POST', `${p(id)}/resize`, {
        cpu_millis: String(cpu),
        memory_gbs: String(cpu / 250),
      });
      expected.set(id, { status: 'READY', cpu });
    };
    const fork = async (id: string) => {
      const body = await send(`fork ${id}`, 'POST', `${p(id)}/forkService`, {
        fork_strategy: 'NOW',
      });
      expected.set(body.service_id, { status: 'READY' });
      return body.service_id as string;
    };
    const remove = async (id: string) => {
      const b = any();
      const res = await b.call('DELETE', p(id));
      assert.equal(res.status, 202, `delete ${id} through ${b.pid}: ${res.text}`);
      accepted.push(`delete ${id} → ${b.pid}`);
      expected.set(id, { status: 'gone' });
    };

    /** Every accepted request settled, as read through random processes. */
    const settled = async () => {
      const deadline = Date.now() + SETTLE_MS;
      for (const [id, want] of expected) {
        for (;;) {
          const res = await get(p(id));
          if (want.status === 'gone' ? res.status === 404 : res.body?.status === want.status) {
            if (want.cpu === undefined || res.body.resources[0].spec.cpu_millis === want.cpu) break;
          }
          assert.notEqual(res.body?.status, 'FAILED', `${id}: ${res.text}`);
          if (Date.now() >= deadline) {
            // What Basin said of it: the reason a failure is retried is there.
            const logs = await get(`${p(id)}/logs?source=basin`);
            const said = ((logs.body?.entries ?? []) as { message: string }[])
              .slice(0, 10)
              .map((e) => e.message);
            assert.fail(
              `${id} never came to ${want.status}: ${res.status} ${res.text}\naccepted: ${accepted.join('; ')}\nits logs, newest first:\n${said.join('\n')}`,
            );
          }
          await sleep(200);
        }
      }
      // One postmaster per node's data directory, none of a deleted service.
      const live = [...expected].filter(([, w]) => w.status === 'READY').map(([id]) => id);
      for (const [dir, pids] of await postmasters(inst.dataDir)) {
        assert.equal(pids.length, 1, `one postmaster for ${dir}: ${pids.join(', ')}`);
        assert.ok(
          live.some((id) => dir.includes(`/instances/${id}/`)),
          `${dir} runs, but its service should not`,
        );
      }
      // The OS users are those of services that exist.
      const exist = [...expected].filter(([, w]) => w.status !== 'gone').map(([id]) => id);
      assert.deepEqual(
        serviceUsers(inst)
          .filter((u) => !exist.includes(u))
          .sort(),
        [],
        'no orphan OS user',
      );
    };

    /** Kills the leader (SIGKILL), measures the takeover, starts it again. */
    const killLeader = async (round: number) => {
      await allUp();
      const before = await leader();
      const victim = procs[before.index] as BasinProcess;
      const killedAt = Date.now();
      killedByTest.add(victim.pid);
      await victim.kill();
      let after: { term: number; index: number };
      for (;;) {
        const l = await lease(pgc);
        if (l && l.term > before.term && l.live && l.pid !== victim.pid) {
          after = { term: l.term, index: indexOf(l.pid) };
          break;
        }
        await sleep(50);
        if (Date.now() - killedAt > 30_000) throw new Error('no takeover in 30 s');
      }
      const took = Date.now() - killedAt;
      assert.ok(
        took <= TAKEOVER_MS,
        `round ${round}: another process led ${took} ms after kill -9 (bound: ${TAKEOVER_MS})`,
      );
      assert.notEqual(after.index, before.index);
      await start(before.index);
      return took;
    };

    const s1 = await create('s1');
    const s2 = await create('s2');
    await settled();

    await allUp();
    // The driver's reads work on every process, the followers' drivers not
    // started: the database's own log entries, through each.
    for (const b of procs) {
      const logs = await b.call('GET', `${p(s2)}/logs?search=ready%20to%20accept`);
      assert.equal(logs.status, 200, `process ${b.pid}: ${logs.text}`);
      assert.ok(logs.body.entries.length > 0, `process ${b.pid} reads the logs: ${logs.text}`);
    }

    // A status the leader writes is answered by every process within 1 s.
    await stop(s1);
    const seenAt = await (async () => {
      for (;;) {
        const res = await procs[0]!.call('GET', p(s1));
        if (res.body?.status === 'PAUSED') return Date.now();
        await sleep(20);
      }
    })();
    await sleep(Math.max(0, seenAt + 1000 - Date.now()));
    await allUp();
    for (const b of procs) {
      assert.equal((await b.call('GET', p(s1))).body.status, 'PAUSED', `process ${b.pid}`);
    }

    // The rounds: a few operations each, to random processes, the leader killed mid-way.
    let s3 = '';
    let s4 = '';
    let s5 = '';
    let forked = '';
    const rounds: (() => Promise<void>)[] = [
      async () => {
        await startSvc(s1);
        await resize(s2, 1000);
      },
      async () => {
        s3 = await create('s3');
        await stop(s2);
      },
      async () => {
        forked = await fork(s1);
        await startSvc(s2);
      },
      async () => {
        await stop(s3);
        await resize(s1, 1000);
      },
      async () => {
        await remove(forked);
        await startSvc(s3);
      },
      async () => {
        s4 = await create('s4');
        await resize(s3, 1000);
      },
      async () => {
        await remove(s1);
        await stop(s4);
      },
      async () => {
        await startSvc(s4);
        await resize(s2, 500);
      },
      async () => {
        s5 = await create('s5');
        await remove(s3);
      },
      async () => {
        await stop(s5);
        await resize(s4, 1000);
      },
    ];
    const took: number[] = [];
    for (const [i, round] of rounds.entries()) {
      await round();
      await sleep(300 + Math.floor(Math.random() * 1500));
      took.push(await killLeader(i));
      await settled();
    }
    assert.equal(took.length, KILLS);

    // The pause: the leader stopped for longer than its lease while work runs.
    await startSvc(s5);
    await remove(s2);
    await sleep(500);
    await allUp();
    const paused = await leader();
    held.add(paused.index);
    const sleeper = procs[paused.index] as BasinProcess;
    sleeper.signal('SIGSTOP');
    let next: Lease | undefined;
    for (;;) {
      next = await lease(pgc);
      if (next && next.term > paused.term && next.live) break;
      await sleep(100);
    }
    assert.notEqual(next.pid, sleeper.pid);
    const successor = async () => {
      const l = await lease(pgc);
      const b = l && procs[indexOf(l.pid)];
      return b && /driver, engine and reconciler started/.test(b.output());
    };
    for (let i = 0; !(await successor()); i++) {
      assert.ok(i < 1200, 'the new leader starts');
      await sleep(100);
    }
    // The successor killed it before acting (lib/leader-process.ts): the
    // step it had under way cannot carry on beside the successor's.
    const exit = await sleeper.exited;
    assert.deepEqual(exit, { code: null, signal: 'SIGKILL' }, 'killed while paused');
    const successorLog = (procs[indexOf(next.pid)] as BasinProcess).output();
    assert.match(successorLog, /fenced the former leader [^ ]+: killed/);
    const now = await lease(pgc);
    assert.ok(now && now.term >= next.term && now.pid !== sleeper.pid, 'it did not lead again');
    await start(paused.index);
    held.delete(paused.index);
    await settled();

    // Everything deleted at the end: nothing runs, no OS user is left.
    for (const [id, want] of expected) if (want.status !== 'gone') await remove(id);
    await settled();
    assert.deepEqual([...(await postmasters(inst.dataDir)).keys()], []);
    assert.deepEqual(serviceUsers(inst), []);
    // None ran twice: one delete operation per service, all done.
    const ops = await pgc.sql(
      `SELECT resource_id, count(*)::int AS n, string_agg(state, ',') AS states
       FROM operations WHERE kind = 'service.delete' GROUP BY resource_id`,
      [],
      'basin',
    );
    assert.equal(ops.rows.length, expected.size);
    for (const row of ops.rows as { resource_id: string; n: number; states: string }[]) {
      assert.deepEqual([row.n, row.states], [1, 'done'], row.resource_id);
    }
    const pending = await pgc.sql(
      `SELECT count(*)::int AS n FROM operations WHERE state IN ('pending', 'failed')`,
      [],
      'basin',
    );
    assert.deepEqual(pending.rows, [{ n: 0 }]);
    t.diagnostic(`takeovers after kill -9 (ms): ${took.join(', ')}`);
    t.diagnostic(`leaders that stepped down by themselves: ${steppedDown.length}`);
    await allUp();
    supervising = false;
    for (const b of procs) assert.equal((await b.stop()).code, 0);
    // A clean stop releases the lease: nobody holds it now.
    const released = await lease(pgc);
    assert.deepEqual([released?.pid, released?.live], [0, false]);
  },
);

test('three Basins: a credential revoked is refused by every process within 1 s', async (t) => {
  const pgc = await startStorePostgres(t);
  const url = await pgc.createDatabase('basin');
  const inst: Installation = await installation(t, { driver: 'sim', args: ['--store-url', url] });
  const ports = [inst.apiPort, await freePort(), await freePort()];
  const procs: BasinProcess[] = [];
  for (const [i, port] of ports.entries()) {
    procs[i] = await answering(
      inst.launch({ args: ['--port', String(port)] }),
      `http://127.0.0.1:${port}/v1`,
      API_KEY,
    );
  }
  const projectId = procs[0]!.projectId;
  const made = await inst.cli(
    '--json',
    '--store-url',
    url,
    'credential',
    'create',
    '--project',
    projectId,
  );
  assert.equal(made.code, 0, made.stderr);
  const { id, bearer_key: key } = JSON.parse(made.stdout) as { id: string; bearer_key: string };
  const asIt = (b: BasinProcess) =>
    b.request('GET', `/projects/${projectId}/services`, { authorization: `Bearer ${key}` });
  // Made by the CLI a moment ago: every process takes it at once, notified or not.
  for (const b of procs) assert.equal((await asIt(b)).status, 200, `process ${b.pid}`);

  const revoked = await inst.cli('--store-url', url, 'credential', 'revoke', id);
  assert.equal(revoked.code, 0, revoked.stderr);
  await sleep(1000);
  for (const b of procs) {
    const res = await asIt(b);
    assert.equal(res.status, 401, `process ${b.pid}: ${res.text}`);
  }
});
