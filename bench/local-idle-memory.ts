// Benchmark: the resident memory of an idle `shared` service on the local
// driver: its postmaster and every descendant, summed. Target: under 40 MB.
//
// Memory is PSS (proportional set size, from /proc/<pid>/smaps): a page shared
// by k processes counts 1/k in each, so the sum over the cluster counts
// PostgreSQL's shared memory and the postgres binary once, as far as the
// cluster touched them. It is split into PostgreSQL's shared memory (shared
// buffers, WAL buffers, lock tables…), mapped files (the binary and its
// libraries: other postgres processes on the host share these pages and lower
// the figure) and private anonymous memory (each process's heap and caches).
// RSS, which counts every shared page in every process, and USS (the private
// pages) are shown for reference, with the memory_mb the API reports.
//
// Each type is measured alone on Basin: a POSTGRES service, then the default
// TIMESERIESDB one (timescaledb's launcher and scheduler are extra
// processes), each created, left idle, sampled a few times and deleted.

import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  claimDataDir,
  LocalBasin,
  postmasterPid,
  releaseDataDir,
  type ServiceBody,
} from './local-basin.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';
import type { BenchContext } from './bench-context.js';

const TARGET_MB = 40;
const IDLE_MS = 5_000;
const SAMPLES = 3;
const KIND_BODIES: [string, ServiceBody][] = [
  ['POSTGRES', { name: 'bench-idle-pg', cpu_millis: 'shared', memory_gbs: 'shared', addons: [] }],
  ['TIMESERIESDB', { name: 'bench-idle-ts', cpu_millis: 'shared', memory_gbs: 'shared' }],
];

/** One process's memory in KiB; the PSS parts are NaN when smaps is unreadable. */
interface Memory {
  rss: number;
  pss: number;
  shm: number;
  files: number;
  anon: number;
  uss: number;
}
const FIELDS = ['rss', 'pss', 'shm', 'files', 'anon', 'uss'] as const;

interface ProcMemory extends Memory {
  pid: number;
  title: string;
}

export async function localIdleMemory(ctx: BenchContext): Promise<BenchOutcome> {
  heading(
    `resident memory of an idle shared service (local driver), after ${IDLE_MS / 1000} s idle`,
  );
  const dataDir = await claimDataDir(ctx);
  let basin: LocalBasin | undefined;
  try {
    basin = await LocalBasin.start(
      dataDir,
      join(ctx.tmpDir, 'local-idle-memory.log'),
      ctx.settings.basinNodeArgs,
    );
    const results: (Memory & { kind: string; api: string; others: number })[] = [];
    for (const [kind, body] of KIND_BODIES) {
      const id = await basin.create(body);
      await basin.waitReady(id, 20, 180_000);
      await sleep(IDLE_MS);
      const pm = postmasterPid(basin.pgdata(id));
      if (!pm) throw new Error(`no postmaster.pid for service ${id}`);
      // Other postgres processes on the host (other clusters) share the
      // binary's pages and lower the cluster's PSS: the samples with the
      // fewest of them count.
      const samples: { procs: ProcMemory[]; others: number }[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        if (i > 0) await sleep(1_000);
        const procs = await treeMemory(pm.pid);
        if (procs.length === 0) throw new Error(`the postmaster ${pm.pid} of ${id} is gone`);
        samples.push({ procs, others: await otherProcessesOf(pm.pid, procs) });
      }
      const fewest = Math.min(...samples.map((x) => x.others));
      const used = samples.filter((x) => x.others === fewest);
      const sums = used.map((x) => total(x.procs));
      const api = (await basin.get(id))?.metrics?.memory_mb;
      const mid = Object.fromEntries(
        FIELDS.map((f) => [f, median(sums.map((x) => x[f]))]),
      ) as unknown as Memory;
      results.push({ kind, api: api === undefined ? '-' : String(api), others: fewest, ...mid });

      const shown = used.at(-1)!.procs;
      console.log(
        `\n${kind} service ${id}: ${shown.length} processes; ${used.length} of ${SAMPLES} samples ` +
          `(1 s apart) had ${fewest} other processes of the same postgres binary on the host ` +
          `and count; the last of them:`,
      );
      const cells = (m: Memory) => FIELDS.map((f) => fixed(m[f] / 1024, 1));
      table(
        ['pid', 'process', ...FIELDS.map((f) => `${f} MB`)],
        [
          ...shown.map((p) => [String(p.pid), p.title, ...cells(p)]),
          ['sum', '', ...cells(total(shown))],
        ],
      );
      await basin.deleteAndWait(id);
    }

    console.log(
      `\nmedians of the samples that count; pss = shm (PostgreSQL's shared memory) + files ` +
        `(binary, libraries) + anon (private heap); memory_mb: what the API reports`,
    );
    table(
      ['type', ...FIELDS.map((f) => `${f} MB`), 'memory_mb'],
      results.map((r) => [r.kind, ...FIELDS.map((f) => fixed(r[f] / 1024, 1)), r.api]),
    );
    const met = results.every((r) => r.pss / 1024 < TARGET_MB);
    const headline =
      `idle shared service (pss): ` +
      results.map((r) => `${r.kind} ${fixed(r.pss / 1024, 1)} MB`).join(', ') +
      ` (target < ${TARGET_MB} MB)`;
    console.log(headline);
    if (!met) warn(`an idle shared service uses ${TARGET_MB} MB or more.`);
    if (results.some((r) => r.others > 0)) {
      warn(
        'other postgres processes ran on the host while measuring: they share the pages of the ' +
          'binary, so the pss figures (files) are lower than for a service alone on the host.',
      );
    }
    return { headline, metTarget: met };
  } finally {
    await basin?.stop();
    await releaseDataDir(dataDir);
  }
}

/** The sum over processes; PSS falls back to RSS where smaps was unreadable. */
function total(procs: readonly Memory[]): Memory {
  const out: Memory = { rss: 0, pss: 0, shm: 0, files: 0, anon: 0, uss: 0 };
  for (const p of procs) {
    for (const f of FIELDS) {
      const v = f === 'pss' && !Number.isFinite(p.pss) ? p.rss : p[f];
      if (Number.isFinite(v)) out[f] += v;
    }
  }
  return out;
}

/** Live pids with their parent pid, from /proc/*\/stat. */
async function processTable(): Promise<Map<number, number>> {
  const parents = new Map<number, number>();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (f[0] !== 'Z' && f[0] !== 'X') parents.set(Number(name), Number(f[1]));
    } catch {
      // Exited meanwhile.
    }
  }
  return parents;
}

/** `root` and its descendants (by parent pid), with their memory. */
async function treeMemory(root: number): Promise<ProcMemory[]> {
  const parents = await processTable();
  if (!parents.has(root)) return [];
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    for (const [pid, ppid] of parents) if (ppid === tree[i]) tree.push(pid);
  }
  const out: ProcMemory[] = [];
  for (const pid of tree) {
    const m = await processMemory(pid);
    if (m) out.push(m);
  }
  return out;
}

/** How many processes outside `tree` run the same executable as `pid`. */
async function otherProcessesOf(pid: number, procs: readonly ProcMemory[]): Promise<number> {
  const tree = new Set(procs.map((p) => p.pid));
  const exe = await readlink(`/proc/${pid}/exe`).catch(() => undefined);
  if (exe === undefined) return 0;
  let n = 0;
  for (const other of (await processTable()).keys()) {
    if (tree.has(other)) continue;
    if ((await readlink(`/proc/${other}/exe`).catch(() => undefined)) === exe) n++;
  }
  return n;
}

async function processMemory(pid: number): Promise<ProcMemory | undefined> {
  let title: string;
  let rss: number;
  try {
    title = (await readFile(`/proc/${pid}/cmdline`, 'utf8'))
      .replace(/\0+$/, '')
      .replace(/\0/g, ' ');
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
  } catch {
    return undefined; // exited
  }
  const m: ProcMemory = {
    pid,
    title: title.length > 50 ? title.slice(0, 47) + '...' : title,
    rss,
    pss: NaN,
    shm: NaN,
    files: NaN,
    anon: NaN,
    uss: NaN,
  };
  let smaps: string;
  try {
    smaps = await readFile(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return m; // not ours to read, or exited: PSS falls back to RSS
  }
  Object.assign(m, { pss: 0, shm: 0, files: 0, anon: 0, uss: 0 });
  let kind: 'shm' | 'files' | 'anon' = 'anon';
  for (const line of smaps.split('\n')) {
    // A mapping's header: "start-end perms offset dev inode [name]".
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      const name = header[1] ?? '';
      // PostgreSQL's main shared memory is an anonymous shared mapping
      // ("/dev/zero (deleted)"), or System V / POSIX shared memory.
      kind = /^\/dev\/zero|^\/SYSV|^\/dev\/shm\//.test(name)
        ? 'shm'
        : name.startsWith('/')
          ? 'files'
          : 'anon';
      continue;
    }
    const field = /^(Pss|Private_Clean|Private_Dirty):\s+(\d+) kB/.exec(line);
    if (!field) continue;
    const kb = Number(field[2]);
    if (field[1] === 'Pss') {
      m.pss += kb;
      m[kind] += kb;
    } else {
      m.uss += kb;
    }
  }
  return m;
}
