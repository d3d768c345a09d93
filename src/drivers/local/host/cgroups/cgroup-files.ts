// Writing a cgroup's directory and limit files (node-cgroups.ts), as the
// kernel takes them: a value is written only when the file holds another
// (the kernel refills a throttled CPU group's time at every write, so
// rewriting the same quota at each step of an operation would loosen it),
// in an order the kernel accepts, and a memory bound the kernel cannot
// take yet is left for later rather than failing the node.

import { readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LimitFile } from './cgroup-hierarchy.js';

/**
 * Writes the limit files of `dir` that differ. A write the kernel refuses
 * is tried again after the others: v1 keeps memory+swap at least memory,
 * so raising both takes memory+swap first, lowering them memory first.
 * Returns the memory limits the kernel refused for now (v1 refuses one
 * below what the cgroup holds: EBUSY, after trying to reclaim), [] when
 * every file took; any other refusal throws.
 */
export async function writeLimits(dir: string, files: LimitFile[]): Promise<LimitFile[]> {
  let pending = files;
  for (let round = 0; ; round++) {
    const failed: { f: LimitFile; err: NodeJS.ErrnoException }[] = [];
    for (const f of pending) {
      const path = join(dir, f.file);
      const now = await readFile(path, 'utf8').catch(() => undefined);
      if (now === undefined && f.optional) continue;
      if (now !== undefined && same(now, f.value)) continue;
      await writeFile(path, f.value).catch((err: NodeJS.ErrnoException) => failed.push({ f, err }));
    }
    if (failed.length === 0) return [];
    if (round === 0 && failed.length < pending.length) {
      pending = failed.map((x) => x.f);
      continue;
    }
    const busy =
      failed.every((x) => x.f.file.startsWith('memory.')) &&
      failed.some((x) => x.err.code === 'EBUSY');
    if (!busy) throw failed[0]!.err;
    return failed.map((x) => x.f);
  }
}

/** A limit as the kernel reads it back against what was written ("-1" reads as v1's page-rounded maximum). */
function same(now: string, value: string): boolean {
  const t = now.trim();
  if (t === value) return true;
  return value === '-1' && /^\d+$/.test(t) && Number(t) >= 2 ** 62;
}

/** Makes a cgroup (root's alone: the tenant has nothing to read or write there) unless it is there. */
export async function mkdirOnce(dir: string): Promise<void> {
  await mkdir(dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
}

/** Removes an empty cgroup; false when it is not there or still holds processes. */
export async function removed(dir: string): Promise<boolean> {
  return rmdir(dir).then(
    () => true,
    () => false,
  );
}

/** The pids in a cgroup. */
export async function pidsIn(dir: string): Promise<number[]> {
  return pidsOf(await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => ''));
}

/** The pids in a cgroup, read at once (none when it is not there). */
export function pidsInNow(dir: string): number[] {
  try {
    return pidsOf(readFileSync(join(dir, 'cgroup.procs'), 'utf8'));
  } catch {
    return [];
  }
}

/** The pids of a cgroup.procs file's text. */
const pidsOf = (text: string): number[] =>
  text
    .split('\n')
    .filter((l) => /^\d+$/.test(l))
    .map(Number);
