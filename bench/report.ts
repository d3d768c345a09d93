// The shared reporting helpers of `npm run bench`: statistics, a machine
// summary and aligned tables, so every benchmark prints the same way.

import { cpus, loadavg, totalmem } from 'node:os';

/** What a benchmark hands back to run.ts for the closing summary. */
export interface BenchOutcome {
  /** The closing line, e.g. `ratio basin/bare: 0.72 (target >= 0.6)`. */
  headline: string;
  /** False when the figure misses its target: a warning, not a failure. */
  metTarget: boolean;
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1
    ? (s[mid] as number)
    : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** The p-th percentile (0-100) of values already sorted ascending: nearest rank. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

export function fixed(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

export function machineSummary(): string {
  const cores = cpus();
  return [
    `machine: ${cores.length} cpus (${cores[0]?.model.trim() ?? 'unknown model'}),`,
    `${Math.round(totalmem() / 2 ** 30)} GiB,`,
    `node ${process.version} ${process.platform}/${process.arch},`,
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  ].join(' ');
}

export function heading(title: string): void {
  console.log(`\n== ${title} ==`);
}

export function warn(message: string): void {
  console.log(`WARNING: ${message}`);
}

/** Prints rows as columns: text left-aligned, numbers (and '-') right-aligned. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): void {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const numeric = header.map((_, i) => rows.every((r) => /^[-+\d.%x]*$/.test(r[i] ?? '')));
  for (const r of all) {
    console.log(
      r
        .map((cell, i) =>
          numeric[i] ? cell.padStart(widths[i] as number) : cell.padEnd(widths[i] as number),
        )
        .join('  ')
        .trimEnd(),
    );
  }
}
