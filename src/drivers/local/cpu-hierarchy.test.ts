// Unit tests of the CPU budgets' file logic (cpu-hierarchy.ts,
// cpu-budgets.ts): names, quotas, what /proc/<pid>/cgroup says, and what
// is written where, against temporary directories laid out like a cgroup
// v2 or v1 hierarchy. A temporary directory is not the kernel: its files
// hold what was last written (the kernel's answer to "+cpu" in
// cgroup.subtree_control is "cpu"), and rmdir of a directory with files in
// it fails, where the kernel removes a cgroup with its control files. The
// real thing (cgroup v1 on this machine) is test/e2e/cpu-budgets.test.ts's;
// cgroup v2 is exercised against no real kernel here.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Size } from '../../domain/types.js';
import { CpuBudgets, probeCgroups } from './cpu-budgets.js';
import {
  cgroupOfProcess,
  cpuQuotaUs,
  detectCpuHierarchy,
  joiningCgroup,
  limitFiles,
  nodeCgroupName,
  parseNodeCgroupName,
  removeInstallationCgroups,
} from './cpu-hierarchy.js';

const INST = '0123456789abcdef';
const dedicated = (cpuMillis: number): Size => ({ shared: false, cpuMillis, memoryGbs: 4 });
const SHARED: Size = { shared: true, cpuMillis: 0, memoryGbs: 0 };

function tempDir(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'basin-cgroup-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A directory laid out like the root of a cgroup v2 hierarchy. */
function v2Root(
  t: { after: (fn: () => void) => void },
  subtree = 'cpuset cpu io memory pids',
): string {
  const root = tempDir(t);
  writeFileSync(join(root, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n');
  writeFileSync(join(root, 'cgroup.subtree_control'), `${subtree}\n`);
  writeFileSync(join(root, 'cgroup.procs'), '');
  return root;
}

test('a node cgroup is named by installation, id and node, and only this installation’s are read back', () => {
  const ref = { id: 'd1k5vk7hf2', node: 1 };
  assert.equal(nodeCgroupName(INST, ref), 'basin-0123456789abcdef-d1k5vk7hf2-1');
  assert.deepEqual(parseNodeCgroupName(INST, nodeCgroupName(INST, ref)), ref);
  assert.equal(parseNodeCgroupName('fedcba9876543210', nodeCgroupName(INST, ref)), undefined);
  for (const other of [
    'basin-backups',
    'basin-0123456789abcdef-',
    'basin-0123456789abcdef-x-y',
    'cpu',
  ]) {
    assert.equal(parseNodeCgroupName(INST, other), undefined, other);
  }
});

test('the quota is cpu_millis × 100 µs per 100 ms (1000 millis = one CPU); shared has none', () => {
  assert.equal(cpuQuotaUs(dedicated(500)), 50_000);
  assert.equal(cpuQuotaUs(dedicated(1000)), 100_000);
  assert.equal(cpuQuotaUs(dedicated(32_000)), 3_200_000);
  assert.equal(cpuQuotaUs(dedicated(1)), 1_000, 'the kernel refuses less than 1 ms');
  assert.equal(cpuQuotaUs(SHARED), undefined);
  assert.deepEqual(limitFiles(1, 50_000), [
    ['cpu.cfs_period_us', '100000'],
    ['cpu.cfs_quota_us', '50000'],
  ]);
  assert.deepEqual(limitFiles(1, undefined), [
    ['cpu.cfs_period_us', '100000'],
    ['cpu.cfs_quota_us', '-1'],
  ]);
  assert.deepEqual(limitFiles(2, 50_000), [['cpu.max', '50000 100000']]);
  assert.deepEqual(limitFiles(2, undefined), [['cpu.max', 'max 100000']]);
});

test("a process's cgroup in the cpu hierarchy, from /proc/<pid>/cgroup", () => {
  const v1 = '9:name=systemd:/\n4:memory:/x\n2:cpuacct:/\n1:cpu:/basin-a-b-0\n0::/\n';
  assert.equal(cgroupOfProcess(v1, 1), '/basin-a-b-0');
  assert.equal(cgroupOfProcess('3:cpu,cpuacct:/basin-a-b-1\n', 1), '/basin-a-b-1');
  assert.equal(
    cgroupOfProcess('0::/system.slice/basin.service\n', 2),
    '/system.slice/basin.service',
  );
  assert.equal(cgroupOfProcess(v1, 2), '/', 'a hybrid host lists an (empty) v2 line too');
  assert.equal(cgroupOfProcess('0::/\n', 1), undefined);
});

test('the start joins the cgroup, then execs the command; the path is an argument, not script', () => {
  const cmd = joiningCgroup('/sys/fs/cgroup/cpu/basin-x', {
    file: 'unshare',
    args: ['--mount', 'sh'],
  });
  assert.equal(cmd.file, 'sh');
  assert.equal(cmd.args[0], '-c');
  assert.match(cmd.args[1]!, /echo \$\$ >"\$0\/cgroup\.procs" \|\| \{.*exit 70; \}; exec "\$@"$/);
  assert.deepEqual(cmd.args.slice(2), ['/sys/fs/cgroup/cpu/basin-x', 'unshare', '--mount', 'sh']);
});

test('a move that fails: the start fails with a FATAL line, or the command runs anyway (backups)', () => {
  const nowhere = join(tmpdir(), 'basin-no-such-cgroup', 'x');
  const echo = { file: 'echo', args: ['ran'] };
  const strict = joiningCgroup(nowhere, echo);
  const failed = spawnSync(strict.file, strict.args, { encoding: 'utf8' });
  assert.equal(failed.status, 70);
  assert.match(failed.stderr, /FATAL: basin: could not join the CPU cgroup .*basin-no-such-cgroup/);
  assert.equal(failed.stdout, '');
  const lenient = joiningCgroup(nowhere, echo, 'run anyway');
  const ran = spawnSync(lenient.file, lenient.args, { encoding: 'utf8' });
  assert.equal(ran.status, 0);
  assert.equal(ran.stdout, 'ran\n');
  assert.equal(ran.stderr, '');
});

test('detection: v2 with cpu enabled for the children; v2 asks for +cpu; v1; neither', async (t) => {
  const v2 = v2Root(t);
  assert.deepEqual(await detectCpuHierarchy(v2), { version: 2, dir: v2 });

  // Not enabled yet: "+cpu" is written; a temporary file does not answer as
  // the kernel does, so here it stays unenabled and says so.
  const off = v2Root(t, 'memory pids');
  const found = await detectCpuHierarchy(off);
  assert.equal(readFileSync(join(off, 'cgroup.subtree_control'), 'utf8'), '+cpu');
  assert.ok('none' in found && /could not be enabled/.test(found.none), JSON.stringify(found));

  const noCpu = tempDir(t);
  writeFileSync(join(noCpu, 'cgroup.controllers'), 'memory pids\n');
  const none = await detectCpuHierarchy(noCpu);
  assert.ok('none' in none && /no cpu controller/.test(none.none));

  const v1 = tempDir(t);
  mkdirSync(join(v1, 'cpu'));
  writeFileSync(join(v1, 'cpu', 'cpu.cfs_quota_us'), '-1\n');
  assert.deepEqual(await detectCpuHierarchy(v1), { version: 1, dir: join(v1, 'cpu') });

  const empty = tempDir(t);
  const neither = await detectCpuHierarchy(empty);
  assert.ok('none' in neither && /neither cgroup v2's nor v1's/.test(neither.none));
});

test('v2: a node cgroup gets cpu.max from its size, a resize rewrites it, shared is "max"', async (t) => {
  const root = v2Root(t);
  const budgets = new CpuBudgets({ version: 2, dir: root }, INST);
  const ref = { id: 'svc0000001', node: 0 };
  const dir = await budgets.ensure(ref, dedicated(500));
  assert.equal(dir, join(root, `basin-${INST}-svc0000001-0`));
  assert.equal(readFileSync(join(dir, 'cpu.max'), 'utf8'), '50000 100000');
  await budgets.ensure(ref, dedicated(1000));
  assert.equal(readFileSync(join(dir, 'cpu.max'), 'utf8'), '100000 100000');
  const shared = await budgets.ensure({ id: 'svc0000002', node: 0 }, SHARED);
  assert.equal(readFileSync(join(shared!, 'cpu.max'), 'utf8'), 'max 100000');
  assert.deepEqual(
    (await budgets.list()).sort((a, b) => a.id.localeCompare(b.id)),
    [ref, { id: 'svc0000002', node: 0 }],
  );
});

test('a limit file that already holds the value is not written again (a write would refill a throttled group)', async (t) => {
  const root = v2Root(t);
  const budgets = new CpuBudgets({ version: 2, dir: root }, INST);
  const ref = { id: 'svc0000001', node: 0 };
  const dir = (await budgets.ensure(ref, dedicated(500)))!;
  // The kernel's answer ends with a newline; an old mtime shows whether it was written.
  writeFileSync(join(dir, 'cpu.max'), '50000 100000\n');
  utimesSync(join(dir, 'cpu.max'), 1000, 1000);
  await budgets.ensure(ref, dedicated(500));
  assert.equal(statSync(join(dir, 'cpu.max')).mtimeMs, 1_000_000);
  assert.equal(readFileSync(join(dir, 'cpu.max'), 'utf8'), '50000 100000\n');
});

test('v1: period and quota files; place moves a postmaster that is elsewhere, once', async (t) => {
  const root = tempDir(t);
  const proc = tempDir(t);
  const budgets = new CpuBudgets({ version: 1, dir: root }, INST, proc);
  const ref = { id: 'svc0000003', node: 2 };
  const dir = (await budgets.ensure(ref, dedicated(2000)))!;
  assert.equal(readFileSync(join(dir, 'cpu.cfs_period_us'), 'utf8'), '100000');
  assert.equal(readFileSync(join(dir, 'cpu.cfs_quota_us'), 'utf8'), '200000');

  mkdirSync(join(proc, '4242'));
  writeFileSync(join(proc, '4242', 'cgroup'), '1:cpu:/\n0::/\n');
  assert.equal(await budgets.place(ref, 4242, '/nonexistent/pgdata'), true);
  assert.equal(readFileSync(join(dir, 'cgroup.procs'), 'utf8'), '4242');
  writeFileSync(join(proc, '4242', 'cgroup'), `1:cpu:/${nodeCgroupName(INST, ref)}\n`);
  rmSync(join(dir, 'cgroup.procs'));
  assert.equal(await budgets.place(ref, 4242, '/nonexistent/pgdata'), false);
  assert.equal(existsSync(join(dir, 'cgroup.procs')), false, 'nothing written for a placed one');
  assert.equal(
    await budgets.place(ref, 4243, '/nonexistent/pgdata'),
    false,
    'gone: nothing to move',
  );
});

test("leftovers: only this installation's cgroups of nodes that are gone, and only empty ones", async (t) => {
  const root = v2Root(t);
  const budgets = new CpuBudgets({ version: 2, dir: root }, INST);
  const live = nodeCgroupName(INST, { id: 'live000001', node: 0 });
  const gone = nodeCgroupName(INST, { id: 'gone000001', node: 1 });
  const busy = nodeCgroupName(INST, { id: 'busy000001', node: 0 });
  const theirs = nodeCgroupName('fedcba9876543210', { id: 'gone000001', node: 1 });
  for (const name of [live, gone, busy, theirs, 'basin-backups']) mkdirSync(join(root, name));
  // The kernel refuses to remove a cgroup with processes; a file in a directory does here.
  writeFileSync(join(root, busy, 'cgroup.procs'), '1234\n');
  const removed = await budgets.removeLeft(async (ref) => ref.id === 'live000001');
  assert.deepEqual(removed, [join(root, gone)]);
  for (const name of [live, busy, theirs, 'basin-backups']) {
    assert.ok(existsSync(join(root, name)), `${name} stays`);
  }

  removeInstallationCgroups(INST, root);
  assert.ok(!existsSync(join(root, live)), 'the installation removed: its empty cgroups go');
  assert.ok(existsSync(join(root, busy)) && existsSync(join(root, theirs)));
});

test('without a hierarchy every budget is a no-op', async () => {
  const budgets = new CpuBudgets(undefined, INST);
  const ref = { id: 'svc0000001', node: 0 };
  assert.equal(await budgets.ensure(ref, dedicated(500)), undefined);
  assert.equal(await budgets.place(ref, process.pid, '/x'), false);
  assert.equal(await budgets.remove(ref), true);
  assert.deepEqual(await budgets.list(), []);
  assert.equal(budgets.describe(), 'none');
});

test('a hierarchy where no cgroup can be made (read-only in a container) is found unusable before any node needs it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-cg-probe-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Writable: the probe is made and removed again, and nothing is left.
  assert.equal(await probeCgroups({ version: 2, dir }, INST), undefined);
  assert.deepEqual(readdirSync(dir), []);
  // Not writable. Root ignores modes, so the hierarchy is a file: mkdir fails as on a read-only mount.
  const file = join(dir, 'not-a-directory');
  writeFileSync(file, '');
  const reason = await probeCgroups({ version: 2, dir: file }, INST);
  assert.match(reason ?? '', /no cgroup can be made in .*not-a-directory/);
});
