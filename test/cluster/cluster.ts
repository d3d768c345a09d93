// An installation of several hosts on this one machine, for the cluster
// tests: the namespace topology (topology.sh: a switch, a namespace per
// host), a PostgreSQL store, a control plane (`dist/main.js --host-listen`
// in the root namespace, at the subnet's first address) and `basin host
// run` agents started in the hosts' namespaces as a user would start them.
// Everything is torn down when the test ends, whatever its outcome; a failed
// test prints each agent's last lines.
//
// Topologies that exist at once need a prefix and a subnet of their own
// (`net`, 10.231.<net>.0/24): the files run in parallel.
//
// Each host's agent sees an /etc of its own (a copy of the machine's, bound
// over /etc in the mount namespace `ip netns exec` gives it), so that the
// hosts' OS users are their own as on separate machines: a service moved
// from one host to another gets its user `basin-<id>` made anew there, and
// the first host, back, removes its own without touching the second's.
// The uids stay apart (each host's range is its installation's).

import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { type PasswdEntry, readPasswd } from '../../src/drivers/local/host/os-user.js';
import { installation, type Installation } from '../e2e/basin-process.js';
import type { BasinProcess } from '../harness/basin-api.js';
import { ROOT } from '../harness/root.js';
import { freePort } from '../harness/postmaster.js';
import { waitTimer } from '../harness/wait-log.js';
import { startStorePostgres, type StorePostgres } from '../store-postgres.js';

const TOPOLOGY = join(ROOT, 'test/cluster/topology.sh');

/**
 * The machine's cgroup hierarchies, mounted again in an agent's mount
 * namespace: `ip netns exec` mounts a /sys of the namespace's own, without
 * /sys/fs/cgroup's mounts, and an agent there would run its nodes without
 * CPU budgets, memory bounds or process limits, as no real host does. Each
 * hierarchy is mounted with the controllers it has on the machine (the
 * kernel then attaches the same hierarchy), so the hosts' cgroups are the
 * machine's, apart by each installation's tag. A shell prelude, empty
 * where the machine has no cgroup v1 hierarchy (below: v2's is left out).
 */
const CGROUPS = cgroupPrelude(readFileSync('/proc/self/mountinfo', 'utf8'));

function cgroupPrelude(mountinfo: string): string {
  const mounts = mountinfo
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[4]?.startsWith('/sys/fs/cgroup'))
    .map((f) => {
      const dash = f.indexOf('-');
      return { path: f[4] as string, type: f[dash + 1], options: f[dash + 3] ?? '' };
    })
    // (Named hierarchies without controllers, systemd's, are not Basin's.)
    .filter((m) => !m.options.includes('name='))
    // Not cgroup v2's: Basin attaches its connect redirect (a BPF program,
    // network/connect-redirect.ts) to the unified hierarchy's root, for
    // every process of the machine, pinned under /sys/fs/bpf, which in an
    // agent's mount namespace is its own: a killed agent's program would
    // stay attached, redirecting its old ports, with no pin anyone can
    // find (the machine's limit, 64, was reached in one day). Without it
    // the agent's local clients go through NAT, as on a host without v2.
    .filter((m) => m.type === 'cgroup' || m.path === '/sys/fs/cgroup');
  if (mounts.every((m) => m.type !== 'cgroup')) return '';
  const steps = mounts.map((m) => {
    if (m.type === 'cgroup') {
      const controllers = m.options
        .split(',')
        .filter((o) => o !== 'rw' && o !== 'ro')
        .join(',');
      return `mkdir -p ${m.path} && mount -t cgroup -o ${controllers} cgroup ${m.path}`;
    }
    return `mount -t tmpfs -o mode=755 cgroup_root ${m.path}`;
  });
  return steps.map((c) => `${c} && `).join('');
}
const CLI = join(ROOT, 'dist/cli/basin.js');
const execFileAsync = promisify(execFile);

export interface ClusterOptions {
  /** The topology's namespace prefix: 2-6 lowercase letters and digits. */
  prefix: string;
  /** The topology's subnet, 10.231.<net>.0/24. */
  net: number;
  /** How many host namespaces (each gets an installation of the harness for its agent). */
  hosts: number;
  /** The control plane's driver: `hosts` to place services, `sim` where only the hosts matter. */
  driver: 'hosts' | 'sim';
  /** More flags for the control plane's start. */
  args?: string[];
}

export interface Token {
  token: string;
  ca_sha256: string;
}

export interface Agent {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

export interface AgentOptions {
  /** Flags after `host run` (the join, `--role`, …). */
  args?: string[];
  zone?: string;
  /** Another data directory than the host's own (a second agent, a stranger). */
  dataDir?: string;
  port?: number;
  heartbeatMs?: number;
}

export interface Cluster {
  inst: Installation;
  /** The control plane as started. */
  b: BasinProcess;
  store: StorePostgres;
  /** The store's URL. */
  url: string;
  /** https://<control plane address>:<port>, what agents join. */
  controlPlane: string;
  controlPlaneAddress: string;
  /** Host i's address (1-based), 10.231.<net>.(10+i). */
  address(i: number): string;
  /** Host i's namespace. */
  namespace(i: number): string;
  /** Host i's installation (1-based): its data directory, uids and service network. */
  host(i: number): Installation;
  /** Host i's OS users, from its own /etc (none before its agent first ran). */
  users(i: number): PasswdEntry[];
  /** `basin --store-url <url> <args>`, asserted to succeed; its stdout. */
  cli(...args: string[]): Promise<string>;
  token(): Promise<Token>;
  /** The flags that join with `tk`. */
  joinArgs(tk: Token): string[];
  /** `basin host run` for host i, in its namespace; killed when the test ends. */
  runAgent(i: number, o?: AgentOptions): Agent;
  /** Host i's agent with a fresh token, joining. */
  joinAgent(i: number, o?: AgentOptions): Promise<Agent>;
  /**
   * Host i lost as a machine is: every process in its namespace and in its
   * services' namespaces killed with -9, then its link taken down.
   */
  killHost(i: number): void;
  /** Host i cut off, everything on it still running: its link taken down. */
  cutHost(i: number): void;
  /** Host i's link up again, after killHost (its agent is then started with runAgent) or cutHost. */
  linkUp(i: number): void;
  agents: Agent[];
}

export async function cluster(t: TestContext, o: ClusterOptions): Promise<Cluster> {
  const namespace = (i: number) => `${o.prefix}-h${i}`;
  const address = (i: number) => `10.231.${o.net}.${10 + i}`;
  const controlPlaneAddress = `10.231.${o.net}.1`;
  // The namespaces are made while the store's initdb runs (one waits on
  // `ip`, the other on PostgreSQL), and the hosts' installations are claimed
  // while the control plane starts: none needs the other.
  t.after(() => execFileSync('bash', [TOPOLOGY, 'down', o.prefix]));
  const topology = execFileAsync('bash', [
    TOPOLOGY,
    'up',
    o.prefix,
    String(o.hosts),
    String(o.net),
  ]);
  const setUp = waitTimer(`topology ${o.prefix} and the store's PostgreSQL`);
  const [store] = await Promise.all([startStorePostgres(t), topology]);
  setUp();
  const url = await store.createDatabase('basin');
  const inst = await installation(t, { driver: o.driver, args: ['--store-url', url] });
  const hostPort = await freePort();
  const started = inst.start({
    args: ['--host-listen', `${controlPlaneAddress}:${hostPort}`, ...(o.args ?? [])],
  });
  started.catch(() => {}); // Awaited below; a failed start is not an unhandled rejection meanwhile.
  const controlPlane = `https://${controlPlaneAddress}:${hostPort}`;
  const cli = async (...args: string[]) => {
    const r = await inst.cli('--store-url', url, ...args);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  const token = async () => JSON.parse(await cli('host', 'token', '--json')) as Token;
  const joinArgs = (tk: Token) => [
    '--control-plane', controlPlane, '--token', tk.token, '--ca-sha256', tk.ca_sha256,
  ]; // prettier-ignore

  // Each host's data directory is an installation of the harness: uids and
  // service addresses of its own for its local driver, all removed after.
  const hosts: Installation[] = [];
  // One after another: a claim looks for a free block of ports and uids.
  for (let i = 0; i < o.hosts; i++) hosts.push(await installation(t));
  const controlPlaneUp = waitTimer('the control plane to answer');
  const b = await started;
  controlPlaneUp();
  const etcs = mkdtempSync(join(tmpdir(), `basin-${o.prefix}-etc-`));
  t.after(() => rmSync(etcs, { recursive: true, force: true }));
  const etcOf = (i: number) => {
    const dir = join(etcs, `h${i}`);
    // Again when a file vanished under the copy (another test's useradd
    // renames its /etc/group+ into place meanwhile).
    for (let attempt = 1; ; attempt++) {
      try {
        execFileSync('cp', ['-a', '/etc', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
        return dir;
      } catch (err) {
        rmSync(dir, { recursive: true, force: true });
        if (attempt >= 10) throw err;
      }
    }
  };
  const etc = new Map<number, string>();
  const host = (i: number) => {
    const h = hosts[i - 1];
    if (!h) throw new Error(`no host ${i} in a topology of ${o.hosts}`);
    return h;
  };

  const agents: Agent[] = [];
  let failed = false;
  t.afterEach((sub: TestContext) => {
    if ((sub as { passed?: boolean }).passed === false) failed = true;
  });
  t.after(() => {
    for (const a of agents) a.child.kill('SIGKILL');
    if (failed || (t as { passed?: boolean }).passed === false) {
      agents.forEach((a, k) => console.error(`agent ${k + 1}:\n${a.output().slice(-4000)}`));
    }
  });
  const runAgent = (i: number, a: AgentOptions = {}): Agent => {
    const h = host(i);
    if (!etc.has(i)) etc.set(i, etcOf(i));
    const child = spawn(
      'ip',
      ['netns', 'exec', namespace(i), 'sh', '-c', `mount --bind "$0" /etc && ${CGROUPS}exec "$@"`, etc.get(i) as string,
      process.execPath, CLI, '--data-dir', a.dataDir ?? h.dataDir,
      'host', 'run', '--address', address(i), '--name', `h${i}`,
      ...(a.port === undefined ? [] : ['--port', String(a.port)]),
      ...(a.zone === undefined ? [] : ['--zone', a.zone]),
      '--heartbeat-ms', String(a.heartbeatMs ?? 300), ...(a.args ?? []),
      '--', '--service-uid-range', `${h.serviceUids.min}-${h.serviceUids.max}`,
      '--service-network', h.serviceNetwork], // prettier-ignore
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (out += d));
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    const agent = { child, output: () => out, exited };
    agents.push(agent);
    return agent;
  };
  const joinAgent = async (i: number, a: AgentOptions = {}) =>
    runAgent(i, { ...a, args: [...(a.args ?? []), ...joinArgs(await token())] });
  const killHost = (i: number) => {
    // Every process of the "machine": those in its namespace (its agent,
    // etcd, HAProxy) and every process of its installation's uids (its
    // nodes' Patroni and PostgreSQL, its etcd). Not its nodes' namespaces
    // by name: the agent runs under `ip netns exec`, which makes the mount
    // namespace it gives the agent a slave of the machine's, so the nsfs
    // mounts of the namespaces the agent makes under /run/netns exist only
    // there: seen from here they are empty files, and `ip netns pids` of
    // one finds nothing (the nodes lived on, cut off, and held that mount
    // namespace alive).
    const { min, max } = host(i).serviceUids;
    const byUid = `$(ps -e -o pid=,uid= | awk '$2 >= ${min} && $2 <= ${max} { print $1 }')`;
    // Twice: for what a kill forks.
    execFileSync('bash', [
      '-c',
      `for _ in 1 2; do kill -9 $(ip netns pids ${namespace(i)} 2>/dev/null) ${byUid} 2>/dev/null; done; true`,
    ]);
    cutHost(i);
  };
  const cutHost = (i: number) => {
    execFileSync('ip', ['-n', namespace(i), 'link', 'set', 'eth0', 'down']);
  };
  const linkUp = (i: number) => {
    execFileSync('ip', ['-n', namespace(i), 'link', 'set', 'eth0', 'up']);
    execFileSync('ip', [
      '-n',
      namespace(i),
      'route',
      'replace',
      'default',
      'via',
      controlPlaneAddress,
    ]);
  };

  return {
    inst,
    b,
    store,
    url,
    controlPlane,
    controlPlaneAddress,
    address,
    namespace,
    host,
    users: (i) => {
      const dir = etc.get(i);
      return dir ? readPasswd(join(dir, 'passwd')) : [];
    },
    cli,
    token,
    joinArgs,
    runAgent,
    joinAgent,
    killHost,
    cutHost,
    linkUp,
    agents,
  };
}

/**
 * Polls `check` until it holds; throws after `timeoutMs`. `intervalMs`: the
 * pause between checks; by default 200 ms for a wait's first 5 s, then
 * 500 ms: what takes longer waits on a TTL, a lease or a backup, and many
 * checks start a process (a `basin` CLI costs 0.35 s of CPU) on a suite
 * bound by CPU. Longer for a check that starts a process and waits on
 * something slow.
 */
export async function until(
  check: () => Promise<boolean>,
  timeoutMs = 30_000,
  intervalMs?: number,
): Promise<void> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const timer = waitTimer('until');
  while (!(await check())) {
    if (Date.now() > deadline) {
      timer('timed out');
      throw new Error('timed out');
    }
    await sleep(intervalMs ?? (Date.now() - started < 5_000 ? 200 : 500));
  }
  timer();
}

/**
 * The topology of the benchmarks and of try-hosts.ts: host 1 joined as the
 * repository host, the others as database hosts in zones z2, z3, …; resolves
 * once every host is ONLINE and etcd (on three of them) has its quorum.
 */
export async function joinWithRepositoryHost(c: Cluster, hosts: number): Promise<void> {
  await c.joinAgent(1, { args: ['--role', 'repository'] });
  for (let i = 2; i <= hosts; i++) await c.joinAgent(i, { zone: `z${i}` });
  await c.b.waitFor(
    async () => {
      const etcd = JSON.parse(await c.cli('host', 'etcd', '--json')) as { quorum: boolean };
      const listed = JSON.parse(await c.cli('host', 'list', '--json')) as { state: string }[];
      const online = listed.length === hosts && listed.every((h) => h.state === 'ONLINE');
      return (etcd.quorum && online) || undefined;
    },
    `${hosts} hosts online and etcd on three of them`,
    300_000,
  );
}
