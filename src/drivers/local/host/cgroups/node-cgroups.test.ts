// Unit tests of the hierarchies found (cgroup-hierarchy.ts), of what
// node-cgroups.ts writes where (nodes, shared nodes, poolers, leftovers),
// of the OOM scores (oom-scores.ts) and of the OOM kills noticed
// (oom-watch.ts), against temporary directories laid out like a cgroup v2
// or v1 hierarchy. A temporary directory is not the kernel: its files hold
// what was last written (the kernel's answer to "+cpu" in
// cgroup.subtree_control is "cpu"), a file the kernel would have is there
// only once written, and rmdir of a directory with files in it fails,
// where the kernel removes a cgroup with its control files. The real thing
// (cgroup v1 on this machine) is in test/e2e/.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
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
import type { Target } from '../../../../domain/logs.js';
import type { ProgressNote } from '../../../../domain/progress.js';
import type { Size } from '../../../../domain/types.js';
import { silentLogger } from '../../../../lib/logger.js';
import {
  detectCgroups,
  type Hierarchy,
  nodeCgroupName,
  removeInstallationCgroups,
  sharedCgroupName,
  unitCgroupName,
} from './cgroup-hierarchy.js';
import { KeyedLock } from '../../keyed-lock.js';
import { Layout } from '../../layout.js';
import { nodeBounds, poolerBounds } from './node-bounds.js';
import { NodeCgroups, probeCgroups } from './node-cgroups.js';
import { startOomScores, postmasterOomEnv } from './oom-scores.js';
import { OomWatch } from './oom-watch.js';

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

const V2 = (dir: string): Hierarchy => ({
  version: 2,
  dir,
  controllers: ['cpu', 'memory', 'pids'],
});

/** A directory laid out like cgroup v1's three hierarchies. */
function v1Root(t: { after: (fn: () => void) => void }): { root: string; hs: Hierarchy[] } {
  const root = tempDir(t);
  const hs: Hierarchy[] = [];
  for (const [c, marker] of [
    ['cpu', 'cpu.cfs_quota_us'],
    ['memory', 'memory.limit_in_bytes'],
    ['pids', 'cgroup.procs'],
  ] as const) {
    mkdirSync(join(root, c));
    writeFileSync(join(root, c, marker), '');
    hs.push({ version: 1, dir: join(root, c), controllers: [c] });
  }
  return { root, hs };
}

const read = (path: string) => readFileSync(path, 'utf8');

test('detection: v2 with the controllers enabled for the children; v2 asks for them; v1; neither', async (t) => {
  const v2 = v2Root(t);
  assert.deepEqual(await detectCgroups(v2), { hierarchies: [V2(v2)], missing: [] });

  // Not enabled yet: "+cpu" is written; a temporary file does not answer as
  // the kernel does, so here it stays unenabled and says so.
  const off = v2Root(t, 'memory pids');
  const found = await detectCgroups(off);
  assert.equal(read(join(off, 'cgroup.subtree_control')), '+cpu');
  assert.deepEqual(
    found.missing.map((m) => m.controller),
    ['cpu', 'memory', 'pids'],
    'the file now reads "+cpu": none is enabled',
  );
  assert.match(found.missing[0]!.why, /could not be enabled/);

  const noCpu = tempDir(t);
  writeFileSync(join(noCpu, 'cgroup.controllers'), 'memory pids\n');
  writeFileSync(join(noCpu, 'cgroup.subtree_control'), 'memory pids\n');
  const some = await detectCgroups(noCpu);
  assert.deepEqual(some.hierarchies, [{ version: 2, dir: noCpu, controllers: ['memory', 'pids'] }]);
  assert.equal(some.missing.length, 1);
  assert.match(some.missing[0]!.why, /offers no cpu controller/);

  const { root, hs } = v1Root(t);
  assert.deepEqual(await detectCgroups(root), { hierarchies: hs, missing: [] });
  rmSync(join(root, 'pids'), { recursive: true });
  const partial = await detectCgroups(root);
  assert.deepEqual(partial.hierarchies, hs.slice(0, 2));
  assert.match(partial.missing[0]!.why, /no cgroup pids controller/);

  const empty = tempDir(t);
  const neither = await detectCgroups(empty);
  assert.deepEqual(neither.hierarchies, []);
  assert.equal(neither.missing.length, 3);
});

test('v2: a node’s cgroup gets its bounds, a resize rewrites them; shared nodes go below one parent with the shared bound', async (t) => {
  const root = v2Root(t);
  const cgroups = new NodeCgroups([V2(root)], INST, { sharedMemoryBytes: 3 * GiB });
  const unit = { id: 'svc0000001', part: 0 };
  const [dir] = await cgroups.ensure(unit, nodeBounds(dedicated(500, 2), COUNTS));
  assert.equal(dir, join(root, `basin-${INST}-svc0000001-0`));
  assert.equal(read(join(dir!, 'cpu.max')), '50000 100000');
  assert.equal(read(join(dir!, 'memory.max')), String(2 * GiB));
  assert.equal(read(join(dir!, 'pids.max')), '201');
  assert.ok(!existsSync(join(dir!, 'memory.swap.max')), 'no swap accounting: not written');
  writeFileSync(join(dir!, 'memory.swap.max'), 'max\n'); // the kernel has it where swap is accounted
  await cgroups.ensure(unit, nodeBounds(dedicated(1000, 4), COUNTS));
  assert.equal(read(join(dir!, 'cpu.max')), '100000 100000');
  assert.equal(read(join(dir!, 'memory.max')), String(4 * GiB));
  assert.equal(read(join(dir!, 'memory.swap.max')), '0');

  const shared = { id: 'svc0000002', part: 0 };
  const [sdir] = await cgroups.ensure(shared, nodeBounds(SHARED, COUNTS), true);
  const parent = join(root, sharedCgroupName(INST));
  assert.equal(sdir, join(parent, `basin-${INST}-svc0000002-0`));
  assert.equal(read(join(parent, 'memory.max')), String(3 * GiB));
  assert.equal(read(join(parent, 'cgroup.subtree_control')), '+pids', 'each controller given on');
  assert.equal(read(join(sdir!, 'memory.max')), 'max');
  assert.equal(read(join(sdir!, 'cpu.max')), 'max 100000');
  assert.deepEqual(await cgroups.memoryBound(shared), { bytes: 3 * GiB, shared: true });
  assert.deepEqual(await cgroups.memoryBound(unit), { bytes: 4 * GiB, shared: false });

  const pooler = { id: 'svc0000001', part: 'pooler' as const };
  const [pdir] = await cgroups.ensure(pooler, poolerBounds(100, -5));
  assert.equal(read(join(pdir!, 'cpu.weight.nice')), '-5');
  assert.deepEqual((await cgroups.list()).map((u) => `${u.id}-${u.part}`).sort(), [
    'svc0000001-0',
    'svc0000001-pooler',
    'svc0000002-0',
  ]);
});

test('a limit file that already holds the value is not written again (a write would refill a throttled group)', async (t) => {
  const root = v2Root(t);
  const cgroups = new NodeCgroups([V2(root)], INST);
  const unit = { id: 'svc0000001', part: 0 };
  const [dir] = await cgroups.ensure(unit, nodeBounds(dedicated(500), COUNTS));
  // The kernel's answer ends with a newline; an old mtime shows whether it was written.
  writeFileSync(join(dir!, 'cpu.max'), '50000 100000\n');
  utimesSync(join(dir!, 'cpu.max'), 1000, 1000);
  await cgroups.ensure(unit, nodeBounds(dedicated(500), COUNTS));
  assert.equal(statSync(join(dir!, 'cpu.max')).mtimeMs, 1_000_000);
  assert.equal(read(join(dir!, 'cpu.max')), '50000 100000\n');
});

test('v1: a cgroup per hierarchy; place moves a postmaster that is elsewhere, once; a pooler has no cpu cgroup', async (t) => {
  const { hs } = v1Root(t);
  const proc = tempDir(t);
  const cgroups = new NodeCgroups(hs, INST, { procRoot: proc });
  const unit = { id: 'svc0000003', part: 2 };
  const name = unitCgroupName(INST, unit);
  const dirs = await cgroups.ensure(unit, nodeBounds(dedicated(2000, 1), COUNTS));
  assert.deepEqual(
    dirs,
    hs.map((h) => join(h.dir, name)),
  );
  assert.equal(read(join(dirs[0]!, 'cpu.cfs_quota_us')), '200000');
  assert.equal(read(join(dirs[1]!, 'memory.limit_in_bytes')), String(GiB));
  assert.equal(read(join(dirs[2]!, 'pids.max')), '201');

  mkdirSync(join(proc, '4242'));
  writeFileSync(join(proc, '4242', 'cgroup'), '8:pids:/\n4:memory:/\n1:cpu:/\n0::/\n');
  assert.equal(await cgroups.place(unit, 4242, false, '/nonexistent/pgdata'), true);
  for (const d of dirs) assert.equal(read(join(d, 'cgroup.procs')), '4242');
  writeFileSync(
    join(proc, '4242', 'cgroup'),
    `8:pids:/${name}\n4:memory:/${name}\n1:cpu:/${name}\n`,
  );
  for (const d of dirs) rmSync(join(d, 'cgroup.procs'));
  assert.equal(await cgroups.place(unit, 4242, false, '/nonexistent/pgdata'), false);
  assert.ok(
    dirs.every((d) => !existsSync(join(d, 'cgroup.procs'))),
    'nothing written for a placed one',
  );
  assert.equal(await cgroups.place(unit, 4243), false, 'gone: nothing to move');

  const pooler = await cgroups.ensure({ id: 'svc0000003', part: 'pooler' }, poolerBounds(10, -5));
  assert.deepEqual(
    pooler,
    hs.slice(1).map((h) => join(h.dir, `basin-${INST}-svc0000003-pooler`)),
  );
});

test('a resize between shared and dedicated moves the node to its other place and leaves the old one gone', async (t) => {
  const { hs } = v1Root(t);
  const proc = tempDir(t);
  const cgroups = new NodeCgroups(hs, INST, { procRoot: proc, sharedMemoryBytes: GiB });
  const unit = { id: 'svc0000004', part: 0 };
  const name = unitCgroupName(INST, unit);
  const sharedDirs = await cgroups.ensure(unit, nodeBounds(SHARED, COUNTS), true);
  const shared = join(hs[1]!.dir, sharedCgroupName(INST));
  assert.equal(
    sharedDirs[1],
    join(shared, name),
    'below the shared parent in the memory hierarchy',
  );
  assert.equal(sharedDirs[0], join(hs[0]!.dir, name), 'but not in the cpu one');
  assert.equal(read(join(shared, 'memory.limit_in_bytes')), String(GiB));
  mkdirSync(join(proc, '77'));
  writeFileSync(
    join(proc, '77', 'cgroup'),
    `8:pids:/${name}\n4:memory:/${sharedCgroupName(INST)}/${name}\n1:cpu:/${name}\n`,
  );
  assert.equal(await cgroups.place(unit, 77, true), false, 'in place');

  // Resized to a dedicated size: a memory cgroup of its own, the process moved there.
  const dirs = await cgroups.ensure(unit, nodeBounds(dedicated(500, 2), COUNTS));
  assert.equal(dirs[1], join(hs[1]!.dir, name));
  // The kernel removes a cgroup with its control files; a temporary directory must be empty.
  for (const f of readdirSync(sharedDirs[1]!)) rmSync(join(sharedDirs[1]!, f));
  assert.equal(await cgroups.place(unit, 77, false), true);
  assert.equal(read(join(dirs[1]!, 'cgroup.procs')), '77');
  assert.ok(!existsSync(sharedDirs[1]!), 'the shared place is removed once empty');
});

test("leftovers: only this installation's cgroups of units that are gone, only empty ones, the shared parent last", async (t) => {
  const root = v2Root(t);
  const cgroups = new NodeCgroups([V2(root)], INST);
  const live = nodeCgroupName(INST, { id: 'live000001', node: 0 });
  const gone = nodeCgroupName(INST, { id: 'gone000001', node: 1 });
  const gonePooler = unitCgroupName(INST, { id: 'gone000001', part: 'pooler' });
  const busy = nodeCgroupName(INST, { id: 'busy000001', node: 0 });
  const theirs = nodeCgroupName('fedcba9876543210', { id: 'gone000001', node: 1 });
  const sharedParent = join(root, sharedCgroupName(INST));
  const goneShared = join(sharedParent, nodeCgroupName(INST, { id: 'gone000002', node: 0 }));
  for (const name of [live, gone, gonePooler, busy, theirs, 'basin-backups']) {
    mkdirSync(join(root, name));
  }
  mkdirSync(goneShared, { recursive: true });
  // The kernel refuses to remove a cgroup with processes; a file in a directory does here.
  writeFileSync(join(root, busy, 'cgroup.procs'), '1234\n');
  const removed = await cgroups.removeLeft(async (u) => u.id === 'live000001');
  assert.deepEqual(
    removed.sort(),
    [join(root, gone), join(root, gonePooler), goneShared, sharedParent].sort(),
  );
  for (const name of [live, busy, theirs, 'basin-backups']) {
    assert.ok(existsSync(join(root, name)), `${name} stays`);
  }

  mkdirSync(goneShared, { recursive: true });
  removeInstallationCgroups(INST, root);
  assert.ok(!existsSync(join(root, live)), 'the installation removed: its empty cgroups go');
  assert.ok(!existsSync(sharedParent), 'the shared parent after its children');
  assert.ok(existsSync(join(root, busy)) && existsSync(join(root, theirs)));
});

test("killAllNow: SIGKILL at once to every process in the service's cgroups (nodes, either memory place, pooler, helpers), no other's", async (t) => {
  const { hs } = v1Root(t);
  const [cpu, memory, pids] = hs.map((h) => h.dir) as [string, string, string];
  const cgroups = new NodeCgroups(hs, INST);
  const id = 'svc0000009';
  const sleeper = () => {
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    t.after(() => child.kill('SIGKILL'));
    return child;
  };
  const [node0, node1, pooler, helper, other] = [
    sleeper(),
    sleeper(),
    sleeper(),
    sleeper(),
    sleeper(),
  ];
  const put = (dir: string, ...procs: ChildProcess[]) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'cgroup.procs'), procs.map((p) => `${p.pid}\n`).join(''));
  };
  const name = (part: number | 'pooler' | 'tasks') => unitCgroupName(INST, { id, part });
  // node 0 dedicated (listed by each of its hierarchies), node 1 shared
  // (its memory cgroup below the shared parent), its pooler and helpers in
  // memory and pids only; another service's node beside them.
  for (const dir of [cpu, memory, pids]) put(join(dir, name(0)), node0);
  put(join(cpu, name(1)), node1);
  put(join(memory, sharedCgroupName(INST), name(1)), node1);
  put(join(memory, name('pooler')), pooler);
  put(join(pids, name('tasks')), helper);
  put(join(pids, unitCgroupName(INST, { id: 'svc0000010', part: 0 })), other);
  const ended = (p: ChildProcess) =>
    new Promise<NodeJS.Signals | null>((resolve) => p.once('exit', (_code, sig) => resolve(sig)));
  const endings = [node0, node1, pooler, helper].map(ended);

  assert.equal(
    cgroups.killAllNow(id, [0, 1]),
    4,
    'each process once, however many cgroups list it',
  );
  assert.deepEqual(await Promise.all(endings), ['SIGKILL', 'SIGKILL', 'SIGKILL', 'SIGKILL']);
  assert.equal(other.exitCode, null);
  assert.equal(other.signalCode, null, "another service's process runs on");
  assert.equal(cgroups.killAllNow('svc0000011', [0]), 0, 'no cgroups: nothing');
  assert.equal(new NodeCgroups([], INST).killAllNow(id, [0]), 0, 'no hierarchy: nothing');
});

test('without a hierarchy every bound is a no-op', async () => {
  const cgroups = new NodeCgroups([], INST);
  const unit = { id: 'svc0000001', part: 0 };
  assert.deepEqual(await cgroups.ensure(unit, nodeBounds(dedicated(500), COUNTS)), []);
  assert.equal(await cgroups.place(unit, process.pid), false);
  assert.equal(await cgroups.remove(unit), true);
  assert.deepEqual(await cgroups.list(), []);
  assert.equal(await cgroups.oomKills(unit), undefined);
  assert.equal(cgroups.describe(), 'none');
});

test('a hierarchy where no cgroup can be made (read-only in a container) is found unusable before any node needs it', async (t) => {
  const dir = tempDir(t);
  // Writable: the probe is made and removed again, and nothing is left.
  assert.equal(await probeCgroups({ dir }, INST), undefined);
  assert.deepEqual(readdirSync(dir), []);
  // Not writable. Root ignores modes, so the hierarchy is a file: mkdir fails as on a read-only mount.
  const file = join(dir, 'not-a-directory');
  writeFileSync(file, '');
  const reason = await probeCgroups({ dir: file }, INST);
  assert.match(reason ?? '', /no cgroup can be made in .*not-a-directory/);
});

test('OOM scores: Basin protected where the kernel lets it, else the tenants raised; the postmaster’s children told', async (t) => {
  const dir = tempDir(t);
  const self = join(dir, 'oom_score_adj');
  writeFileSync(self, '0\n');
  assert.deepEqual(await startOomScores(silentLogger, self), { protected: -900, tenant: 0 });
  assert.equal(read(self), '-900');
  const warnings: string[] = [];
  const log = {
    ...silentLogger,
    warn: (_o: object, msg?: string) => void warnings.push(msg ?? ''),
  };
  const refused = await startOomScores(log, join(dir, 'no', 'such', 'file'));
  assert.deepEqual(refused, { protected: undefined, tenant: 900 });
  assert.match(warnings[0]!, /does not let Basin lower oom_score_adj.*raised to 900/);
  assert.deepEqual(postmasterOomEnv(refused), {
    PG_OOM_ADJUST_FILE: '/proc/self/oom_score_adj',
    PG_OOM_ADJUST_VALUE: '900',
  });
});

test('the OOM watch says each kill once, in the logs of the service or set it belongs to, across restarts', async (t) => {
  const root = v2Root(t);
  const data = tempDir(t);
  const layout = new Layout(data);
  const cgroups = new NodeCgroups([V2(root)], INST, { sharedMemoryBytes: 2 * GiB });
  const svc = { id: 'svc0000005', part: 0 };
  const set = { id: 'rs00000001', part: 1 };
  const [svcDir] = await cgroups.ensure(svc, nodeBounds(dedicated(500, 1), COUNTS));
  const [setDir] = await cgroups.ensure(set, nodeBounds(SHARED, COUNTS), true);
  const pooler = { id: 'svc0000005', part: 'pooler' as const };
  const [poolerDir] = await cgroups.ensure(pooler, poolerBounds(0, 0));
  mkdirSync(layout.instanceDir(svc.id), { recursive: true });
  mkdirSync(layout.instanceDir(set.id), { recursive: true });
  writeFileSync(join(layout.instanceDir(set.id), 'replica-set.json'), '{}');
  const events = (n: number) => `low 0\nhigh 0\nmax 9\noom ${n}\noom_kill ${n}\noom_group_kill 0\n`;
  const notes: [Target, ProgressNote][] = [];
  const watch = () =>
    new OomWatch(
      () => ({ cgroups, layout, locks: new KeyedLock(), log: silentLogger }),
      (target, note) => void notes.push([target, note]),
    );

  writeFileSync(join(svcDir!, 'memory.events'), events(0));
  writeFileSync(join(setDir!, 'memory.events'), events(0));
  await watch().look();
  assert.equal(notes.length, 0, 'nothing killed: nothing said');

  writeFileSync(join(svcDir!, 'memory.events'), events(1));
  writeFileSync(join(setDir!, 'memory.events'), events(2));
  writeFileSync(join(poolerDir!, 'memory.events'), events(1));
  await watch().look();
  assert.deepEqual(
    notes.map(([target, note]) => [target, note.severity, note.message]).sort(),
    [
      [
        { kind: 'replicaSet', id: 'rs00000001' },
        'WARNING',
        'basin: node1 ran out of memory (the bound of all shared services together: 2 GiB): the kernel killed 2 of its processes; PostgreSQL is down and is restarted',
      ],
      [
        { kind: 'service', id: 'svc0000005' },
        'WARNING',
        "basin: node0 ran out of memory (its bound: 1 GiB, its size's memory): the kernel killed 1 of its processes; PostgreSQL is down and is restarted",
      ],
      [
        { kind: 'service', id: 'svc0000005' },
        'WARNING',
        'basin: the connection pooler ran out of memory (its bound: 64 MiB): the kernel killed 1 of its processes; a pooler that died is restarted',
      ],
    ].sort(),
  );
  assert.deepEqual(JSON.parse(read(layout.oomKillsFile(svc.id))), { 0: 1, pooler: 1 });

  // A restarted Basin (a new watch) says nothing again; a count made anew
  // (lower) is taken silently, and what comes after it is said.
  notes.length = 0;
  await watch().look();
  assert.equal(notes.length, 0);
  writeFileSync(join(svcDir!, 'memory.events'), events(0));
  await watch().look();
  assert.equal(notes.length, 0);
  writeFileSync(join(svcDir!, 'memory.events'), events(1));
  await watch().look();
  assert.equal(notes.length, 1);

  // A deleted service's (its directory gone) is not written for.
  notes.length = 0;
  rmSync(layout.instanceDir(svc.id), { recursive: true });
  writeFileSync(join(svcDir!, 'memory.events'), events(5));
  await watch().look();
  assert.equal(notes.length, 0);
  assert.ok(!existsSync(layout.instanceDir(svc.id)));
});

test('the OOM watch stops a node whose private /tmp holds half its bound (pages no kill frees), and only such a node', async (t) => {
  const root = v2Root(t);
  const data = tempDir(t);
  const layout = new Layout(data);
  const cgroups = new NodeCgroups([V2(root)], INST, { sharedMemoryBytes: 2 * GiB });
  const events = (n: number) => `low 0\nhigh 0\nmax 9\noom ${n}\noom_kill ${n}\noom_group_kill 0\n`;
  // A process in a mount namespace of its own with a private tmpfs named as
  // confine.ts names them, holding `mb` MiB: the kernel's counting, for real.
  const holding = async (mb: number): Promise<ChildProcess> => {
    const child = spawn(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        'sh',
        '-c',
        `mount -t tmpfs -o size=64m basin-private /tmp && dd if=/dev/zero of=/tmp/f bs=1M count=${mb} 2>/dev/null && echo ready && exec sleep 60`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    t.after(() => child.kill('SIGKILL'));
    await new Promise((resolve) => child.stdout!.once('data', resolve));
    return child;
  };
  const notes: string[] = [];
  const watch = new OomWatch(
    () => ({ cgroups, layout, locks: new KeyedLock(), log: silentLogger }),
    (_target, note) => void notes.push(note.message),
  );
  const node = async (id: string, mb: number) => {
    const unit = { id, part: 0 };
    const [dir] = await cgroups.ensure(unit, nodeBounds(dedicated(500, 1), COUNTS));
    writeFileSync(join(dir!, 'memory.max'), `${64 * 1024 * 1024}\n`); // a bound of 64 MiB
    writeFileSync(join(dir!, 'memory.events'), events(0));
    mkdirSync(layout.instanceDir(id), { recursive: true });
    const child = await holding(mb);
    writeFileSync(join(dir!, 'cgroup.procs'), `${child.pid}\n`);
    return { dir: dir!, child };
  };
  const full = await node('svc0000021', 40);
  const light = await node('svc0000022', 8);
  await watch.look();
  assert.deepEqual(notes, [], 'no kill: nothing done');

  const exited = (c: ChildProcess) => new Promise((resolve) => c.once('exit', resolve));
  const fullExit = exited(full.child);
  writeFileSync(join(full.dir, 'memory.events'), events(1));
  writeFileSync(join(light.dir, 'memory.events'), events(1));
  await watch.look();
  await fullExit;
  assert.equal(full.child.signalCode, 'SIGKILL', 'the full one stopped');
  assert.equal(light.child.exitCode, null, 'the light one runs on');
  assert.equal(light.child.signalCode, null);
  assert.deepEqual(notes.sort(), [
    "basin: node0 ran out of memory (its bound: 64 MiB, its size's memory): the kernel killed 1 of its processes; PostgreSQL is down and is restarted",
    "basin: node0 ran out of memory (its bound: 64 MiB, its size's memory): the kernel killed 1 of its processes; PostgreSQL is down and is restarted; its private /tmp, /var/tmp, /dev/shm and /run/lock held 40 MiB, which no process's death frees: Basin stopped node0, and it is started again with them empty",
  ]);
});
