// Unit tests of the cgroups' pure logic (cgroup-hierarchy.ts,
// node-bounds.ts, exec.ts's prelude and RLIMIT_NPROC): names, bounds,
// limit files, what /proc/<pid>/cgroup and the kernel's counters say, and
// how a process starts, against temporary directories laid out like a
// cgroup v2 or v1 hierarchy. node-cgroups.test.ts has what is written
// where; the real thing (cgroup v1 on this machine) is
// test/e2e/cpu-budgets.test.ts's, attack-memory.test.ts's and
// attack-processes.test.ts's; cgroup v2 is exercised against no real kernel
// here.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ServiceType, Size } from '../../../../domain/types.js';
import {
  cgroupOfProcess,
  cpuQuotaUs,
  type Hierarchy,
  limitFiles,
  nodeCgroupName,
  parseMemoryLimit,
  parseOomKills,
  parseUnitCgroupName,
  sharedCgroupName,
  unitCgroupName,
} from './cgroup-hierarchy.js';
import { postgresqlSettings, processCounts } from '../../config/conf.js';
import { asUser, withPrelude } from '../exec.js';
import {
  formatBytes,
  nodeBounds,
  nodePidsMax,
  poolerBounds,
  serviceNproc,
  sharedMemoryBytes,
} from './node-bounds.js';
import { DEFAULT_SIZES } from '../../../../domain/sizes.js';

const INST = '0123456789abcdef';
const GiB = 1024 ** 3;
const dedicated = (cpuMillis: number, memoryGbs = 4): Size => ({
  shared: false,
  cpuMillis,
  memoryGbs,
});
const SHARED: Size = { shared: true, cpuMillis: 0, memoryGbs: 0 };
const COUNTS = { maxConnections: 100, maxWorkerProcesses: 8 };

function tempDir(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'basin-cgroup-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const read = (path: string) => readFileSync(path, 'utf8');

test('a cgroup is named by installation, id and part (node, pooler, helpers, repository); only this installation’s are read back', () => {
  const ref = { id: 'd1k5vk7hf2', node: 1 };
  assert.equal(nodeCgroupName(INST, ref), 'basin-0123456789abcdef-d1k5vk7hf2-1');
  assert.deepEqual(parseUnitCgroupName(INST, nodeCgroupName(INST, ref)), {
    id: 'd1k5vk7hf2',
    part: 1,
  });
  for (const part of ['pooler', 'tasks', 'repo'] as const) {
    const name = unitCgroupName(INST, { id: 'd1k5vk7hf2', part });
    assert.equal(name, `basin-0123456789abcdef-d1k5vk7hf2-${part}`);
    assert.deepEqual(parseUnitCgroupName(INST, name), { id: 'd1k5vk7hf2', part });
  }
  assert.equal(parseUnitCgroupName('fedcba9876543210', nodeCgroupName(INST, ref)), undefined);
  for (const other of [
    'basin-backups',
    'basin-0123456789abcdef-',
    sharedCgroupName(INST),
    'basin-0123456789abcdef-x-y',
    'basin-0123456789abcdef-x-poolers',
    'cpu',
  ]) {
    assert.equal(parseUnitCgroupName(INST, other), undefined, other);
  }
});

test('the quota is cpu_millis × 100 µs per 100 ms (1000 millis = one CPU); shared has none', () => {
  assert.equal(cpuQuotaUs(dedicated(500)), 50_000);
  assert.equal(cpuQuotaUs(dedicated(1000)), 100_000);
  assert.equal(cpuQuotaUs(dedicated(32_000)), 3_200_000);
  assert.equal(cpuQuotaUs(dedicated(1)), 1_000, 'the kernel refuses less than 1 ms');
  assert.equal(cpuQuotaUs(SHARED), undefined);
});

test('a node is bounded by its size’s memory and by the processes a full load of it runs', () => {
  const b = nodeBounds(dedicated(500, 2), COUNTS);
  assert.deepEqual(b, {
    cpuQuotaUs: 50_000,
    memoryBytes: 2 * GiB,
    // 100 connections + 8 workers + 3 autovacuum + 10 WAL senders + 16 own + 64 headroom
    pidsMax: 201,
  });
  // shared: no quota, no memory bound of its own (the shared parent's), processes still bounded.
  assert.deepEqual(nodeBounds(SHARED, { maxConnections: 50, maxWorkerProcesses: 8 }), {
    pidsMax: 151,
  });
  assert.equal(nodeBounds(dedicated(500, 0), COUNTS).memoryBytes, 256 * 1024 * 1024);
  // A node's settings: what PostgreSQL is told is what the bound counts.
  for (const size of DEFAULT_SIZES) {
    for (const type of ['POSTGRES', 'TIMESERIESDB'] as ServiceType[]) {
      const c = processCounts({ size, type });
      const s = postgresqlSettings(
        {
          size,
          type,
          serviceId: 'svc',
          port: 5432,
          source: { kind: 'empty' },
        } as Parameters<typeof postgresqlSettings>[0],
        {
          socketDir: '/s',
          backupConf: '/b',
          pgbackrest: '/p',
          forkSourceConf: '/f',
          forkSourcePg: '/g',
        },
        { listenAddresses: '*', publicCidrs: [] },
      );
      assert.equal(String(c.maxConnections), s.max_connections);
      assert.equal(String(c.maxWorkerProcesses), s.max_worker_processes);
    }
  }
});

test('RLIMIT_NPROC: a quarter of pid_max, at most 16384, above what every node of a 10-node set holds', () => {
  assert.equal(serviceNproc(32_768), 8192);
  assert.equal(serviceNproc(4_194_304), 16_384);
  const largest = Math.max(
    ...DEFAULT_SIZES.map((size) => nodePidsMax(processCounts({ size, type: 'TIMESERIESDB' }))),
  );
  assert.equal(largest, 644);
  const pooler = poolerBounds(1, 0).pidsMax!;
  assert.ok(serviceNproc(32_768) > 10 * largest + pooler + 64, 'a set of 10 such nodes fits');
});

test('the pooler’s and the shared nodes’ memory', () => {
  assert.deepEqual(poolerBounds(500, -5), {
    memoryBytes: 64 * 1024 * 1024 + 500 * 64 * 1024,
    pidsMax: 32,
    cpuNice: -5,
  });
  assert.equal(sharedMemoryBytes(24 * GiB), 6 * GiB, 'a quarter of the host');
  assert.equal(sharedMemoryBytes(24 * GiB, 2048), 2 * GiB, 'or what the operator says');
  assert.equal(formatBytes(GiB), '1 GiB');
  assert.equal(formatBytes(1.5 * GiB), '1.5 GiB');
  assert.equal(formatBytes(96 * 1024 * 1024), '96 MiB');
});

test('limit files: v1 per controller, memory and swap together; v2 in one cgroup, no swap', () => {
  const b = nodeBounds(dedicated(500, 1), COUNTS);
  const files = (
    h: Pick<Hierarchy, 'version' | 'controllers'>,
    bounds = b,
    c?: Hierarchy['controllers'],
  ) => limitFiles(h, bounds, c).map((f) => `${f.file}=${f.value}${f.optional ? '?' : ''}`);
  assert.deepEqual(files({ version: 1, controllers: ['cpu'] }), [
    'cpu.cfs_period_us=100000',
    'cpu.cfs_quota_us=50000',
  ]);
  assert.deepEqual(files({ version: 1, controllers: ['memory'] }), [
    'memory.limit_in_bytes=1073741824',
    'memory.memsw.limit_in_bytes=1073741824?',
  ]);
  assert.deepEqual(files({ version: 1, controllers: ['pids'] }), ['pids.max=201']);
  assert.deepEqual(files({ version: 1, controllers: ['memory'] }, { pidsMax: 5 }), [
    'memory.limit_in_bytes=-1',
    'memory.memsw.limit_in_bytes=-1?',
  ]);
  // A pooler is not in the cpu hierarchy on v1.
  assert.deepEqual(
    files({ version: 1, controllers: ['cpu'] }, poolerBounds(10, -5), ['memory', 'pids']),
    [],
  );
  const all: Hierarchy['controllers'] = ['cpu', 'memory', 'pids'];
  assert.deepEqual(files({ version: 2, controllers: all }), [
    'cpu.max=50000 100000',
    'memory.max=1073741824',
    'memory.swap.max=0?',
    'pids.max=201',
  ]);
  assert.deepEqual(files({ version: 2, controllers: all }, { pidsMax: 151 }), [
    'cpu.max=max 100000',
    'memory.max=max',
    'memory.swap.max=max?',
    'pids.max=151',
  ]);
  // v2: a pooler's cgroup has the cpu controller too; its weight is its nice value.
  assert.deepEqual(
    files({ version: 2, controllers: all }, poolerBounds(0, -5), ['memory', 'pids']),
    [
      'cpu.max=max 100000',
      'cpu.weight.nice=-5',
      'memory.max=67108864',
      'memory.swap.max=0?',
      'pids.max=32',
    ],
  );
});

test("a process's cgroup in each hierarchy, from /proc/<pid>/cgroup", () => {
  const v1 =
    '9:name=systemd:/\n8:pids:/basin-a-b-0\n4:memory:/basin-a-shared/basin-a-b-0\n2:cpuacct:/\n1:cpu:/basin-a-b-0\n0::/\n';
  assert.equal(cgroupOfProcess(v1, 1), '/basin-a-b-0');
  assert.equal(
    cgroupOfProcess(v1, { version: 1, controllers: ['memory'] }),
    '/basin-a-shared/basin-a-b-0',
  );
  assert.equal(cgroupOfProcess(v1, { version: 1, controllers: ['pids'] }), '/basin-a-b-0');
  assert.equal(cgroupOfProcess('3:cpu,cpuacct:/basin-a-b-1\n', 1), '/basin-a-b-1');
  assert.equal(
    cgroupOfProcess('0::/system.slice/basin.service\n', 2),
    '/system.slice/basin.service',
  );
  assert.equal(cgroupOfProcess(v1, 2), '/', 'a hybrid host lists an (empty) v2 line too');
  assert.equal(cgroupOfProcess('0::/\n', 1), undefined);
});

test('OOM kills and memory limits as the kernel writes them (v1 oom_control, v2 memory.events)', () => {
  assert.equal(parseOomKills('oom_kill_disable 0\nunder_oom 0\noom_kill 3\n'), 3);
  assert.equal(parseOomKills('low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n'), 2);
  assert.equal(parseOomKills('oom_kill_disable 0\nunder_oom 0\n'), undefined, 'an old kernel');
  assert.equal(parseMemoryLimit('1073741824\n'), GiB);
  assert.equal(parseMemoryLimit('9223372036854771712\n'), undefined, "v1's none");
  assert.equal(parseMemoryLimit('max\n'), undefined, "v2's none");
});

test('the prelude joins cgroups, sets the OOM score, then execs; the paths are arguments, not script', () => {
  const cmd = withPrelude(
    { cgroups: ['/sys/fs/cgroup/cpu/basin-x'], oomScoreAdj: -900 },
    { file: 'unshare', args: ['--mount', 'sh'] },
  );
  assert.equal(cmd.file, 'sh');
  assert.equal(cmd.args[0], '-c');
  assert.doesNotMatch(cmd.args[1]!, /basin-x/);
  assert.deepEqual(cmd.args.slice(2), [
    'basin-prelude',
    '-900',
    '/sys/fs/cgroup/cpu/basin-x',
    '--',
    '--',
    'unshare',
    '--mount',
    'sh',
  ]);
  const bare = { file: 'echo', args: ['x'] };
  assert.equal(withPrelude({}, bare), bare, 'nothing to do: the command as it is');
});

test('a join that fails fails the start with a FATAL line; a tried one does not; the score is set', (t) => {
  const dir = tempDir(t);
  const joined = join(dir, 'joined');
  mkdirSync(joined);
  const nowhere = join(tmpdir(), 'basin-no-such-cgroup', 'x');
  const show = { file: 'sh', args: ['-c', 'cat /proc/self/oom_score_adj'] };
  const strict = withPrelude({ cgroups: [joined, nowhere] }, show);
  const failed = spawnSync(strict.file, strict.args, { encoding: 'utf8' });
  assert.equal(failed.status, 70);
  assert.match(failed.stderr, /FATAL: basin: could not join the cgroup .*basin-no-such-cgroup/);
  assert.equal(failed.stdout, '');
  // Anyone may raise a score (lowering one takes CAP_SYS_RESOURCE).
  const lenient = withPrelude({ cgroups: [joined], tryCgroups: [nowhere], oomScoreAdj: 700 }, show);
  const ran = spawnSync(lenient.file, lenient.args, { encoding: 'utf8' });
  assert.equal(ran.status, 0, ran.stderr);
  assert.equal(ran.stdout, '700\n');
  assert.equal(ran.stderr, '');
  assert.match(read(join(joined, 'cgroup.procs')), /^\d+\n$/, 'its pid went into cgroup.procs');
});

test('a service user’s processes start with its RLIMIT_NPROC, set before the uid changes (as root)', () => {
  const user = { name: 'nobody', uid: 65534, gid: 65534, nproc: 123 };
  const cmd = asUser(user, 'sh', ['-c', 'grep "Max processes" /proc/self/limits; id -u']);
  assert.equal(cmd.file, 'prlimit');
  assert.deepEqual(cmd.args.slice(0, 3), ['--nproc=123', '--', 'setpriv']);
  const r = spawnSync(cmd.file, cmd.args, { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^Max processes\s+123\s+123\s+processes\s*\n65534\n$/);
  const template = asUser({ name: 'nobody', uid: 65534, gid: 65534 }, 'true', []);
  assert.equal(template.file, 'setpriv', 'no limit for a user that is not a service’s');
});
