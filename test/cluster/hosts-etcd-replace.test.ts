// etcd on the hosts: a member host removed (and gone) is replaced. Four
// hosts on the namespace topology (topology.sh), three members; the control
// plane removes the member of a host that is LOST and adds one on the
// fourth host, which joins the running cluster (`existing`) and gets its
// data; the cluster has three healthy members again.

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { etcdMembersCa, etcdRootIdentity } from '../../src/hosts/etcd-ca.js';
import { openPostgresStore } from '../../src/store/postgres/pg-store.js';
import { cluster, until } from './cluster.js';

const execFileP = promisify(execFile);
const PREFIX = 'betr';
/** The topology's subnet, 10.231.6.0/24: its own, as the tests run in parallel. */
const NET = 6;
const ZONES = ['a', 'a', 'b', 'b'];

interface EtcdView {
  quorum: boolean;
  members: { host: string | null; started: boolean; healthy: boolean }[];
}

test(
  'the etcd member of a host that is lost is replaced on another host',
  { timeout: 600_000 },
  async (t) => {
    const c = await cluster(t, {
      prefix: PREFIX,
      net: NET,
      hosts: 4,
      driver: 'sim',
      args: ['--host-lost-after', '3s'],
    });
    const { b, cli, address } = c;
    const scratch = mkdtempSync(join(tmpdir(), 'basin-etcd-'));
    t.after(() => rmSync(scratch, { recursive: true, force: true }));
    const etcd = async () => JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
    const store = await openPostgresStore(c.url);
    t.after(() => store.close());
    for (const i of [1, 2, 3, 4]) await c.joinAgent(i, { zone: ZONES[i - 1] as string });

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
