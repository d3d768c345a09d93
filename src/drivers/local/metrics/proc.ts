// What Linux's /proc says about processes: parents, CPU time and memory.
// Processes come and go between any two reads, so every reader treats a
// failure on one process (ENOENT, ESRCH, EACCES…) as "that process is gone"
// instead of throwing.

import { execFileSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

export interface ProcStat {
  pid: number;
  ppid: number;
  /** R, S, D, Z (zombie), … */
  state: string;
  /**
   * CPU time in clock ticks: its own (utime + stime) plus that of its
   * children it has reaped (cutime + cstime). Summed over a process tree this
   * only grows, even as children exit between samples: their time moves into
   * their parent's cutime/cstime when it reaps them (PostgreSQL reaps all).
   */
  cpuTicks: number;
  /** Clock ticks after boot: with the pid, tells a process from a later one reusing its pid. */
  startTime: number;
}

/** Parses /proc/<pid>/stat. The command name may hold spaces and parentheses: split after the last ')'. */
export function parseStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  // Fields from the 3rd (state) on: field n is at index n - 3.
  const f = text.slice(close + 2).split(' ');
  const num = (n: number) => Number(f[n - 3]);
  const stat = {
    pid: Number(text.slice(0, open).trim()),
    ppid: num(4),
    state: f[0] ?? '',
    cpuTicks: num(14) + num(15) + num(16) + num(17),
    startTime: num(22),
  };
  const ok = [stat.pid, stat.ppid, stat.cpuTicks, stat.startTime].every(Number.isSafeInteger);
  return ok ? stat : undefined;
}

/** Every process's stat, by pid: one pass over /proc, for finding children by ppid. */
export async function readProcessTable(): Promise<Map<number, ProcStat>> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  const stats = await Promise.all(pids.map((pid) => readStat(Number(pid))));
  const table = new Map<number, ProcStat>();
  for (const stat of stats) if (stat) table.set(stat.pid, stat);
  return table;
}

export async function readStat(pid: number): Promise<ProcStat | undefined> {
  try {
    return parseStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined; // exited
  }
}

/** Each process's children, by parent pid: made once per table, for every tree read from it. */
export function childrenOf(table: Map<number, ProcStat>): Map<number, ProcStat[]> {
  const children = new Map<number, ProcStat[]>();
  for (const stat of table.values()) {
    const siblings = children.get(stat.ppid);
    if (siblings) siblings.push(stat);
    else children.set(stat.ppid, [stat]);
  }
  return children;
}

/**
 * `root` and all its descendants, root first; empty when `root` is not in
 * the table. `children`: childrenOf(table), when several trees are read
 * from one table (the sampler: one per running node, each sample).
 */
export function processTree(
  table: Map<number, ProcStat>,
  root: number,
  children = childrenOf(table),
): ProcStat[] {
  const top = table.get(root);
  if (top === undefined) return [];
  const tree = [top];
  // Breadth first: `tree` grows as it is walked (parent links cannot form a cycle).
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]!.pid) ?? []));
  return tree;
}

/**
 * A process's resident memory in KiB: its proportional set size (PSS, from
 * smaps_rollup, Linux 4.14+) where readable, so that memory shared between
 * processes (PostgreSQL's shared_buffers, mapped by every backend) is counted
 * once across them, not once per process; else its resident set size (RSS,
 * from statm), which overcounts shared memory. 0 when the process is gone.
 */
export async function memoryKb(pid: number): Promise<number> {
  try {
    const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
    const pss = /^Pss:\s+(\d+) kB$/m.exec(rollup);
    if (pss) return Number(pss[1]);
    // A zombie or kernel thread has no memory map: empty rollup.
  } catch {
    // smaps_rollup needs ptrace access, or an older kernel: fall back to statm.
  }
  try {
    const statm = await readFile(`/proc/${pid}/statm`, 'utf8');
    const residentPages = Number(statm.split(' ')[1]);
    return Number.isFinite(residentPages) ? (residentPages * pageSize()) / 1024 : 0;
  } catch {
    return 0; // exited
  }
}

let ticks: number | undefined;
let page: number | undefined;

/** USER_HZ, the unit of /proc CPU times: 100 on every mainstream Linux, asked of getconf once. */
export function clockTicksPerSecond(): number {
  return (ticks ??= getconf('CLK_TCK', 100));
}

/** The unit of statm: 4 KiB mostly, 16 or 64 KiB on some arm64 kernels. */
export function pageSize(): number {
  return (page ??= getconf('PAGESIZE', 4096));
}

function getconf(name: string, fallback: number): number {
  try {
    const out = execFileSync('getconf', [name], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 2_000,
    });
    const n = Number(out.trim());
    return Number.isSafeInteger(n) && n > 0 ? n : fallback;
  } catch {
    return fallback;
  }
}
