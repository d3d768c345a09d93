// etcd on the hosts: a member host removed (and gone) is replaced. Four
// hosts on the namespace topology (topology.sh), three members; the control
// plane removes the member of a host that is LOST and adds one on the
// fourth host, which joins the running cluster (`existing`) and gets its
// data; the cluster has three healthy members again.

import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { etcdMembersCa, etcdRootIdentity } from '../../src/hosts/etcd-ca.js';
import { openPostgresStore } from '../../src/store/postgres/pg-store.js';
import { installation, type Installation } from '../e2e/basin-process.js';
import { freePort } from '../harness/postmaster.js';
import { ROOT } from '../harness/installation.js';
import { startStorePostgres } from '../store-postgres.js';

const execFileP = promisify(execFile);
const TOPOLOGY = join(ROOT, 'test/cluster/topology.sh');
const CLI = join(ROOT, 'dist/cli/basin.js');
const PREFIX = 'betr';
/** The topology's subnet, 10.231.6.0/24: its own, as the tests run in parallel. */
const NET = 6;
const address = (i: number) => `10.231.${NET}.${10 + i}`;
const CONTROL_PLANE_ADDRESS = `10.231.${NET}.1`;
const ZONES = ['a', 'a', 'b', 'b'];

interface EtcdView {
  quorum: boolean;
  members: { host: string | null; started: boolean; healthy: boolean }[];
}

test(
  'the etcd member of a host that is lost is replaced on another host',
  { timeout: 600_000 },
  async (t) => {
    execFileSync('bash', [TOPOLOGY, 'up', PREFIX, '4', String(NET)]);
    t.after(() => execFileSync('bash', [TOPOLOGY, 'down', PREFIX]));
    const scratch = mkdtempSync(join(tmpdir(), 'basin-etcd-'));
    t.after(() => rmSync(scratch, { recursive: true, force: true }));

    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    const inst = await installation(t, { driver: 'sim', args: ['--store-url', url] });
    const hostPort = await freePort();
    const b = await inst.start({
      args: ['--host-listen', `${CONTROL_PLANE_ADDRESS}:${hostPort}`, '--host-lost-after', '3s'],
    });
    const cli = async (...args: string[]) => {
      const r = await inst.cli('--store-url', url, ...args);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    const etcd = async () => JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
    const store = await openPostgresStore(url);
    t.after(() => store.close());

    const agents: ChildProcess[] = [];
    t.after(() => agents.forEach((a) => a.kill('SIGKILL')));
    const hostDirs: Installation[] = [];
    for (let i = 0; i < 4; i++) hostDirs.push(await installation(t));
    for (const i of [1, 2, 3, 4]) {
      const h = hostDirs[i - 1] as Installation;
      const tk = JSON.parse(await cli('host', 'token', '--json')) as {
        token: string;
        ca_sha256: string;
      };
      agents.push(
        spawn(
          'ip',
          ['netns', 'exec', `${PREFIX}-h${i}`, process.execPath, CLI, '--data-dir', h.dataDir,
        'host', 'run', '--address', address(i), '--name', `h${i}`, '--zone', ZONES[i - 1] as string,
        '--heartbeat-ms', '300', '--control-plane', `https://${CONTROL_PLANE_ADDRESS}:${hostPort}`,
        '--token', tk.token, '--ca-sha256', tk.ca_sha256,
        '--', '--service-uid-range', `${h.serviceUids.min}-${h.serviceUids.max}`,
        '--service-network', h.serviceNetwork], // prettier-ignore
          { stdio: 'ignore' },
        ),
      );
    }

    await until(async () => {
      const e = await etcd();
      return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
    }, 240_000);
    const first = (await etcd()).members.map((m) => m.host as string).sort();
    // Three of the four, both zones among them.
    assert.equal(new Set(first.map((n) => ZONES[Number(n.slice(1)) - 1])).size, 2, first.join());
    const spare = ['h1', 'h2', 'h3', 'h4'].find((n) => !first.includes(n)) as string;

    const dir = join(scratch, 'root');
    execFileSync('mkdir', ['-p', dir]);
    const root = await etcdRootIdentity(store);
    writeFileSync(join(dir, 'c.crt'), root.cert);
    writeFileSync(join(dir, 'c.key'), root.key, { mode: 0o600 });
    writeFileSync(join(dir, 'ca.crt'), (await etcdMembersCa(store)).cert);
    const ctl = (endpoints: number[], ...args: string[]) =>
    execFileP(
      'etcdctl',
      [`--endpoints=${endpoints.map((i) => `https://${address(i)}:2379`).join(',')}`,
      `--cacert=${join(dir, 'ca.crt')}`, `--cert=${join(dir, 'c.crt')}`, `--key=${join(dir, 'c.key')}`,
      '--dial-timeout=3s', '--command-timeout=10s', ...args],
      { env: { ETCDCTL_API: '3', PATH: process.env.PATH } },
    ); // prettier-ignore
    const num = (name: string) => Number(name.slice(1));
    await ctl(first.map(num), 'put', '/basin/x/kept', 'before');

    // A member's host dies: every process in its namespace.
    const victim = first[0] as string;
    execFileSync('bash', [
      '-c',
      `kill -9 $(ip netns pids ${PREFIX}-${victim}) 2>/dev/null || true`,
    ]);
    await until(async () => {
      const e = await etcd();
      const hosts = e.members.map((m) => m.host).sort();
      return (
        e.quorum &&
        e.members.length === 3 &&
        e.members.every((m) => m.healthy) &&
        hosts.includes(spare) &&
        !hosts.includes(victim)
      );
    }, 180_000);
    // The new member has the cluster's data.
    const got = await ctl(
      [num(spare)],
      'get',
      '/basin/x/kept',
      '--print-value-only',
      '--consistency=s',
    );
    assert.equal(got.stdout.trim(), 'before');

    assert.equal((await b.stop()).code, 0);
  },
);

async function until(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(300);
  }
}
